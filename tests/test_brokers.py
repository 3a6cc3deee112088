"""Real brokers on loopback: each one answers a raw CONNECT of every MQTT version it serves (3.1.1, 5.0), listens
on 127.0.0.1 only, and is gone once stopped; a broker that fails to start says why. RabbitMQ also answers AMQP
0-9-1, and its whole process group and the epmd started for it go when it stops; mqttools answers MQTT 5.0 only.
A missing broker fails these tests: `make test` installs all five."""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pika
import pytest

from mqttaudit import codec
from mqttaudit.codec import properties
from mqttaudit.probe import brokers
from mqttaudit.probe.brokers import (
    BROKERS,
    NODE_PATH_VARIABLE,
    VERSIONS,
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


def receive_packet(conn: socket.socket) -> bytes:
    """One whole packet: the fixed header's first byte, its Remaining Length, and that many bytes."""
    data = receive(conn, 1)
    while len(data) < 5 and (more := receive(conn, 1)):
        data += more
        if not more[0] & 0x80:
            break
    remaining, _ = codec.read_remaining_length(data, 1, len(data))
    return data + receive(conn, remaining)


#: The CONNECT protocol level of each version.
PROTOCOL_LEVELS = {"3.1.1": 4, "5": 5}


def connack_for(host: str, port: int, client_id: str, version: str = "3.1.1") -> codec.Connack:
    connect = codec.Connect(client_id=client_id, protocol_level=PROTOCOL_LEVELS[version])
    with socket.create_connection((host, port), timeout=5) as conn:
        conn.sendall(codec.encode(connect, version=version))
        data = receive_packet(conn)
    decoded = codec.decode(data, "server", version=version)
    assert decoded.violations == []
    [connack] = decoded.packets
    assert isinstance(connack, codec.Connack)
    return connack


def assert_refused(host: str, port: int) -> None:
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=2).close()


def running(pid: int) -> bool:
    """A live process; a zombie is dead, and where PID 1 does not reap orphans it stays listed."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def process_tree(roots: Iterable[int]) -> set[int]:
    """``roots`` and every process descending from them, read from /proc."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it ended meanwhile
        parents[int(stat.parent.name)] = int(fields[1])
    tree = set(roots)
    grown = True
    while grown:
        children = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= children
        grown = bool(children)
    return tree


