"""Topics, per dialect (MQTT 3.1.1, MQTT 5.0 with shared subscriptions, AMQP 0-9-1 topic exchange): validation of
Topic Names and Topic Filters, the plain filter/name matcher, the routing trie with a root per namespace, and the
brute-force reference matcher the trie is tested against."""

from .amqp import key_violations as amqp_key_violations
from .amqp import validate_binding_key, validate_routing_key
from .matching import TopicIndex, dollar_rule_applies, matches, matches_but_for_dollar_rule
from .reference import ReferenceMatcher, amqp_matches
from .trie import AMQP, MQTT, MQTT5, TRIE_DIALECTS, TopicTrie, check_filter, check_topic, parse_shared
from .validation import (
    InvalidTopic,
    is_valid_topic_filter,
    is_valid_topic_name,
    topic_filter_violations,
    topic_name_violations,
    validate_topic_filter,
    validate_topic_name,
)

__all__ = [
    "AMQP",
    "MQTT",
    "MQTT5",
    "TRIE_DIALECTS",
    "InvalidTopic",
    "ReferenceMatcher",
    "TopicIndex",
    "TopicTrie",
    "amqp_key_violations",
    "amqp_matches",
    "check_filter",
    "check_topic",
    "dollar_rule_applies",
    "is_valid_topic_filter",
    "is_valid_topic_name",
    "matches",
    "matches_but_for_dollar_rule",
    "parse_shared",
    "topic_filter_violations",
    "topic_name_violations",
    "validate_binding_key",
    "validate_routing_key",
    "validate_topic_filter",
    "validate_topic_name",
]
