"""The two ends of a connection, as the judge names them (compiled: asked several times per packet)."""

from __future__ import annotations

from mqttaudit.codec import Direction


def peer(side: Direction) -> Direction:
    """The other end of the connection."""
    return Direction.FROM_SERVER if side is Direction.FROM_CLIENT else Direction.FROM_CLIENT


def side_name(side: Direction) -> str:
    """ "client" or "server", for details (without Enum's Python-level ``value`` property: once per packet)."""
    return "client" if side is Direction.FROM_CLIENT else "server"
