"""Topic Names and Topic Filters: validation per dialect (the routing trie comes with the routing oracle)."""

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
    "is_valid_topic_filter",
    "is_valid_topic_name",
    "topic_filter_violations",
    "topic_name_violations",
    "validate_topic_filter",
    "validate_topic_name",
]
