"""Real MQTT brokers (mosquitto, amqtt, aedes, RabbitMQ with its MQTT plugin, and mqttools, which speaks MQTT
5.0 only) run as child processes listening on 127.0.0.1 only.

>>> with start_broker("mosquitto") as broker:  # doctest: +SKIP
...     broker.url
'mqtt://127.0.0.1:40117'
>>> with start_broker("rabbitmq") as broker:  # doctest: +SKIP
...     broker.urls
{'mqtt': 'mqtt://127.0.0.1:40119', 'amqp': 'amqp://guest:guest@127.0.0.1:40121/%2F'}
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Literal, TypeAlias, get_args

BrokerName: TypeAlias = Literal["mosquitto", "amqtt", "aedes", "rabbitmq", "mqttools"]
BROKERS: tuple[BrokerName, ...] = get_args(BrokerName)
HOST = "127.0.0.1"
#: The MQTT versions each broker serves here, as the codec names them (RabbitMQ 3.10 has no MQTT 5.0).
VERSIONS: dict[str, tuple[str, ...]] = {
    "mosquitto": ("3.1.1", "5"),
    "amqtt": ("3.1.1",),
    "aedes": ("3.1.1",),
    "rabbitmq": ("3.1.1",),
    "mqttools": ("5",),
}

#: Where ``npm install --prefix`` put aedes; the default is ``.node`` in the source checkout, else in the cwd.
NODE_PATH_VARIABLE = "MQTTAUDIT_NODE_PATH"
AEDES_SERVER = Path(__file__).with_name("aedes_server.js")
_SOURCE_CHECKOUT = Path(__file__).resolve().parents[3]
_INSTALL_HINT = "run scripts/install-test-deps.sh"
_PORT_ATTEMPTS = 3
_TAIL_LINES = 20
_DEFAULT_TIMEOUT = 15.0
#: How a broker says that a port it was given is taken (RabbitMQ checks its distribution port itself).
_PORT_TAKEN = re.compile(r"address already in use|\beaddrinuse\b|\bdist_port_already_used\b", re.IGNORECASE)
#: Where Debian's rabbitmq-server package puts the script that runs the node in the foreground.
RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")


class BrokerUnavailable(Exception):
    """The broker is not installed here; the message says how to install it."""


class BrokerStartError(Exception):
    """The broker process died, or never listened, before the bound; the message carries its output's tail."""


class PortInUse(BrokerStartError):
    """Another process took the port between picking it and the broker binding it."""


@dataclass(eq=False)
class RunningBroker:
    """A broker child process listening on ``host:port``; :meth:`stop` ends it (also on leaving a ``with``)."""

    name: str
    host: str
    port: int
    command: tuple[str, ...]
    log_path: Path
    _process: subprocess.Popen[bytes] = field(repr=False)
    _owned_dir: Path | None = field(default=None, repr=False)
    #: URLs of its other listeners, by scheme (RabbitMQ's AMQP listener).
    _other_urls: dict[str, str] = field(default_factory=dict, repr=False)
    #: It leads its own process group, and :meth:`stop` signals the whole group (RabbitMQ: a shell and beam).
    _group: bool = field(default=False, repr=False)
    #: Processes it needs (RabbitMQ's epmd), stopped after it.
    _companions: tuple[subprocess.Popen[bytes], ...] = field(default=(), repr=False)

    @property
    def pid(self) -> int:
        """The process started; for a broker run as a process group, the group's leader (and the group's id)."""
        return self._process.pid

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    @property
    def urls(self) -> dict[str, str]:
        """Every listener it serves, by scheme: ``mqtt`` always, ``amqp`` for RabbitMQ (``amqps`` and ``mqtts``
        too when started by :func:`start_rabbitmq_tls`)."""
        return {"mqtt": self.url, **self._other_urls}

    @property
    def companion_pids(self) -> tuple[int, ...]:
        """The processes started for it and stopped with it (RabbitMQ's epmd)."""
        return tuple(companion.pid for companion in self._companions)

    def output(self) -> str:
        """What the broker wrote to stdout and stderr so far."""
        return _read_text(self.log_path)

    def stop(self, timeout: float = 5.0) -> None:
        """Sends SIGTERM, then SIGKILL if the broker is still running after ``timeout`` seconds, and reaps it;
        then the same for its companions."""
        if self._group:
            _terminate_group(self._process, timeout)
        else:
            _terminate(self._process, timeout)
        for companion in self._companions:
            _terminate(companion, timeout)
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)
            self._owned_dir = None

    def __enter__(self) -> RunningBroker:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def available_brokers() -> list[BrokerName]:
    """The brokers that :func:`start_broker` can start on this machine."""
    available = []
    for name in BROKERS:
        try:
            _RECIPES[name].locate()
        except BrokerUnavailable:
            continue
        available.append(name)
    return available


