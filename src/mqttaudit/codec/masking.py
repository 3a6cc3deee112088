"""Passwords as every report shows them: asterisks of their length, in the CONNECT and in its bytes. The probe masks
what it sends, the audit what it decoded; neither the judge nor a report ever holds the password itself."""

from __future__ import annotations

from typing import Final

from .packets import Connect

MASK: Final = b"*"


def mask_password(connect: Connect) -> Connect:
    """The same CONNECT with its password as asterisks of its length (one without a password is returned as is)."""
    if not connect.password:
        return connect
    fields = dict(zip(Connect.FIELDS, connect.values(), strict=True))
    return Connect(**{**fields, "password": MASK * len(connect.password)})  # type: ignore[arg-type]


def mask_password_bytes(raw: bytes, password: bytes | None) -> bytes:
    """A CONNECT's bytes with its password's bytes as asterisks. The password is the payload's last field (MQTT
    3.1.1 and 5.0 section 3.1.3), so whole bytes end with it; anywhere else (cut evidence) every copy is masked."""
    if not password:
        return raw
    masked = MASK * len(password)
    if raw.endswith(password):
        return raw[: len(raw) - len(password)] + masked
    return raw.replace(password, masked)
