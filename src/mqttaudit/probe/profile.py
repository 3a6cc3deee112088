"""A broker profile: a TOML file in which the operator declares what a CONNACK cannot (or does not) say about the
broker's configuration, e.g. ``receive_maximum = 2`` or ``authentication_methods = []``. Every key is optional;
an absent key is undeclared, and a case that needs it is not applicable.

A prober cannot compute the answers of an enhanced authentication method it does not know (section 4.12), so the
profile may script one exchange the broker accepts, in a table::

    [authentication]
    method = "SCRAM-SHA-1"            # the Authentication Method of the CONNECT
    data = ["c0ffee", "0badcafe"]     # hex: the CONNECT's Authentication Data, then the Authentication Data of the
                                      # client's AUTH answering each AUTH 0x18 of the server, in order

The same script re-authenticates (AUTH 0x19 with the first data, then the answers). The method must answer the same
script every time (no fresh nonce per exchange); the table takes no other key.

One key is a policy of the run rather than a declaration about the broker: ``strict = true`` holds the broker to
detecting every malformed packet and Protocol Error, as ``--strict`` does (a ``lenient`` case fails the run)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final

from .. import option_files
from ..option_files import OptionFileError, read_capped


class ProfileError(ValueError):
    """The profile cannot be read: not TOML, an unknown key, a value of the wrong type or out of range."""


#: The keys a profile may declare: (the TOML type, the smallest and largest value for integers).
INTEGERS: Final[dict[str, tuple[int, int]]] = {
    "maximum_qos": (0, 2),
    "topic_alias_maximum": (0, 0xFFFF),
    "receive_maximum": (1, 0xFFFF),
    "maximum_packet_size": (1, 0xFFFFFFFF),
    "server_keep_alive": (0, 0xFFFF),
}
BOOLEANS: Final = (
    "retain_available",
    "wildcard_available",
    "subscription_identifiers_available",
    "shared_available",
)
#: Policies of the run the profile may set, not capabilities of the broker (no CONNACK value is overridden).
POLICIES: Final = ("strict",)
STRING_LISTS: Final = ("authentication_methods",)
#: The table scripting one accepted enhanced authentication exchange, and its keys.
AUTHENTICATION: Final = "authentication"
AUTHENTICATION_KEYS: Final = ("method", "data")


@dataclass(frozen=True, slots=True)
class AuthenticationScript:
    """One enhanced authentication exchange the broker accepts (section 4.12): the CONNECT's Authentication Method
    and Data, then the data of the client's AUTH answering each of the server's AUTH 0x18."""

    method: str
    #: The CONNECT's (or a re-authenticating AUTH 0x19's) Authentication Data.
    first: bytes
    #: The Authentication Data of the client's AUTH 0x18 answering the server's 1st, 2nd, ... AUTH 0x18.
    answers: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class BrokerProfile:
    """What the operator declared; None is undeclared."""

    maximum_qos: int | None = None
    retain_available: bool | None = None
    wildcard_available: bool | None = None
    subscription_identifiers_available: bool | None = None
    shared_available: bool | None = None
    topic_alias_maximum: int | None = None
    receive_maximum: int | None = None
    maximum_packet_size: int | None = None
    server_keep_alive: int | None = None
    #: The Authentication Methods the broker accepts (section 4.12); ``[]`` declares none.
    authentication_methods: tuple[str, ...] | None = None
    #: One enhanced authentication exchange the broker accepts (the ``[authentication]`` table).
    authentication: AuthenticationScript | None = None
    #: Leniency fails the run (``--strict``): the operator holds the broker to detecting every malformed packet.
    strict: bool | None = None
    #: Where it was read from, for messages.
    source: str = ""

    def capabilities(self) -> dict[str, int | bool]:
        """The declared values that override a CONNACK's declaration, by capability name."""
        return {
            name: value
            for name in (*INTEGERS, *BOOLEANS)
            if isinstance(value := getattr(self, name), int)  # bool is an int too
        }

    def declared(self) -> dict[str, object]:
        """Every declared key with its value."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "source" and getattr(self, f.name) is not None
        }


#: No profile: nothing declared.
NO_PROFILE: Final = BrokerProfile()


def load_profile(path: Path | str) -> BrokerProfile:
    """The profile in the TOML file at ``path``; :class:`ProfileError` when it cannot be read or is wrong."""
    where = str(path)
    try:
        text = read_capped(path, option="--profile", cap=option_files.PROFILE, what="the profile").decode("utf-8")
    except OptionFileError as exc:
        raise ProfileError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise ProfileError(f"cannot read the profile {where}: {exc}") from None
    return parse_profile(text, where)


def parse_profile(text: str, source: str = "the profile") -> BrokerProfile:
    """The profile ``text`` declares (TOML, top-level keys only)."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"{source} is not valid TOML: {exc}") from None
    known = (*INTEGERS, *BOOLEANS, *POLICIES, *STRING_LISTS, AUTHENTICATION)
    unknown = sorted(key for key in document if key not in known)
    if unknown:
        raise ProfileError(
            f"{source}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
            f"known: {', '.join(known)}"
        )
    values: dict[str, object] = {}
    for key, value in document.items():
        if key in INTEGERS:
            low, high = INTEGERS[key]
            if type(value) is not int:
                raise ProfileError(f"{source}: {key} must be an integer, not {_kind(value)}")
            if not low <= value <= high:
                raise ProfileError(f"{source}: {key} must be from {low} to {high}, not {value}")
            values[key] = value
        elif key in BOOLEANS or key in POLICIES:
            if type(value) is not bool:
                raise ProfileError(f"{source}: {key} must be true or false, not {_kind(value)}")
            values[key] = value
        elif key == AUTHENTICATION:
            values[key] = _authentication(value, source)
        else:
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise ProfileError(f"{source}: {key} must be a list of strings, not {_kind(value)}")
            values[key] = tuple(value)
    return BrokerProfile(**values, source=source)  # type: ignore[arg-type]


def _authentication(table: object, source: str) -> AuthenticationScript:
    """The ``[authentication]`` table: ``method`` (a string) and ``data`` (hex strings, at least the first)."""
    if not isinstance(table, dict):
        raise ProfileError(f"{source}: authentication must be a table, not {_kind(table)}")
    unknown = sorted(key for key in table if key not in AUTHENTICATION_KEYS)
    if unknown:
        raise ProfileError(
            f"{source}: unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} in "
            f"authentication; known: {', '.join(AUTHENTICATION_KEYS)}"
        )
    method, data = table.get("method"), table.get("data")
    if not isinstance(method, str) or not method:
        raise ProfileError(f"{source}: authentication.method must be a non-empty string, not {_kind(method)}")
    if not isinstance(data, list) or not data or not all(isinstance(item, str) for item in data):
        raise ProfileError(f"{source}: authentication.data must be a non-empty list of hex strings")
    decoded: list[bytes] = []
    for index, item in enumerate(data):
        try:
            decoded.append(bytes.fromhex(item))
        except ValueError:
            raise ProfileError(f"{source}: authentication.data[{index}] is not hex: {item!r}") from None
    return AuthenticationScript(method, decoded[0], tuple(decoded[1:]))


def _kind(value: object) -> str:
    """A TOML value's type in TOML's words."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    return {int: "an integer", float: "a float", str: "a string", list: "an array", dict: "a table"}.get(
        type(value), "a date or time"
    )