def start_broker(name: BrokerName, *, workdir: Path | None = None, timeout: float | None = None) -> RunningBroker:
    """Starts ``name`` on a free port of 127.0.0.1 and returns once it accepts TCP connections.

    Its configuration and output go to ``workdir`` (a temporary directory, removed on stop, when None).
    ``timeout`` bounds the start (default: 15 s, 60 s for RabbitMQ, which takes several seconds to boot).
    Raises :class:`BrokerUnavailable` when it is not installed, :class:`BrokerStartError` when it fails to start.
    """
    return _start(name, _RECIPES[name], workdir, timeout)


def start_rabbitmq_tls(
    cafile: Path,
    certfile: Path,
    keyfile: Path,
    *,
    verify_peer: bool = False,
    workdir: Path | None = None,
    timeout: float | None = None,
) -> RunningBroker:
    """RabbitMQ as :func:`start_broker` starts it, with TLS listeners for AMQP (``amqps`` in its URLs) and MQTT
    (``mqtts``) besides the plain ones, serving ``certfile`` and ``keyfile`` (PEM) and trusting ``cafile``;
    ``verify_peer`` refuses a client without a certificate that ``cafile`` signed."""
    plain = _RECIPES["rabbitmq"]

    def prepare(port: int, workdir: Path) -> _Launch:
        launch = plain.prepare(port, workdir)
        # A port the node's distribution took meanwhile is reported as in use, and the start tried again.
        taken = {port, *launch.other_ports, *([launch.companion.port] if launch.companion else [])}
        amqps_port, mqtts_port = _free_ports(2, avoid=taken)
        verify = "verify_peer" if verify_peer else "verify_none"
        with (workdir / "rabbitmq.conf").open("a") as config:
            config.write(
                f"listeners.ssl.default = {HOST}:{amqps_port}\n"
                f"mqtt.listeners.ssl.default = {HOST}:{mqtts_port}\n"
                f"ssl_options.cacertfile = {cafile}\nssl_options.certfile = {certfile}\n"
                f"ssl_options.keyfile = {keyfile}\nssl_options.verify = {verify}\n"
                f"ssl_options.fail_if_no_peer_cert = {'true' if verify_peer else 'false'}\n"
            )
        urls = {**launch.urls, "amqps": f"amqps://guest:guest@{HOST}:{amqps_port}/%2F"}
        urls["mqtts"] = f"mqtts://{HOST}:{mqtts_port}"
        return replace(launch, other_ports=(*launch.other_ports, amqps_port, mqtts_port), urls=urls)

    return _start("rabbitmq", _Recipe(plain.locate, prepare, plain.timeout), workdir, timeout)


