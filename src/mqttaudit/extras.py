"""The optional parts of mqttaudit (the extras of pyproject.toml) and the one way to say that one is missing: what
needs it, the package that is not installed and the pip command that installs it. The command line exits 2."""

from __future__ import annotations

import importlib
from typing import Final

#: Extra -> (the top-level modules of it that mqttaudit imports, what needs them). Kept beside pyproject's extras.
EXTRAS: Final[dict[str, tuple[tuple[str, ...], str]]] = {
    "spark": (("pyspark", "py4j", "pyarrow", "pandas"), "mqttaudit audit"),
    "tls": (("cryptography",), "decrypting TLS"),
    "amqp": (("pika",), "probing an amqp:// target"),
    "demo": (("paho", "pyspark", "py4j", "pyarrow", "pandas"), "mqttaudit demo"),
}
#: The package pip installs for a module whose name differs.
PACKAGES: Final = {"paho": "paho-mqtt"}


class MissingExtra(ImportError):
    """A package of an extra is not installed; the message names it and the pip command that installs it."""


def missing(extra: str, exc: ImportError) -> MissingExtra:
    """The :class:`MissingExtra` for ``exc``, an import of one of the modules of ``extra`` that failed."""
    modules, needs = EXTRAS[extra]
    top = (exc.name or "").partition(".")[0]
    module = top if top in modules else modules[0]
    package = PACKAGES.get(module, module)
    return MissingExtra(
        f"{needs} needs {package}, which is not installed: pip install 'mqttaudit[{extra}]'", name=module
    )


def require(extra: str) -> None:
    """Imports every module of ``extra`` (before any work that needs them), or raises :class:`MissingExtra`."""
    for module in EXTRAS[extra][0]:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise missing(extra, exc) from exc


def explain(exc: BaseException) -> MissingExtra | None:
    """For an import of a module of an extra that failed anywhere (one that :func:`require` did not guard), what
    :func:`missing` says of it; None for any other exception."""
    if isinstance(exc, MissingExtra):
        return exc
    if not isinstance(exc, ImportError) or not exc.name:
        return None
    top = exc.name.partition(".")[0]
    extra = next((name for name, (modules, _) in EXTRAS.items() if top in modules), None)
    return None if extra is None else missing(extra, exc)
