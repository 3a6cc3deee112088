"""Which codec build is running: the compiled one after `make install`, the pure-Python fallback from src/.

`make test` runs the codec tests on both builds and says which one it expects in MQTTAUDIT_EXPECT_BUILD, so a
compile that silently fell back to pure Python fails here instead of only running slower. Without the variable, a
package imported from the source tree (``PYTHONPATH=src``, the inner loop) must be the pure build, and an installed
one the compiled build.
"""

from __future__ import annotations

import copy
import os
import pickle
from pathlib import Path

import pytest

import mqttaudit
from mqttaudit import codec
from mqttaudit.capture import native

#: The package is imported from a checkout's src/ (the source tree, never compiled in place), not an install.
FROM_SOURCE_TREE = (Path(mqttaudit.__file__).resolve().parents[2] / "pyproject.toml").is_file()
EXPECTED = os.environ.get("MQTTAUDIT_EXPECT_BUILD", "pure" if FROM_SOURCE_TREE else "compiled")


def test_the_expected_codec_build_is_running() -> None:
    assert EXPECTED in {"compiled", "pure"}
    compiled = codec.COMPILED
    assert compiled is (EXPECTED == "compiled"), f"expected the {EXPECTED} codec, got {codec.__file__}"


def test_the_native_reading_path_comes_with_the_compiled_build() -> None:
    """The compiled build has the capture's C extension and reads with it; the pure build has none and reads with
    the pure path (its reference, tests/test_native_reading.py)."""
    assert native.built() is (EXPECTED == "compiled")
    assert native.available() is (EXPECTED == "compiled" and os.environ.get(native.SWITCH, "1") != "0")


SAMPLES = [
    codec.Publish(topic="a/b", payload=b"x", qos=1, packet_id=7),
    codec.Connect(client_id="c", will=codec.Will(topic="w", message=b"bye"), username="u", password=b"p"),
    codec.Subscribe(packet_id=1, subscriptions=[codec.Subscription(topic_filter="a/+", qos=2)]),
    codec.Suback(packet_id=1, return_codes=b"\x00\x80"),
    codec.Pubrel(packet_id=3),
    codec.Disconnect(),
    codec.Frame(0, 2, b"\xc0\x00", codec.Pingreq()),
]


@pytest.mark.parametrize("value", SAMPLES, ids=lambda value: type(value).__name__)
def test_values_compare_hash_copy_and_pickle_by_their_fields(value: codec.Packet | codec.Frame) -> None:
    clone = pickle.loads(pickle.dumps(value))
    assert clone == value and hash(clone) == hash(value)
    assert copy.copy(value) == value and copy.deepcopy(value) == value
    assert (clone != value) is False  # __ne__ follows __eq__
    assert repr(value).startswith(type(value).__name__ + "(")
    assert eval(repr(value), vars(codec)) == value


def test_sequences_given_to_packets_are_kept_as_tuples() -> None:
    subscribe = SAMPLES[2]
    suback = SAMPLES[3]
    assert isinstance(subscribe, codec.Subscribe) and isinstance(subscribe.subscriptions, tuple)
    assert isinstance(suback, codec.Suback) and suback.return_codes == (0x00, 0x80)


def test_packets_of_different_types_with_equal_fields_differ() -> None:
    assert codec.Puback(packet_id=1) != codec.Pubrec(packet_id=1)
    assert codec.Pingreq() != codec.Pingresp()
    assert len({codec.Puback(packet_id=1), codec.Pubrec(packet_id=1), codec.Puback(packet_id=1)}) == 2


@pytest.mark.skipif(not codec.COMPILED, reason="the pure-Python fallback leaves immutability to the type checker")
def test_compiled_packets_are_immutable() -> None:
    packet = codec.Publish(topic="a", qos=1, packet_id=1)
    with pytest.raises(AttributeError):
        packet.qos = 2  # type: ignore[misc]
    assert packet.qos == 1
