"""Real brokers on loopback: each one answers a raw MQTT 3.1.1 CONNECT, listens on 127.0.0.1 only, and is gone
once stopped; a broker that fails to start says why. A missing broker fails these tests: `make test` installs
all three."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mqttaudit import codec
from mqttaudit.probe.brokers import (
    BROKERS,
    NODE_PATH_VARIABLE,
    BrokerName,
    BrokerStartError,
    BrokerUnavailable,
    PortInUse,
    RunningBroker,
    available_brokers,
    free_port,
    launch_broker,
    start_broker,
)


def start_or_fail(name: BrokerName, workdir: Path | None = None) -> RunningBroker:
    try:
        return start_broker(name, workdir=workdir)
    except BrokerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


def receive(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size and (chunk := conn.recv(size - len(data))):
        data += chunk
    return data


def connack_for(host: str, port: int, client_id: str) -> codec.Connack:
    with socket.create_connection((host, port), timeout=5) as conn:
        conn.sendall(codec.encode(codec.Connect(client_id=client_id)))
        data = receive(conn, 4)
    decoded = codec.decode(data, "server")
    assert decoded.violations == []
    [connack] = decoded.packets
    assert isinstance(connack, codec.Connack)
    return connack


def assert_refused(host: str, port: int) -> None:
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=2).close()


@pytest.fixture(scope="module", params=BROKERS)
def broker(request: pytest.FixtureRequest) -> Iterator[RunningBroker]:
    with start_or_fail(request.param) as running:
        yield running


def test_broker_accepts_a_clean_session_connect(broker: RunningBroker) -> None:
    connack = connack_for(broker.host, broker.port, "t1")

    assert connack.return_code == 0
    assert not connack.session_present


def test_broker_listens_on_127_0_0_1_only(broker: RunningBroker) -> None:
    # Linux routes all of 127.0.0.0/8 to lo: a broker bound to 0.0.0.0 would accept this connection.
    assert broker.url == f"mqtt://127.0.0.1:{broker.port}"
    assert_refused("127.0.0.2", broker.port)


@pytest.mark.parametrize("name", BROKERS)
def test_stopped_broker_process_is_reaped_and_its_port_closed(name: BrokerName) -> None:
    broker = start_or_fail(name)
    workdir = broker.log_path.parent

    broker.stop()

    with pytest.raises(ProcessLookupError):
        os.kill(broker.pid, 0)
    assert_refused(broker.host, broker.port)
    assert not workdir.exists()


def test_broker_given_a_workdir_leaves_its_config_and_output_there(tmp_path: Path) -> None:
    with start_or_fail("mosquitto", workdir=tmp_path) as broker:
        connack_for(broker.host, broker.port, "kept")

    assert f"listener {broker.port} 127.0.0.1" in (tmp_path / "mosquitto.conf").read_text()
    assert "Sending CONNACK to kept" in (tmp_path / "mosquitto.log").read_text()


def test_broker_that_rejects_its_config_is_reported_with_its_error(tmp_path: Path) -> None:
    config = tmp_path / "amqtt.yaml"
    config.write_text(json.dumps({"listeners": {"default": {"type": "carrier-pigeon", "bind": "127.0.0.1:1"}}}))
    command = [sys.executable, "-m", "amqtt.scripts.broker_script", "-c", str(config)]

    with pytest.raises(BrokerStartError) as error:
        launch_broker("amqtt", command, port=free_port(), workdir=tmp_path)

    message = str(error.value)
    assert message.startswith("amqtt exited with status 1 before listening on 127.0.0.1:")
    assert f"command: {sys.executable} -m amqtt.scripts.broker_script -c {config}" in message
    assert "'carrier-pigeon' is not a valid ListenerType" in message


def test_broker_binary_that_does_not_exist_is_reported_with_the_command(tmp_path: Path) -> None:
    missing = tmp_path / "bin" / "mosquitto"

    with pytest.raises(BrokerStartError) as error:
        launch_broker("mosquitto", [str(missing), "-c", "mosquitto.conf"], port=free_port(), workdir=tmp_path)

    assert str(error.value) == (
        f"mosquitto could not be run: [Errno 2] No such file or directory: '{missing}'\n"
        f"command: {missing} -c mosquitto.conf"
    )


def test_broker_that_never_listens_is_killed_after_the_timeout(tmp_path: Path) -> None:
    script = "import os, time; print('pid', os.getpid(), flush=True); time.sleep(60)"

    with pytest.raises(BrokerStartError) as error:
        launch_broker("sleeper", [sys.executable, "-c", script], port=free_port(), workdir=tmp_path, timeout=1)

    message = str(error.value)
    assert "sleeper did not listen on 127.0.0.1:" in message
    assert " within 1 s\n" in message
    pid = int(message.rsplit("pid ", 1)[1])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_port_held_by_another_process_is_not_taken_for_the_brokers_own(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as other:
        port = other.getsockname()[1]
        script = f"import socket, time; socket.create_server(('127.0.0.1', {port})); time.sleep(60)"

        with pytest.raises(PortInUse) as error:
            launch_broker("binder", [sys.executable, "-c", script], port=port, workdir=tmp_path, ready="never")

    assert "binder could not bind 127.0.0.1:" in str(error.value)
    assert "Address already in use" in str(error.value)


def test_missing_aedes_is_unavailable_with_install_instructions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(NODE_PATH_VARIABLE, str(tmp_path))

    with pytest.raises(BrokerUnavailable) as error:
        start_broker("aedes")

    assert str(error.value) == (
        f"aedes is not installed in {tmp_path}: run scripts/install-test-deps.sh, "
        f"or set {NODE_PATH_VARIABLE} to its npm prefix"
    )
    assert "aedes" not in available_brokers()
