"""AMQP 0-9-1 topic exchange keys: their words, and the shortstr rules a routing or binding key obeys.

The routing key of a topic exchange is zero or more words delimited by dots, and a binding key follows the same
rules with two wildcards: a whole word '*' matches exactly one word, a whole word '#' zero or more words (AMQP
0-9-1, exchange type "topic"). The empty key is zero words, so ``""`` and ``"."`` differ: ``"."`` is two empty
words, and ``"a..b"`` three words, the middle one empty. A '*' or '#' inside a longer word is plain text, and so is
every word of a routing key. There is no '$' rule.

Both keys travel as shortstr (4.2.5.3): at most 255 octets of UTF-8 and no zero octet. The rule ids below name
that section; they are this project's ids, as AMQP 0-9-1 numbers no statements.
"""

from __future__ import annotations

from typing import Final

from mqttaudit.codec.buffer import wire_string
from mqttaudit.codec.errors import Violation

from .validation import InvalidTopic

WORD_SEPARATOR: Final = "."
ONE_WORD: Final = "*"
ANY_WORDS: Final = "#"
SHORTSTR_MAX_OCTETS: Final = 255

SHORTSTR_LENGTH: Final = "AMQP-4.2.5.3-shortstr-length"
SHORTSTR_ZERO_OCTET: Final = "AMQP-4.2.5.3-shortstr-zero-octet"


def split_words(key: str) -> list[str]:
    """The words of a routing or binding key: none for the empty key, else the text between the dots.

    >>> split_words(""), split_words("."), split_words("a..b")
    ([], ['', ''], ['a', '', 'b'])
    """
    return key.split(WORD_SEPARATOR) if key else []


def key_violations(key: str, what: str = "routing key") -> list[Violation]:
    """Every shortstr rule ``key`` breaks; offsets count UTF-8 bytes of the key."""
    raw = wire_string(key)
    out: list[Violation] = []
    if len(raw) > SHORTSTR_MAX_OCTETS:
        detail = f"{what} is {len(raw)} bytes of UTF-8; a shortstr holds at most {SHORTSTR_MAX_OCTETS}"
        out.append(Violation(SHORTSTR_LENGTH, SHORTSTR_MAX_OCTETS, detail))
    zero = raw.find(b"\x00")
    if zero >= 0:
        out.append(Violation(SHORTSTR_ZERO_OCTET, zero, f"{what} contains a zero octet at byte {zero}"))
    return out


def validate_routing_key(key: str) -> None:
    """Raises :class:`InvalidTopic` when ``key`` cannot be a routing key (basic.publish carries it as shortstr)."""
    _raise_first(key_violations(key, "routing key"))


def validate_binding_key(key: str) -> None:
    """Raises :class:`InvalidTopic` when ``key`` cannot be a binding key (queue.bind carries it as shortstr)."""
    _raise_first(key_violations(key, "binding key"))


def is_plain_routing_key(key: str) -> bool:
    """A cheap sufficient test: ASCII, short enough and without NUL means no rule can be broken."""
    return key.isascii() and len(key) <= SHORTSTR_MAX_OCTETS and "\x00" not in key


def _raise_first(violations: list[Violation]) -> None:
    if violations:
        raise InvalidTopic(violations[0], violations=tuple(violations))
