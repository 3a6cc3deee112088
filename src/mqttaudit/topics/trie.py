"""Subscription tries rooted per namespace: the values whose filters match a topic, for MQTT 3.1.1, MQTT 5.0
(shared subscriptions included) and AMQP 0-9-1 topic exchanges.

A namespace is whatever keeps subscriptions apart: a broker endpoint, a vhost, a mountpoint, an AMQP exchange.
Every namespace has its own root, so no topic, not even the AMQP key of zero words, reaches the subscriptions of
another namespace. (RabbitMQ 4.3's topic trie started every exchange at one shared root node, so a message published
with an empty routing key reached the queues bound with an empty key to any topic exchange; fixed in
rabbitmq/rabbitmq-server#16271.)

Dialects
    ``"mqtt"``   MQTT 3.1.1, section 4.7: levels split at '/', and empty levels are levels (``a//b``, ``/a``,
                 ``a/``); '+' is exactly one whole level; '#' is the last level only and matches its parent level
                 and everything below it; a filter that starts with a wildcard never matches a name that starts
                 with '$' [MQTT-4.7.2-1]; text is compared code point by code point, never normalised
                 [MQTT-4.7.3-4]. ``$share/...`` is an ordinary filter. Errors carry 3.1.1 statement ids.
    ``"mqtt5"``  MQTT 5.0: the same matching, and ``$share/{ShareName}/{filter}`` is a shared subscription
                 (4.8.2) that matches on ``filter``. Errors carry 5.0 statement ids, which number some rules
                 differently (in 5.0, MQTT-4.7.1-1 is the '#' rule and MQTT-4.7.1-2 the '+' rule).
    ``"amqp"``   AMQP 0-9-1 topic exchange (:mod:`mqttaudit.topics.amqp`): words split at '.', the empty key is
                 zero words, '*' is exactly one word and '#' zero or more, anywhere and more than once.

Identity and order
    A subscription is (namespace, topic filter as given, value); adding it again changes nothing. Under
    ``"mqtt5"`` the ShareName is part of the filter, so one value under ``a/b``, ``$share/g1/a/b`` and
    ``$share/g2/a/b`` is three subscriptions, and a PUBLISH to ``a/b`` returns the value three times.
    :meth:`TopicTrie.match` returns each value once per matching subscription, in the order the subscriptions
    were added (one removed and added again counts from its new add). A caller that delivers once per receiver, as
    an AMQP queue bound twice does, collapses the repeats itself.

Matching walks the trie without recursion: each node holds a dict of literal children and separate slots for the
one-level wildcard and for '#', so a topic costs one dict lookup per level, plus the wildcard branches that exist.
"""

from __future__ import annotations

from collections.abc import Hashable
from itertools import count
from operator import itemgetter
from typing import Any, Final, Generic, TypeVar

from mqttaudit.codec import rules
from mqttaudit.codec.errors import Violation
from mqttaudit.spec.identity import V5, statement_id

from .amqp import ANY_WORDS, ONE_WORD, is_plain_routing_key, split_words, validate_binding_key, validate_routing_key
from .validation import (
    InvalidTopic,
    topic_filter_violations,
    topic_name_violations,
    validate_topic_filter,
    validate_topic_name,
)

V = TypeVar("V", bound=Hashable)

MQTT: Final = "mqtt"
MQTT5: Final = "mqtt5"
AMQP: Final = "amqp"
TRIE_DIALECTS: Final = (MQTT, MQTT5, AMQP)

SHARE_PREFIX: Final = "$share/"

_MQTT_LEVEL: Final = "/"
_MQTT_ONE_LEVEL: Final = "+"
_MQTT_ANY_LEVELS: Final = "#"
_MAX_TOPIC_BYTES: Final = 0xFFFF
_UNBOUNDED: Final = 1 << 30  # more levels than a 65,535-byte topic can have

# The key of one subscription inside its node: (ShareName or None, value).
_Key = tuple[str | None, V]


