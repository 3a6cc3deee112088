"""The rule catalogue: every normative statement and derived rule mqttaudit knows, loaded from package data."""

from .catalogue import Catalogue, Rule, load_catalogue

__all__ = ["Catalogue", "Rule", "load_catalogue"]
