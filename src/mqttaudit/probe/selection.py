"""Which cases a run takes: globs over case ids or statement ids, with exclusions (``--skip``, or ``!glob``), and
the MQTT version they speak (``--protocol``)."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Sequence

from ..codec import ProtocolVersion
from .case import CASES, Case

Patterns = str | Sequence[str] | None


class NoCaseSelected(ValueError):
    """The selection matches no case."""


def split_patterns(patterns: Patterns) -> list[str]:
    """Globs from a comma-separated string or a sequence of them (each may hold commas too)."""
    if patterns is None:
        return []
    items = [patterns] if isinstance(patterns, str) else list(patterns)
    return [glob.strip() for item in items for glob in item.split(",") if glob.strip()]


def matches(case: Case, glob: str) -> bool:
    """Whether ``glob`` matches the case's id or one of its statement ids."""
    return fnmatch.fnmatchcase(case.id, glob) or any(fnmatch.fnmatchcase(s, glob) for s in case.statements)


def select_cases(
    patterns: Patterns = None,
    skip: Patterns = None,
    *,
    suite: str | None = None,
    library: Iterable[Case] | None = None,
    protocol: ProtocolVersion | None = None,
) -> list[Case]:
    """The cases of ``library`` (the whole case library by default) in its order that one of the including globs
    of ``patterns`` matches (every case when there is none) and no excluding glob does. Excluding globs are those
    of ``skip`` and the ``!glob`` items of ``patterns``. ``suite`` keeps the cases whose id starts with ``suite/``,
    ``protocol`` those that speak that MQTT version (None: every version). Raises :class:`NoCaseSelected` when
    nothing is left."""
    globs = split_patterns(patterns)
    include = [glob for glob in globs if not glob.startswith("!")]
    exclude = [glob[1:] for glob in globs if glob.startswith("!")] + split_patterns(skip)
    cases = list(CASES.values()) if library is None else list(library)
    selected = [
        case
        for case in cases
        if (suite is None or case.id.startswith(f"{suite}/"))
        and (protocol is None or case.protocol is protocol)
        and (not include or any(matches(case, glob) for glob in include))
        and not any(matches(case, glob) for glob in exclude)
    ]
    if not selected:
        raise NoCaseSelected(_nothing(globs, split_patterns(skip), suite, protocol))
    return selected


def parse_protocol(text: str | None) -> ProtocolVersion | None:
    """``--protocol``: ``3.1.1``, ``5`` or ``5.0``, or ``all`` (None, the default: every version the library
    speaks). ValueError for anything else, 3.1 included (the library has no 3.1 case)."""
    if text is None or text.strip().lower() == "all":
        return None
    version = ProtocolVersion.parse(text)
    if version not in PROBED_VERSIONS:
        raise ValueError(f"the probe has cases for MQTT 3.1.1 and 5.0, not {text!r}: use 3.1.1, 5, 5.0 or all")
    return version


#: The versions the case library speaks.
PROBED_VERSIONS = (ProtocolVersion.V3_1_1, ProtocolVersion.V5)


def _nothing(globs: list[str], skip: list[str], suite: str | None, protocol: ProtocolVersion | None = None) -> str:
    what = f"no case matches {','.join(globs)!r}" if globs else "no case is left"
    if skip:
        what += f" once {','.join(skip)!r} is skipped"
    return (
        what
        + (f" in suite {suite!r}" if suite else "")
        + (f" among the MQTT {protocol.value} cases" if protocol else "")
    )