def _start(name: str, recipe: _Recipe, workdir: Path | None, timeout: float | None) -> RunningBroker:
    recipe.locate()
    timeout = recipe.timeout if timeout is None else timeout
    owned_dir = None
    if workdir is None:
        workdir = owned_dir = Path(tempfile.mkdtemp(prefix=f"mqttaudit-{name}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        broker = _launch_on_free_port(name, recipe, workdir, timeout)
    except BaseException:
        if owned_dir is not None:
            shutil.rmtree(owned_dir, ignore_errors=True)
        raise
    broker._owned_dir = owned_dir
    return broker


def launch_broker(
    name: str,
    command: Sequence[str],
    *,
    port: int,
    workdir: Path,
    env: Mapping[str, str] | None = None,
    ready: str | None = None,
    timeout: float = _DEFAULT_TIMEOUT,
    other_ports: Sequence[int] = (),
    check: Callable[[], bool] | None = None,
    urls: Mapping[str, str] | None = None,
    group: bool = False,
    companions: Sequence[subprocess.Popen[bytes]] = (),
) -> RunningBroker:
    """Runs ``command`` with its output in ``workdir/NAME.log`` and waits up to ``timeout`` seconds for it to
    accept TCP connections on 127.0.0.1:``port``; a process that dies or never listens is reported with the tail
    of its output (and killed).

    ``ready`` is a regular expression that the broker writes once it listens: it tells the broker's own listener
    from another process that took the port meanwhile. A broker with several listeners is ready once
    ``other_ports`` accept connections too and ``check()`` is true. ``group`` runs it as the leader of its own
    process group, stopped as a whole; ``companions`` are processes stopped after it (also when it fails here).
    """
    log_path = workdir / f"{name}.log"
    with log_path.open("wb") as log:
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                env=env,
                start_new_session=group,
            )
        except OSError as exc:
            for companion in companions:
                _terminate(companion, _DEFAULT_TIMEOUT)
            raise BrokerStartError(f"{name} could not be run: {exc}\ncommand: {shlex.join(command)}") from exc
    broker = RunningBroker(
        name=name,
        host=HOST,
        port=port,
        command=tuple(command),
        log_path=log_path,
        _process=process,
        _other_urls=dict(urls or {}),
        _group=group,
        _companions=tuple(companions),
    )
    try:
        _wait_until_listening(broker, ready, (port, *other_ports), check, timeout)
    except BaseException:
        broker.stop()  # what failed to start leaves nothing running, companions included
        raise
    return broker


def _wait_until_listening(
    broker: RunningBroker, ready: str | None, ports: Sequence[int], check: Callable[[], bool] | None, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    where = f"{HOST}:{ports[0]}" if len(ports) == 1 else f"{HOST} ports {', '.join(map(str, ports))}"
    while True:
        # The status before the output: a broker that has exited has written all of it.
        status = broker._process.poll()
        output = broker.output()
        if _PORT_TAKEN.search(output):
            raise PortInUse(_failure(broker, f"could not bind {where}: the port is in use"))
        if status is not None:
            raise BrokerStartError(_failure(broker, f"exited with status {status} before listening on {where}"))
        if (
            (ready is None or re.search(ready, output))
            and all(_accepts_connections(port) for port in ports)
            and (check is None or check())
        ):
            return
        if time.monotonic() > deadline:
            raise BrokerStartError(_failure(broker, f"did not listen on {where} within {timeout:g} s"))
        time.sleep(0.05)


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def node_prefix() -> Path:
    """The ``npm install --prefix`` directory holding aedes."""
    if configured := os.environ.get(NODE_PATH_VARIABLE):
        return Path(configured)
    candidates = [_SOURCE_CHECKOUT / ".node", Path.cwd() / ".node"]
    return next((path for path in candidates if path.is_dir()), candidates[0])


@dataclass(frozen=True)
class _Launch:
    """One broker's command for one port, its environment, and the line it writes once it listens; for a broker
    with more listeners, their ports and URLs, a last readiness check, and a companion to start first."""

    command: list[str]
    ready: str
    env: dict[str, str] | None = None
    other_ports: tuple[int, ...] = ()
    check: Callable[[], bool] | None = None
    urls: dict[str, str] = field(default_factory=dict)
    group: bool = False
    companion: _Companion | None = None


@dataclass(frozen=True)
class _Companion:
    """A process a broker needs listening on ``port`` before it starts."""

    name: str
    command: list[str]
    port: int


@dataclass(frozen=True)
class _Recipe:
    """How to find one broker (``locate`` raises BrokerUnavailable) and how to launch it on a port."""

    locate: Callable[[], str]
    prepare: Callable[[int, Path], _Launch]
    timeout: float = _DEFAULT_TIMEOUT


def _locate_mosquitto() -> str:
    # Debian installs it in /usr/sbin, which a non-root PATH may lack.
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin"])
    binary = shutil.which("mosquitto", path=path)
    if binary is None:
        raise BrokerUnavailable(f"mosquitto is not installed: {_INSTALL_HINT} (or apt-get install mosquitto)")
    return binary


def _prepare_mosquitto(port: int, workdir: Path) -> _Launch:
    # mosquitto reads it before dropping root privileges to the user 'mosquitto': a root-only directory is fine.
    config = workdir / "mosquitto.conf"
    config.write_text(
        f"listener {port} {HOST}\nallow_anonymous true\npersistence false\nlog_dest stderr\nlog_type all\n"
    )
    return _Launch([_locate_mosquitto(), "-c", str(config)], ready=r"mosquitto version \S+ running")


def _locate_amqtt() -> str:
    if importlib.util.find_spec("amqtt") is None:
        raise BrokerUnavailable(
            f"amqtt is not installed in {sys.executable}: install the test extra (pip install -e '.[test]')"
        )
    return sys.executable


def _prepare_amqtt(port: int, workdir: Path) -> _Launch:
    # JSON is YAML. Without a config amqtt binds 0.0.0.0:1883 and publishes $SYS topics.
    config = {
        "listeners": {"default": {"type": "tcp", "bind": f"{HOST}:{port}"}},
        "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
    }
    path = workdir / "amqtt.yaml"
    path.write_text(json.dumps(config, indent=2))
    command = [_locate_amqtt(), "-m", "amqtt.scripts.broker_script", "-c", str(path)]
    return _Launch(command, ready="Listener 'default' bind to " + re.escape(f"{HOST}:{port}") + r"\b")


def _locate_aedes() -> str:
    node = shutil.which("node")
    if node is None:
        raise BrokerUnavailable(f"node is not installed, aedes needs it: {_INSTALL_HINT} (or apt-get install nodejs)")
    prefix = node_prefix()
    if not (prefix / "node_modules" / "aedes" / "package.json").is_file():
        raise BrokerUnavailable(
            f"aedes is not installed in {prefix}: {_INSTALL_HINT}, or set {NODE_PATH_VARIABLE} to its npm prefix"
        )
    return node


def _prepare_aedes(port: int, workdir: Path) -> _Launch:
    command = [_locate_aedes(), str(AEDES_SERVER), HOST, str(port)]
    env = {**os.environ, "NODE_PATH": str(node_prefix() / "node_modules")}
    return _Launch(command, ready="listening on " + re.escape(f"{HOST}:{port}") + r"\b", env=env)


def _locate_rabbitmq() -> str:
    if not RABBITMQ_SERVER.is_file() or shutil.which("epmd") is None:
        raise BrokerUnavailable(
            f"rabbitmq-server is not installed: {_INSTALL_HINT} (or apt-get install rabbitmq-server)"
        )
    return str(RABBITMQ_SERVER)


def _prepare_rabbitmq(port: int, workdir: Path) -> _Launch:
    """The node in the foreground with everything under ``workdir``: MQTT on ``port``, AMQP, distribution and an
    epmd of its own on further free ports, each bound to 127.0.0.1; only the MQTT plugin is enabled."""
    amqp_port, dist_port, epmd_port = _free_ports(3, avoid={port})
    config = workdir / "rabbitmq.conf"
    config.write_text(
        f"listeners.tcp.default = {HOST}:{amqp_port}\n"
        f"mqtt.listeners.tcp.default = {HOST}:{port}\n"
        "log.console = true\nlog.console.level = info\nlog.console.use_colors = off\nlog.file = false\n"
    )
    plugins = workdir / "enabled_plugins"
    plugins.write_text("[rabbitmq_mqtt].\n")
    # Nothing from the caller's environment or /etc/rabbitmq may point the node elsewhere.
    env = {key: value for key, value in os.environ.items() if not key.startswith(("RABBITMQ_", "ERL_"))}
    env.update(
        HOME=str(workdir),  # the Erlang cookie goes there
        RABBITMQ_NODENAME=f"mqa{port}@localhost",
        RABBITMQ_NODE_PORT=str(amqp_port),
        RABBITMQ_DIST_PORT=str(dist_port),
        ERL_EPMD_PORT=str(epmd_port),
        ERL_EPMD_ADDRESS=HOST,
        RABBITMQ_CONFIG_FILE=str(config),
        RABBITMQ_ENABLED_PLUGINS_FILE=str(plugins),
        RABBITMQ_MNESIA_BASE=str(workdir / "mnesia"),
        RABBITMQ_LOG_BASE=str(workdir / "log"),
        RABBITMQ_CONF_ENV_FILE=str(workdir / "rabbitmq-env.conf"),
        RABBITMQ_ADVANCED_CONFIG_FILE=str(workdir / "advanced.config"),
        # Distribution on loopback, registered with the epmd started for this node.
        RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1} -start_epmd false",
    )
    amqp_url = f"amqp://guest:guest@{HOST}:{amqp_port}/%2F"
    epmd = _Companion("epmd", [shutil.which("epmd") or "epmd", "-address", HOST, "-port", str(epmd_port)], epmd_port)
    return _Launch(
        [_locate_rabbitmq()],
        ready=r"Server startup complete",
        env=env,
        other_ports=(amqp_port,),
        check=lambda: _answers_amqp(amqp_url),
        urls={"amqp": amqp_url},
        group=True,
        companion=epmd,
    )


def _locate_mqttools() -> str:
    if importlib.util.find_spec("mqttools") is None:
        raise BrokerUnavailable(
            f"mqttools is not installed in {sys.executable}: install the test extra (pip install -e '.[test]')"
        )
    return sys.executable


def _prepare_mqttools(port: int, workdir: Path) -> _Launch:
    # Its --host defaults to localhost, which may also mean ::1; its TLS listener starts only with certificates.
    command = [_locate_mqttools(), "-m", "mqttools", "--log-level", "info", "broker", "--host", HOST]
    command += ["--port", str(port)]
    return _Launch(command, ready=re.escape(f"Listening for clients on ('{HOST}', {port})."))


_RECIPES: dict[str, _Recipe] = {
    "mosquitto": _Recipe(_locate_mosquitto, _prepare_mosquitto),
    "amqtt": _Recipe(_locate_amqtt, _prepare_amqtt),
    "aedes": _Recipe(_locate_aedes, _prepare_aedes),
    "rabbitmq": _Recipe(_locate_rabbitmq, _prepare_rabbitmq, timeout=60.0),
    "mqttools": _Recipe(_locate_mqttools, _prepare_mqttools),
}


def _launch_on_free_port(name: str, recipe: _Recipe, workdir: Path, timeout: float) -> RunningBroker:
    def attempt() -> RunningBroker:
        port = free_port()
        launch = recipe.prepare(port, workdir)
        deadline = time.monotonic() + timeout
        companions = [] if launch.companion is None else [_start_companion(launch.companion, workdir, timeout)]
        return launch_broker(
            name,
            launch.command,
            port=port,
            workdir=workdir,
            env=launch.env,
            ready=launch.ready,
            timeout=max(0.0, deadline - time.monotonic()),
            other_ports=launch.other_ports,
            check=launch.check,
            urls=launch.urls,
            group=launch.group,
            companions=companions,
        )

    for _ in range(_PORT_ATTEMPTS - 1):
        try:
            return attempt()
        except PortInUse:
            continue
    return attempt()


def _start_companion(companion: _Companion, workdir: Path, timeout: float) -> subprocess.Popen[bytes]:
    """Starts ``companion`` and waits until it accepts connections on its port; a companion that exits first
    found its port taken (epmd exits quietly when something already listens there)."""
    log_path = workdir / f"{companion.name}.log"
    with log_path.open("wb") as log:
        try:
            process = subprocess.Popen(
                companion.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=workdir,
                start_new_session=True,
            )
        except OSError as exc:
            raise BrokerStartError(f"{companion.name} could not be run: {exc}") from exc
    deadline = time.monotonic() + timeout
    while True:
        status = process.poll()
        if status is not None:
            output = _read_text(log_path).strip() or "(no output)"
            raise PortInUse(
                f"{companion.name} exited with status {status} before listening on {HOST}:"
                f"{companion.port} (is the port taken?): {output}"
            )
        if _accepts_connections(companion.port):
            return process
        if time.monotonic() > deadline:
            _terminate(process, _DEFAULT_TIMEOUT)
            raise BrokerStartError(f"{companion.name} did not listen on {HOST}:{companion.port} within {timeout:g} s")
        time.sleep(0.05)


def _free_ports(count: int, avoid: set[int]) -> list[int]:
    """``count`` distinct free ports, none of them in ``avoid``."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in avoid and port not in ports:
            ports.append(port)
    return ports


def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _answers_amqp(url: str) -> bool:
    """A guest login over AMQP 0-9-1 succeeds: the vhost and a channel open."""
    from .amqp import AmqpTarget, check_login  # the probe's own AMQP client; only RabbitMQ needs it

    return asyncio.run(check_login(AmqpTarget.parse(url), timeout=1.0)) is None


def _terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


def _terminate_group(process: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM to the process group ``process`` leads, SIGKILL to what is left of it after ``timeout`` seconds;
    then waits (as long again) for the processes below it that left the group (beam's erl_child_setup starts a
    session of its own), and kills any that outlive the broker."""
    group = process.pid
    below = _descendants(group)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout)
    # Members outlive the leader only when they ignored SIGTERM; the group id stays theirs while any is left.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + timeout
    while (running := [pid for pid in below if _running(pid)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in running:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _descendants(pid: int) -> set[int]:
    """The processes below ``pid``, read from /proc (empty where there is none)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process; a zombie is not (it waits only for its parent to reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _failure(broker: RunningBroker, what: str) -> str:
    tail = "\n".join(broker.output().splitlines()[-_TAIL_LINES:]) or "(no output)"
    return f"{broker.name} {what}\ncommand: {shlex.join(broker.command)}\nlast lines of its output:\n{tail}"


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return ""
