"""Topic Names and Topic Filters: validation per dialect and the plain filter/name matcher (the routing trie
comes with the routing oracle)."""

from .matching import dollar_rule_applies, matches, matches_but_for_dollar_rule
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
    "InvalidTopic",
    "dollar_rule_applies",
    "is_valid_topic_filter",
    "is_valid_topic_name",
    "matches",
    "matches_but_for_dollar_rule",
    "topic_filter_violations",
    "topic_name_violations",
    "validate_topic_filter",
    "validate_topic_name",
]
