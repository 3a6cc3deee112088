"""Real MQTT brokers (mosquitto, amqtt, aedes) run as child processes listening on 127.0.0.1 only.

>>> with start_broker("mosquitto") as broker:  # doctest: +SKIP
...     broker.url
'mqtt://127.0.0.1:40117'
"""

from __future__ import annotations

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
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Literal, TypeAlias, get_args

BrokerName: TypeAlias = Literal["mosquitto", "amqtt", "aedes"]
BROKERS: tuple[BrokerName, ...] = get_args(BrokerName)
HOST = "127.0.0.1"

#: Where ``npm install --prefix`` put aedes; the default is ``.node`` in the source checkout, else in the cwd.
NODE_PATH_VARIABLE = "MQTTAUDIT_NODE_PATH"
AEDES_SERVER = Path(__file__).with_name("aedes_server.js")
_SOURCE_CHECKOUT = Path(__file__).resolve().parents[3]
_INSTALL_HINT = "run scripts/install-test-deps.sh"
_PORT_ATTEMPTS = 3
_TAIL_LINES = 20


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

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    def output(self) -> str:
        """What the broker wrote to stdout and stderr so far."""
        return _read_text(self.log_path)

    def stop(self, timeout: float = 5.0) -> None:
        """Sends SIGTERM, then SIGKILL if the broker is still running after ``timeout`` seconds, and reaps it."""
        _terminate(self._process, timeout)
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


def start_broker(name: BrokerName, *, workdir: Path | None = None, timeout: float = 15.0) -> RunningBroker:
    """Starts ``name`` on a free port of 127.0.0.1 and returns once it accepts TCP connections.

    Its configuration and output go to ``workdir`` (a temporary directory, removed on stop, when None).
    Raises :class:`BrokerUnavailable` when it is not installed, :class:`BrokerStartError` when it fails to start.
    """
    recipe = _RECIPES[name]
    recipe.locate()
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
    timeout: float = 15.0,
) -> RunningBroker:
    """Runs ``command`` with its output in ``workdir/NAME.log`` and waits up to ``timeout`` seconds for it to
    accept TCP connections on 127.0.0.1:``port``; a process that dies or never listens is reported with the tail
    of its output (and killed).

    ``ready`` is a regular expression that the broker writes once it listens: it tells the broker's own listener
    from another process that took the port meanwhile.
    """
    log_path = workdir / f"{name}.log"
    with log_path.open("wb") as log:
        try:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=workdir, env=env
            )
        except OSError as exc:
            raise BrokerStartError(f"{name} could not be run: {exc}\ncommand: {shlex.join(command)}") from exc
    broker = RunningBroker(name=name, host=HOST, port=port, command=tuple(command), log_path=log_path, _process=process)
    deadline = time.monotonic() + timeout
    while True:
        # The status before the output: a broker that has exited has written all of it.
        status = process.poll()
        output = broker.output()
        if "address already in use" in output.lower():
            broker.stop()
            raise PortInUse(_failure(broker, f"could not bind {HOST}:{port}: the port is in use"))
        if status is not None:
            raise BrokerStartError(_failure(broker, f"exited with status {status} before listening on {HOST}:{port}"))
        if (ready is None or re.search(ready, output)) and _accepts_connections(port):
            return broker
        if time.monotonic() > deadline:
            broker.stop()
            raise BrokerStartError(_failure(broker, f"did not listen on {HOST}:{port} within {timeout:g} s"))
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
    """One broker's command for one port, its environment, and the line it writes once it listens."""

    command: list[str]
    ready: str
    env: dict[str, str] | None = None


@dataclass(frozen=True)
class _Recipe:
    """How to find one broker (``locate`` raises BrokerUnavailable) and how to launch it on a port."""

    locate: Callable[[], str]
    prepare: Callable[[int, Path], _Launch]


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


_RECIPES: dict[str, _Recipe] = {
    "mosquitto": _Recipe(_locate_mosquitto, _prepare_mosquitto),
    "amqtt": _Recipe(_locate_amqtt, _prepare_amqtt),
    "aedes": _Recipe(_locate_aedes, _prepare_aedes),
}


def _launch_on_free_port(name: str, recipe: _Recipe, workdir: Path, timeout: float) -> RunningBroker:
    def attempt() -> RunningBroker:
        port = free_port()
        launch = recipe.prepare(port, workdir)
        return launch_broker(
            name, launch.command, port=port, workdir=workdir, env=launch.env, ready=launch.ready, timeout=timeout
        )

    for _ in range(_PORT_ATTEMPTS - 1):
        try:
            return attempt()
        except PortInUse:
            continue
    return attempt()


def _accepts_connections(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _terminate(process: subprocess.Popen[bytes], timeout: float) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()


def _failure(broker: RunningBroker, what: str) -> str:
    tail = "\n".join(broker.output().splitlines()[-_TAIL_LINES:]) or "(no output)"
    return f"{broker.name} {what}\ncommand: {shlex.join(broker.command)}\nlast lines of its output:\n{tail}"


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode(errors="replace")
    except FileNotFoundError:
        return ""