class _Node(Generic[V]):
    """One level (or word) of the filters below a root.

    ``entries`` maps each subscription that ends here to its add sequence number, and ``pairs`` holds the same
    subscriptions as (sequence number, value) in add order, ready for :meth:`TopicTrie.match` to copy or merge.
    ``wild`` says whether ``star`` or ``hash`` is set, so the walk tests one attribute at the many nodes with
    neither. ``shortest`` and ``longest`` bound the lengths (in levels or words) of the topics that the filters
    through this node can match; the MQTT walk skips a '+' branch whose bounds exclude the topic. The bounds only
    ever widen (a removal leaves them as they were), so they stay true, if loose, and cost nothing to keep.
    ``topic_filter`` is the filter text the subscriptions here match on.
    """

    __slots__ = (
        "children",
        "entries",
        "hash",
        "is_hash",
        "longest",
        "pairs",
        "shortest",
        "star",
        "topic_filter",
        "wild",
    )

    def __init__(self, is_hash: bool = False) -> None:
        self.children: dict[str, _Node[V]] = {}
        self.star: _Node[V] | None = None
        self.hash: _Node[V] | None = None
        self.wild = False
        self.is_hash = is_hash
        self.entries: dict[_Key[V], int] | None = None
        self.pairs: list[tuple[int, V]] = _NO_PAIRS
        self.topic_filter: str | None = None
        self.shortest = _UNBOUNDED
        self.longest = 0

    def is_empty(self) -> bool:
        return self.entries is None and not self.children and not self.wild


# Shared by every node without subscriptions and never appended to: a node gets its own list with its first one.
_NO_PAIRS: Final[list[tuple[int, Any]]] = []


def parse_shared(topic_filter: str) -> tuple[str, str] | None:
    """Splits an MQTT 5.0 shared subscription ``$share/{ShareName}/{filter}`` into (ShareName, filter).

    Returns None for a filter that does not start with ``$share/`` (a non-shared filter, ``$share`` alone
    included). Raises :class:`InvalidTopic` with a 5.0 statement id when the ShareName is empty
    [MQTT-4.8.2-1], holds '/', '+' or '#' or is not followed by '/' and a non-empty Topic Filter [MQTT-4.8.2-2],
    or when the filter after it breaks a Topic Filter rule (that rule's own id): the codec's checks of a 5.0
    Topic Filter, so a filter is judged here exactly as inside a SUBSCRIBE.

    >>> parse_shared("$share/workers/sensor/+/temperature"), parse_shared("sensor/#")
    (('workers', 'sensor/+/temperature'), None)
    """
    if not topic_filter.startswith(SHARE_PREFIX):
        return None
    _raise_mqtt5(topic_filter_violations(topic_filter, MQTT5))
    share_name, _slash, inner = topic_filter[len(SHARE_PREFIX) :].partition(_MQTT_LEVEL)
    return share_name, inner


def _raise_mqtt5(violations: list[Violation]) -> None:
    """Raises the first MUST-level violation, every id translated to its MQTT 5.0 statement."""
    if any(not rules.is_advisory(v.rule) for v in violations):
        translated = [Violation(statement_id(v.rule, V5) or v.rule, v.offset, v.detail, v.rule) for v in violations]
        errors = [t for v, t in zip(violations, translated, strict=True) if not rules.is_advisory(v.rule)]
        raise InvalidTopic(errors[0], violations=tuple(translated))


def check_filter(topic_filter: str, dialect: str) -> tuple[str | None, str]:
    """Validates a subscription's filter in ``dialect`` and returns (ShareName or None, the filter matched on).

    Raises :class:`InvalidTopic` naming the rule the filter breaks (5.0 statement ids for ``"mqtt5"``).
    """
    if dialect == AMQP:
        validate_binding_key(topic_filter)
    elif dialect == MQTT5:
        shared = parse_shared(topic_filter)
        if shared is not None:
            return shared
        _raise_mqtt5(topic_filter_violations(topic_filter))
    else:
        validate_topic_filter(topic_filter)
    return None, topic_filter


