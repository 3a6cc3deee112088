"""A paho-mqtt test harness driven through behaviour topics (mqttaudit.serve.behaviour): it connects with a
persistent session, subscribes to ``mqttaudit/behaviour/<ClientId>``, carries out each command with paho's own
API, and leaves after ``--idle`` seconds without a command. paho reconnects by itself when the broker drops it.

Usage: python paho_behaviour.py HOST PORT (4|5) CLIENT_ID [--idle SECONDS]
"""

from __future__ import annotations

import argparse
import queue
import time

import paho.mqtt.client as mqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from mqttaudit.serve.behaviour import DISCONNECT, PUBLISH, RECONNECT, parse_command


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("protocol", type=int, choices=(4, 5))
    parser.add_argument("client_id")
    parser.add_argument("--idle", type=float, default=3.0)
    args = parser.parse_args()
    v5 = args.protocol == 5
    client = mqtt.Client(
        mqtt.CallbackAPIVersion.VERSION2,
        client_id=args.client_id,
        protocol=mqtt.MQTTv5 if v5 else mqtt.MQTTv311,
        clean_session=None if v5 else False,
    )
    client.reconnect_delay_set(0.2, 1)
    commands: queue.Queue[str] = queue.Queue()
    topic = f"mqttaudit/behaviour/{args.client_id}"
    client.on_message = lambda _c, _u, message: commands.put(message.payload.decode())
    client.on_connect = lambda c, _u, _f, _r, _p=None: c.subscribe(topic, qos=0)
    connect: dict[str, object] = {}
    if v5:
        properties = Properties(PacketTypes.CONNECT)
        properties.SessionExpiryInterval = 300
        connect = {"clean_start": False, "properties": properties}
    client.connect(args.host, args.port, keepalive=30, **connect)  # type: ignore[arg-type]
    client.loop_start()
    try:
        while True:
            try:
                command = parse_command(commands.get(timeout=args.idle))
            except queue.Empty:
                break
            if command.verb == PUBLISH:
                for number in range(command.count):
                    payload = f"{number:0{command.size}d}".encode()[-command.size :]
                    client.publish(command.topic, payload, qos=command.qos, retain=command.retain)
            elif command.verb == RECONNECT:
                client.disconnect()
                time.sleep(0.2)
                client.reconnect()
            elif command.verb == DISCONNECT:
                break
    finally:
        client.disconnect()
        client.loop_stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
