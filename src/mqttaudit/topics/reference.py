"""The brute-force routing oracle the trie is tested against: a plain list of subscriptions, each checked against
the topic with a pair matcher. Obviously correct and slow; use :class:`~mqttaudit.topics.trie.TopicTrie` for work.

It validates with the same rules as the trie (so both refuse the same input with the same rule id) and keeps the
trie's contract: a subscription is (namespace, filter as given, value), added once, and matches come back in the
order the subscriptions were added.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from .matching import matches
from .trie import AMQP, MQTT, MQTT5, TRIE_DIALECTS, check_filter, check_topic, parse_shared

V = TypeVar("V", bound=Hashable)


def amqp_matches(binding_key: str, routing_key: str) -> bool:
    """True when an AMQP 0-9-1 topic exchange binding key matches a routing key.

    >>> amqp_matches("*.orange.*", "quick.orange.rabbit"), amqp_matches("lazy.#", "lazy"), amqp_matches("", "")
    (True, True, True)
    """
    return _words_match(_words(binding_key), _words(routing_key))


def _words(key: str) -> tuple[str, ...]:
    return tuple(key.split(".")) if key else ()  # the empty key is zero words


def _words_match(pattern: tuple[str, ...], words: tuple[str, ...]) -> bool:
    if not pattern:
        return not words
    head, rest = pattern[0], pattern[1:]
    if head == "#":  # zero words, or one word and '#' again
        return _words_match(rest, words) or (len(words) > 0 and _words_match(pattern, words[1:]))
    if not words:
        return False
    return (head == "*" or head == words[0]) and _words_match(rest, words[1:])


class ReferenceMatcher(Generic[V]):
    """The same add/remove/match contract as ``TopicTrie``, answered by checking every subscription."""

    def __init__(self, dialect: str = MQTT) -> None:
        if dialect not in TRIE_DIALECTS:
            raise ValueError(f"unknown trie dialect {dialect!r}; known: {', '.join(TRIE_DIALECTS)}")
        self.dialect = dialect
        self._subscriptions: list[tuple[Hashable, str, V]] = []

    def __len__(self) -> int:
        return len(self._subscriptions)

    def add(self, namespace: Hashable, topic_filter: str, value: V) -> bool:
        self._check_filter(topic_filter)
        subscription = (namespace, topic_filter, value)
        if subscription in self._subscriptions:
            return False
        self._subscriptions.append(subscription)
        return True

    def remove(self, namespace: Hashable, topic_filter: str, value: V) -> bool:
        self._check_filter(topic_filter)
        subscription = (namespace, topic_filter, value)
        if subscription not in self._subscriptions:
            return False
        self._subscriptions.remove(subscription)
        return True

    def subscriptions(self) -> list[tuple[Hashable, str, V]]:
        """Every (namespace, topic filter, value), in the order added."""
        return list(self._subscriptions)

    def namespaces(self) -> list[Hashable]:
        return list(dict.fromkeys(namespace for namespace, _, _ in self._subscriptions))

    def filters(self, namespace: Hashable) -> list[str]:
        return sorted({topic_filter for n, topic_filter, _ in self._subscriptions if n == namespace})

    def match(self, namespace: Hashable, topic: str) -> list[V]:
        return [value for _, value in self.match_subscriptions(namespace, topic)]

    def match_subscriptions(self, namespace: Hashable, topic: str) -> list[tuple[str, V]]:
        self._check_topic(topic)
        return [
            (topic_filter, value)
            for n, topic_filter, value in self._subscriptions
            if n == namespace and self._pair_matches(topic_filter, topic)
        ]

    def _pair_matches(self, topic_filter: str, topic: str) -> bool:
        if self.dialect == AMQP:
            return amqp_matches(topic_filter, topic)
        if self.dialect == MQTT5:
            shared = parse_shared(topic_filter)
            if shared is not None:
                return matches(shared[1], topic)
        return matches(topic_filter, topic)

    def _check_filter(self, topic_filter: str) -> None:
        check_filter(topic_filter, self.dialect)

    def _check_topic(self, topic: str) -> None:
        check_topic(topic, self.dialect)