def check_topic(topic: str, dialect: str) -> None:
    """Raises :class:`InvalidTopic` when ``topic`` cannot be published in ``dialect`` (a Topic Name, or an AMQP
    routing key)."""
    if dialect == AMQP:
        validate_routing_key(topic)
    elif dialect == MQTT5:
        _raise_mqtt5(topic_name_violations(topic))
    else:
        validate_topic_name(topic)


class TopicTrie(Generic[V]):
    """Subscriptions (namespace, topic filter, value) and the values whose filters match a topic.

    >>> trie: TopicTrie[str] = TopicTrie()
    >>> trie.add("broker-a", "sport/tennis/+", "alice"), trie.add("broker-a", "sport/#", "bob")
    (True, True)
    >>> trie.match("broker-a", "sport/tennis/player1"), trie.match("broker-b", "sport/tennis/player1")
    (['alice', 'bob'], [])
    """

    __slots__ = ("_amqp", "_any", "_dialect", "_one", "_roots", "_sequence", "_size")

    def __init__(self, dialect: str = MQTT) -> None:
        if dialect not in TRIE_DIALECTS:
            raise ValueError(f"unknown trie dialect {dialect!r}; known: {', '.join(TRIE_DIALECTS)}")
        self._dialect = dialect
        self._amqp = dialect == AMQP
        self._one = ONE_WORD if self._amqp else _MQTT_ONE_LEVEL
        self._any = ANY_WORDS if self._amqp else _MQTT_ANY_LEVELS
        self._roots: dict[Hashable, _Node[V]] = {}
        self._sequence = count()
        self._size = 0

    @property
    def dialect(self) -> str:
        return self._dialect

    def __len__(self) -> int:
        """The number of subscriptions, over every namespace."""
        return self._size

    def __repr__(self) -> str:
        return f"TopicTrie(dialect={self._dialect!r}, subscriptions={self._size}, namespaces={len(self._roots)})"

    # -- subscriptions ---------------------------------------------------------------------------------------

    def add(self, namespace: Hashable, topic_filter: str, value: V) -> bool:
        """Subscribes ``value`` with ``topic_filter`` in ``namespace``; False when it already was.

        Raises :class:`InvalidTopic` (naming the rule) for a filter the dialect refuses.
        """
        share, inner, path = self._parse_filter(topic_filter)
        root = self._roots.get(namespace)
        if root is None:
            root = self._roots[namespace] = _Node()
        node = root
        one, any_ = self._one, self._any
        # The topic lengths this filter can match: '#' stands for zero or more levels or words.
        shortest = len(path) - path.count(any_)
        longest = _UNBOUNDED if any_ in path else len(path)
        for word in path:
            if word == one:
                child = node.star
                if child is None:
                    child = node.star = _Node()
                    node.wild = True
            elif word == any_:
                child = node.hash
                if child is None:
                    child = node.hash = _Node(is_hash=True)
                    node.wild = True
            else:
                child = node.children.get(word)
                if child is None:
                    child = node.children[word] = _Node()
            node = child
            node.shortest = min(node.shortest, shortest)
            node.longest = max(node.longest, longest)
        entries = node.entries
        if entries is None:
            entries = node.entries = {}
            node.pairs = []
            node.topic_filter = inner
        key = (share, value)
        if key in entries:
            return False
        sequence = entries[key] = next(self._sequence)
        node.pairs.append((sequence, value))
        self._size += 1
        return True

    def remove(self, namespace: Hashable, topic_filter: str, value: V) -> bool:
        """Unsubscribes ``value`` from ``topic_filter`` in ``namespace``; False when it was not subscribed.

        Nodes left without subscriptions below them are dropped, and so is the namespace's root, so memory follows
        the live subscriptions. Raises :class:`InvalidTopic` for a filter the dialect refuses (none was added).
        """
        share, _, path = self._parse_filter(topic_filter)
        root = self._roots.get(namespace)
        if root is None:
            return False
        trail: list[tuple[_Node[V], str]] = []
        node = root
        for word in path:
            child = self._child(node, word)
            if child is None:
                return False
            trail.append((node, word))
            node = child
        entries = node.entries
        key = (share, value)
        if entries is None or key not in entries:
            return False
        node.pairs.remove((entries.pop(key), value))
        self._size -= 1
        if not entries:
            node.entries = None
            node.pairs = _NO_PAIRS
            node.topic_filter = None
        while trail and node.is_empty():
            parent, word = trail.pop()
            self._detach(parent, word)
            node = parent
        if root.is_empty():
            del self._roots[namespace]
        return True

    def namespaces(self) -> list[Hashable]:
        """The namespaces that hold at least one subscription, each in the order it got its first one since it
        last had none."""
        return list(self._roots)

    def filters(self, namespace: Hashable) -> list[str]:
        """The topic filters (as given to :meth:`add`) with at least one subscription in ``namespace``, sorted."""
        root = self._roots.get(namespace)
        found: set[str] = set()
        stack = [] if root is None else [root]
        while stack:
            node = stack.pop()
            if node.entries:
                inner = node.topic_filter or ""
                found.update(inner if share is None else f"{SHARE_PREFIX}{share}/{inner}" for share, _ in node.entries)
            stack.extend(node.children.values())
            stack.extend(child for child in (node.star, node.hash) if child is not None)
        return sorted(found)

    def node_count(self) -> int:
        """How many trie nodes exist, roots included: what the subscriptions cost in memory, in nodes."""
        total = 0
        stack = list(self._roots.values())
        while stack:
            node = stack.pop()
            total += 1
            stack.extend(node.children.values())
            stack.extend(child for child in (node.star, node.hash) if child is not None)
        return total

    # -- matching --------------------------------------------------------------------------------------------

    def match(self, namespace: Hashable, topic: str) -> list[V]:
        """The values subscribed in ``namespace`` with a filter that matches ``topic``: each once per matching
        subscription, in the order the subscriptions were added.

        ``topic`` is a Topic Name (MQTT) or a routing key (AMQP); one the dialect refuses raises
        :class:`InvalidTopic`.
        """
        found = self._matching_nodes(namespace, topic)
        if not found:
            return []
        if len(found) == 1:
            return list(map(_value_of_pair, found[0].pairs))
        pairs: list[tuple[int, V]] = []
        for node in found:
            pairs += node.pairs
        pairs.sort()  # by sequence number, which is unique: two values are never compared
        return list(map(_value_of_pair, pairs))

    def match_subscriptions(self, namespace: Hashable, topic: str) -> list[tuple[str, V]]:
        """Like :meth:`match`, with the filter each value subscribed with (as given to :meth:`add`), so a
        caller can tell shared subscriptions and their share groups apart."""
        ordered: list[tuple[int, str, V]] = []
        for node in self._matching_nodes(namespace, topic):
            inner = node.topic_filter or ""
            for (share, value), sequence in (node.entries or {}).items():
                ordered.append((sequence, inner if share is None else f"{SHARE_PREFIX}{share}/{inner}", value))
        ordered.sort(key=_first)
        return [(topic_filter, value) for _, topic_filter, value in ordered]

    def _matching_nodes(self, namespace: Hashable, topic: str) -> list[_Node[V]]:
        if self._amqp:
            if not is_plain_routing_key(topic):
                check_topic(topic, AMQP)
            root = self._roots.get(namespace)
            return [] if root is None else _walk_words(root, split_words(topic))
        # An ASCII name without wildcards or NUL, 1..65535 characters long, breaks no MUST rule: skip the checks.
        if (
            not (topic.isascii() and 0 < len(topic) <= _MAX_TOPIC_BYTES)
            or "+" in topic
            or "#" in topic
            or "\0" in topic
        ):
            check_topic(topic, self._dialect)
        root = self._roots.get(namespace)
        if root is None:
            return []
        return _walk_levels(root, topic.split(_MQTT_LEVEL), topic[0] == "$")

    # -- dialect ---------------------------------------------------------------------------------------------

    def _parse_filter(self, topic_filter: str) -> tuple[str | None, str, list[str]]:
        """Validates a filter and returns (ShareName or None, the filter matched on, its levels or words)."""
        share, inner = check_filter(topic_filter, self._dialect)
        return share, inner, split_words(inner) if self._amqp else inner.split(_MQTT_LEVEL)

    def _child(self, node: _Node[V], word: str) -> _Node[V] | None:
        if word == self._one:
            return node.star
        if word == self._any:
            return node.hash
        return node.children.get(word)

    def _detach(self, parent: _Node[V], word: str) -> None:
        if word == self._one:
            parent.star = None
        elif word == self._any:
            parent.hash = None
        else:
            del parent.children[word]
        parent.wild = parent.star is not None or parent.hash is not None


