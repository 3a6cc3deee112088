"""Broker profiles and 5.0 capabilities, without a broker: the TOML a profile takes and refuses, the defaults 5.0
gives an absent CONNACK property (section 3.2.2.3), and a profile put over a CONNACK."""

from __future__ import annotations

from pathlib import Path

import pytest

from mqttaudit.codec import Connack
from mqttaudit.codec import properties as props
from mqttaudit.probe.capabilities import FEATURES, Capabilities
from mqttaudit.probe.profile import (
    NO_PROFILE,
    AuthenticationScript,
    BrokerProfile,
    ProfileError,
    load_profile,
    parse_profile,
)


def test_a_profile_reads_every_key_it_knows() -> None:
    profile = parse_profile(
        """
        maximum_qos = 1
        retain_available = false
        wildcard_available = true
        subscription_identifiers_available = false
        shared_available = false
        topic_alias_maximum = 5
        receive_maximum = 2
        maximum_packet_size = 1024
        server_keep_alive = 30
        authentication_methods = ["SCRAM-SHA-1"]
        """,
        "b.toml",
    )
    assert profile == BrokerProfile(
        maximum_qos=1,
        retain_available=False,
        wildcard_available=True,
        subscription_identifiers_available=False,
        shared_available=False,
        topic_alias_maximum=5,
        receive_maximum=2,
        maximum_packet_size=1024,
        server_keep_alive=30,
        authentication_methods=("SCRAM-SHA-1",),
        source="b.toml",
    )


def test_a_profile_scripts_one_authentication_exchange() -> None:
    """``[authentication]``: the CONNECT's method and data, then the answer to each AUTH 0x18 of the server."""
    profile = parse_profile('[authentication]\nmethod = "M"\ndata = ["6869", "", "0A0b"]\n')
    assert profile.authentication == AuthenticationScript("M", b"hi", (b"", b"\x0a\x0b"))
    assert profile.declared() == {"authentication": profile.authentication}
    assert parse_profile('[authentication]\nmethod = "M"\ndata = [""]').authentication == AuthenticationScript("M", b"")


def test_an_empty_profile_declares_nothing_and_an_empty_list_declares_none() -> None:
    assert parse_profile("").declared() == {}
    assert parse_profile("authentication_methods = []").declared() == {"authentication_methods": ()}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nope = 1", "unknown key 'nope'"),
        ("[broker]\nreceive_maximum = 2", "unknown key 'broker'"),
        ('receive_maximum = "2"', "receive_maximum must be an integer, not a string"),
        ("receive_maximum = true", "receive_maximum must be an integer, not a boolean"),
        ("receive_maximum = 0", "receive_maximum must be from 1 to 65535, not 0"),
        ("maximum_qos = 3", "maximum_qos must be from 0 to 2, not 3"),
        ("maximum_packet_size = 2.5", "maximum_packet_size must be an integer, not a float"),
        ("retain_available = 0", "retain_available must be true or false, not an integer"),
        ('authentication_methods = "PLAIN"', "authentication_methods must be a list of strings, not a string"),
        ("authentication_methods = [1]", "authentication_methods must be a list of strings, not an array"),
        ("receive_maximum = ", "is not valid TOML"),
        ('authentication = "PLAIN"', "authentication must be a table, not a string"),
        ('[authentication]\ndata = ["00"]', "authentication.method must be a non-empty string, not nothing"),
        ('[authentication]\nmethod = "M"', "authentication.data must be a non-empty list of hex strings"),
        ('[authentication]\nmethod = "M"\ndata = []', "authentication.data must be a non-empty list of hex strings"),
        ('[authentication]\nmethod = "M"\ndata = ["00", "xyz"]', r"authentication.data\[1\] is not hex: 'xyz'"),
        ('[authentication]\nmethod = "M"\ndata = ["00"]\nanswers = []', "unknown key 'answers' in authentication"),
    ],
)
def test_a_bad_profile_is_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        parse_profile(text, "p.toml")


def test_a_profile_file_that_cannot_be_read_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read the profile"):
        load_profile(tmp_path / "missing.toml")
    (tmp_path / "latin1.toml").write_bytes(b"# \xe9\n")
    with pytest.raises(ProfileError, match="cannot read the profile"):
        load_profile(tmp_path / "latin1.toml")
    (tmp_path / "ok.toml").write_text("receive_maximum = 2\n")
    assert load_profile(tmp_path / "ok.toml").receive_maximum == 2


def test_a_connack_without_properties_takes_the_defaults_of_section_3_2_2_3() -> None:
    capabilities = Capabilities.from_connack(Connack())
    assert capabilities == Capabilities()
    assert (capabilities.maximum_qos, capabilities.receive_maximum, capabilities.topic_alias_maximum) == (2, 65535, 0)
    assert capabilities.retain_available and capabilities.wildcard_available and capabilities.shared_available
    assert capabilities.subscription_identifiers_available
    assert capabilities.maximum_packet_size is None and capabilities.server_keep_alive is None
    assert capabilities.source("maximum_qos") == "default"


def test_a_connack_declares_its_capabilities() -> None:
    connack = Connack(
        properties=props.make(
            maximum_qos=1,
            retain_available=0,
            wildcard_subscription_available=0,
            subscription_identifier_available=0,
            shared_subscription_available=0,
            topic_alias_maximum=10,
            receive_maximum=20,
            maximum_packet_size=2048,
            server_keep_alive=60,
        )
    )
    capabilities = Capabilities.from_connack(connack)
    assert (capabilities.maximum_qos, capabilities.topic_alias_maximum, capabilities.receive_maximum) == (1, 10, 20)
    assert (capabilities.maximum_packet_size, capabilities.server_keep_alive) == (2048, 60)
    assert capabilities.retain_available is False and capabilities.wildcard_available is False
    assert capabilities.subscription_identifiers_available is False and capabilities.shared_available is False
    assert capabilities.source("receive_maximum") == "CONNACK"
    assert capabilities.unsupported("qos1") is None
    assert capabilities.unsupported("qos2") == "the broker's CONNACK declares maximum_qos = 1"
    assert capabilities.unsupported("retain") == "the broker's CONNACK declares retain_available = false"


def test_the_profile_is_put_over_the_connack() -> None:
    connack = Connack(properties=props.make(receive_maximum=20, retain_available=1))
    profile = parse_profile("receive_maximum = 2\nretain_available = false\n", "b.toml")
    capabilities = Capabilities.from_connack(connack).merged(profile)
    assert capabilities.receive_maximum == 2 and capabilities.retain_available is False
    assert capabilities.source("receive_maximum") == capabilities.source("retain_available") == "profile"
    assert capabilities.unsupported("retain") == "the profile declares retain_available = false"
    assert Capabilities.from_connack(connack).merged(NO_PROFILE) == Capabilities.from_connack(connack)


def test_every_feature_is_supported_by_default_but_topic_aliases() -> None:
    assert [feature for feature in FEATURES if Capabilities().unsupported(feature)] == ["topic-aliases"]
    with pytest.raises(ValueError, match="unknown feature"):
        Capabilities().unsupported("teleportation")
