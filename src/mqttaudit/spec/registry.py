"""The rule registry: one typed id per statement and derived rule of each MQTT version, and who refers to each.

Code names a rule through :mod:`mqttaudit.spec.ids` (``R5.MQTT_4_13_1_1``), never by a string: a misspelt name
fails at import and under mypy, and every id carries the version whose text it names. A :class:`StatementId` is a
``str`` equal to the id's text, so reports, JSON and sorting see the text; :attr:`StatementId.version` and
:attr:`StatementId.rule` say which statement it is. Ids compare as text (as code compiled with mypyc compares any two
``str``): where a 3.1.1 and a 5.0 rule share a text and could meet, the 5.0 one goes by its :attr:`StatementId.key`.

A part of mqttaudit that checks or probes rules says so with :func:`refer`; ``mqttaudit rules`` reads the
references back with :func:`references` to show what checks each rule.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from .catalogue import Rule, load_catalogue

if TYPE_CHECKING:
    from .duties import Duty

#: The parts of mqttaudit that refer to rules, as ``mqttaudit rules`` names them.
COMPONENTS: Final = ("codec", "judge", "probe")


class StatementId(str):
    """The id of one rule of one MQTT version: equal to its text (``"MQTT-4.13.1-1"``), with its version."""

    __slots__ = ("version",)
    version: str

    def __new__(cls, text: str, version: str) -> StatementId:
        self = super().__new__(cls, text)
        object.__setattr__(self, "version", version)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (StatementId, (str(self), self.version))

    @property
    def text(self) -> str:
        """The id as plain text."""
        return str(self)

    @property
    def rule(self) -> Rule:
        """The catalogue entry: section, level, the actor it binds, its summary."""
        return load_catalogue(self.version)[str(self)]

    def duty(self, receiver: str) -> Duty | None:
        """What the receiver ("server" or "client") of a packet breaking this rule owes: the statement that binds it
        to detect the defect and close, or none, and why (:mod:`mqttaudit.spec.duties`); None when no received
        packet can break the rule."""
        from .duties import receiver_duty

        return receiver_duty(self, self.version, receiver)

    @property
    def key(self) -> str:
        """How the judge and the codec name this rule across versions (:mod:`mqttaudit.spec.identity`): the id
        itself, or for a 5.0 rule whose text is also a 3.1.1 key, the text with "@5.0" (a :class:`RuleKey`)."""
        from . import identity

        if self.version == identity.V5 and identity.needs_suffix(str(self)):
            return RuleKey(f"{self}@{self.version}", self)
        return self


class RuleKey(str):
    """The key of a 5.0 rule whose id is also a 3.1.1 key: ``"MQTT-3.8.3-4@5.0"``, with the id it stands for."""

    __slots__ = ("statement",)
    statement: StatementId

    def __new__(cls, text: str, statement: StatementId) -> RuleKey:
        self = super().__new__(cls, text)
        object.__setattr__(self, "statement", statement)
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (RuleKey, (str(self), self.statement))


def statement(text: str, version: str) -> StatementId:
    """The id ``text`` of ``version``. Raises ``KeyError`` when that version's catalogue has no such rule: the way
    :mod:`mqttaudit.spec.ids` is built and checked, never a way to name a rule in code."""
    if text not in load_catalogue(version):
        raise KeyError(f"MQTT {version} states no rule {text}")
    return StatementId(text, version)


def rule_of(rule_id: str, version: str) -> Rule | None:
    """The catalogue entry of ``rule_id``: of its own version when it is a :class:`StatementId`, else of
    ``version`` (an id read back from a report or typed by a user)."""
    own = getattr(rule_id, "version", None)
    return load_catalogue(own if isinstance(own, str) else version).get(str(rule_id))


@dataclass(frozen=True, slots=True)
class Reference:
    """One part of mqttaudit that refers to a rule: its component (codec, judge, probe), the module, and the name
    there (a check's constant, a probe case's id)."""

    component: str
    module: str
    name: str


#: (id text, version) -> the references to that rule, in the order made. Keyed by both: a 3.1.1 id and a 5.0 id
#: may share their text.
_REFERENCES: dict[tuple[str, str], dict[Reference, None]] = {}


def refer(component: str, module: str, name: str, ids: Iterable[str]) -> None:
    """Records that ``name`` of ``module`` (a check, a probe case) in ``component`` refers to ``ids``. Raises
    ``TypeError`` for an id that is plain text, not a registry id: a rule is named through :mod:`.ids`."""
    if component not in COMPONENTS:
        raise ValueError(f"no component {component!r}: one of {', '.join(COMPONENTS)}")
    for named in ids:
        rule_id = named.statement if isinstance(named, RuleKey) else named
        if not isinstance(rule_id, StatementId):
            raise TypeError(f"{module}.{name} refers to {rule_id!r}, not a registry id (mqttaudit.spec.ids)")
        _REFERENCES.setdefault((str(rule_id), rule_id.version), {})[Reference(component, module, name)] = None


def refer_names(component: str, module: str, names: Mapping[str, object], keep: Container[str] | None = None) -> None:
    """Records the module's checks: each upper-case name of ``names`` (a module's globals) that holds a registry
    id, or a tuple of them, refers to it; with ``keep``, only the ids in it."""
    for name, value in list(names.items()):
        if not name.isupper():
            continue
        values = value if isinstance(value, tuple) else (value,)
        ids = [v for v in values if isinstance(v, (StatementId, RuleKey)) and (keep is None or v in keep)]
        if ids:
            refer(component, module, name, ids)


def references() -> Mapping[tuple[str, str], tuple[Reference, ...]]:
    """Every reference recorded so far: (id text, version) -> the references, in the order made."""
    return MappingProxyType({key: tuple(found) for key, found in _REFERENCES.items()})