def _first(item: tuple[int, str, object]) -> int:
    return item[0]


_value_of_pair: Final = itemgetter(1)  # (sequence, value) -> value


def _walk_levels(root: _Node[V], levels: list[str], dollar: bool) -> list[_Node[V]]:
    """The nodes of the MQTT filters that match a name of ``levels``. In MQTT a '#' node is always a leaf and
    every path reaches a node at most once, so the walk needs no bookkeeping beyond its stack."""
    found: list[_Node[V]] = []
    stack: list[tuple[_Node[V], int]] = []
    last = len(levels)
    if not dollar and root.wild:  # [MQTT-4.7.2-1] no filter that starts with a wildcard matches a '$' name
        if root.hash is not None:
            found.append(root.hash)
        star = root.star
        if star is not None and star.shortest <= last <= star.longest:
            stack.append((star, 1))
    node = root.children.get(levels[0])
    depth = 1
    while True:
        # Follow the literal path in place; only the '+' branches wait on the stack.
        while node is not None:
            if node.wild:
                tail = node.hash
                if tail is not None:  # '#' matches the level it follows too: "sport/#" matches "sport"
                    found.append(tail)
                star = node.star
                # Its filters' lengths say whether a '+' branch can match at all (deeper than the topic, say).
                if star is not None and star.shortest <= last <= star.longest:
                    stack.append((star, depth + 1))
            if depth == last:
                if node.entries:
                    found.append(node)
                break
            node = node.children.get(levels[depth])
            depth += 1
        if not stack:
            return found
        node, depth = stack.pop()


def _walk_words(root: _Node[V], words: list[str]) -> list[_Node[V]]:
    """The nodes of the AMQP binding keys that match a routing key of ``words``.

    A state is (node, words consumed). A '#' node may consume one more word and stay put; two '#' in one key can
    reach the same state in several ways ("#.#" and "a"), so '#' states are queued once, which also keeps the walk
    linear in (nodes x words) rather than exponential in the number of '#'.
    """
    found: list[_Node[V]] = []
    last = len(words)
    stack: list[tuple[_Node[V], int]] = [(root, 0)]
    queued: set[tuple[_Node[V], int]] = set()
    while stack:
        node, depth = stack.pop()
        tail = node.hash
        if tail is not None and (tail, depth) not in queued:  # '#' consuming zero words so far
            queued.add((tail, depth))
            stack.append((tail, depth))
        if node.is_hash and depth < last and (node, depth + 1) not in queued:  # '#' consuming one more word
            queued.add((node, depth + 1))
            stack.append((node, depth + 1))
        if depth == last:
            if node.entries:
                found.append(node)
            continue
        child = node.children.get(words[depth])
        if child is not None:
            stack.append((child, depth + 1))
        if node.star is not None:
            stack.append((node.star, depth + 1))
    return found
