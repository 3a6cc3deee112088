"""The rule catalogue: every normative statement and derived rule mqttaudit knows, loaded from package data."""

from .catalogue import VERSIONS, Catalogue, Rule, load_catalogue, parse_version

__all__ = ["VERSIONS", "Catalogue", "Rule", "load_catalogue", "parse_version"]