def listening_sockets(pids: Iterable[int]) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket the processes ``pids`` listen on, IPv4 and IPv6."""
    inodes: set[str] = set()
    for pid in pids:
        fd_dir = Path(f"/proc/{pid}/fd")
        for fd in fd_dir.glob("*") if fd_dir.exists() else ():
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    found: set[tuple[str, int]] = set()
    for table, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            address, port = local.split(":")
            raw = bytes.fromhex(address)
            # /proc/net prints the address as 32-bit words in host (little-endian) order.
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
            found.add((socket.inet_ntop(family, raw), int(port, 16)))
    return found


def broker_processes(broker: RunningBroker) -> set[int]:
    return process_tree({broker.pid, *broker.companion_pids})


@pytest.fixture(scope="module", params=BROKERS)
def broker(request: pytest.FixtureRequest) -> Iterator[RunningBroker]:
    with start_or_fail(request.param) as running:
        yield running


def test_broker_accepts_a_clean_session_connect_of_each_version_it_serves(broker: RunningBroker) -> None:
    for version in VERSIONS[broker.name]:
        connack = connack_for(broker.host, broker.port, f"t1-v{version}", version)

        assert connack.return_code == 0, version
        assert not connack.session_present, version


def test_broker_listens_on_127_0_0_1_only(broker: RunningBroker) -> None:
    # Linux routes all of 127.0.0.0/8 to lo: a broker bound to 0.0.0.0 would accept this connection.
    assert broker.url == f"mqtt://127.0.0.1:{broker.port}"
    assert_refused("127.0.0.2", broker.port)


def test_every_socket_the_broker_listens_on_is_on_loopback(broker: RunningBroker) -> None:
    listening = listening_sockets(broker_processes(broker))

    assert ("127.0.0.1", broker.port) in listening
    assert {address for address, _ in listening} <= {"127.0.0.1", "::1"}
    for _, port in listening:
        assert_refused("127.0.0.2", port)


@pytest.mark.parametrize("name", BROKERS)
def test_stopped_broker_process_is_reaped_and_its_port_closed(name: BrokerName) -> None:
    broker = start_or_fail(name)
    workdir = broker.log_path.parent
    # Its whole tree: RabbitMQ's script, beam and beam's helpers, and the epmd started for it.
    processes = broker_processes(broker)
    listening = listening_sockets(processes)

    broker.stop()

    assert broker.pid in processes
    assert [pid for pid in processes if running(pid)] == []
    assert_refused(broker.host, broker.port)
    for address, port in listening:
        assert_refused(address, port)
    assert not workdir.exists()


@pytest.fixture(scope="module")
def rabbitmq() -> Iterator[RunningBroker]:
    with start_or_fail("rabbitmq") as running:
        yield running


def test_rabbitmq_serves_amqp_beside_mqtt(rabbitmq: RunningBroker) -> None:
    amqp_url = rabbitmq.urls["amqp"]
    assert "rabbitmq" in available_brokers()
    assert rabbitmq.urls["mqtt"] == rabbitmq.url
    assert amqp_url.startswith("amqp://guest:guest@127.0.0.1:") and amqp_url.endswith("/%2F")

    connection = pika.BlockingConnection(pika.URLParameters(amqp_url + "?socket_timeout=5&stack_timeout=10"))
    try:
        channel = connection.channel()
        queue = channel.queue_declare("", exclusive=True).method.queue
        channel.basic_publish("", queue, b"over AMQP")
        method, _, body = channel.basic_get(queue, auto_ack=True)
    finally:
        connection.close()

    assert method is not None and body == b"over AMQP"


def test_rabbitmq_runs_with_its_own_epmd_and_listens_on_four_loopback_ports(rabbitmq: RunningBroker) -> None:
    amqp_port = int(rabbitmq.urls["amqp"].rsplit(":", 1)[1].split("/")[0])
    [epmd] = rabbitmq.companion_pids
    epmd_ports = {port for _, port in listening_sockets([epmd])}

    processes = broker_processes(rabbitmq)
    listening = listening_sockets(processes)

    # The rabbitmq-server script leads the process group of beam; epmd runs beside it, stopped with it.
    [beam] = [pid for pid in processes if Path(f"/proc/{pid}/comm").read_text().strip() == "beam.smp"]
    assert os.getpgid(beam) == rabbitmq.pid
    assert epmd in processes and os.getpgid(epmd) != rabbitmq.pid
    # MQTT, AMQP, Erlang distribution, and epmd (also on ::1, which it always adds); none is a default port.
    assert len({port for _, port in listening}) == 4
    assert {rabbitmq.port, amqp_port} <= {port for address, port in listening if address == "127.0.0.1"}
    assert len(epmd_ports) == 1 and not epmd_ports & {4369, 5672, 1883, 25672}
    assert {address for address, _ in listening} <= {"127.0.0.1", "::1"}


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


def test_missing_rabbitmq_is_unavailable_with_install_instructions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(brokers, "RABBITMQ_SERVER", tmp_path / "rabbitmq-server")

    with pytest.raises(BrokerUnavailable) as error:
        start_broker("rabbitmq")

    assert str(error.value) == (
        "rabbitmq-server is not installed: run scripts/install-test-deps.sh (or apt-get install rabbitmq-server)"
    )
    assert "rabbitmq" not in available_brokers()


@pytest.fixture(scope="module")
def mqttools() -> Iterator[RunningBroker]:
    with start_or_fail("mqttools") as running:
        yield running


def test_mqttools_answers_a_5_0_connect_with_a_5_0_connack_and_its_properties(mqttools: RunningBroker) -> None:
    connect = codec.Connect(client_id="five", protocol_level=5, properties=properties.make(receive_maximum=10))
    with socket.create_connection((mqttools.host, mqttools.port), timeout=5) as conn:
        conn.sendall(codec.encode(connect, version="5"))
        data = receive_packet(conn)

    decoded = codec.decode(data, "server", version="5")
    assert decoded.violations == []
    assert decoded.packets == [
        codec.Connack(
            return_code=0,
            properties=properties.make(
                maximum_qos=0, wildcard_subscription_available=0, shared_subscription_available=0
            ),
        )
    ]
    assert "mqttools" in available_brokers()


def test_mqttools_sends_nothing_back_to_a_3_1_1_connect(mqttools: RunningBroker) -> None:
    with socket.create_connection((mqttools.host, mqttools.port), timeout=1) as conn:
        conn.sendall(codec.encode(codec.Connect(client_id="four")))
        # It stops reading the connection but leaves it open: silence, not a close, is what shows.
        try:
            answer = conn.recv(16)
        except TimeoutError:
            answer = b""

    assert answer == b""


def test_missing_mqttools_is_unavailable_with_install_instructions(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes importlib.util.find_spec answer None, as for a module that is not there.
    monkeypatch.setitem(sys.modules, "mqttools", None)

    with pytest.raises(BrokerUnavailable) as error:
        start_broker("mqttools")

    assert str(error.value) == (
        f"mqttools is not installed in {sys.executable}: install the test extra (pip install -e '.[test]')"
    )
    assert "mqttools" not in available_brokers()
