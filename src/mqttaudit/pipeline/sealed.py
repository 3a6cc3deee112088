"""What the tasks of an audit with a key log hand each other through files and shuffles, unreadable after the run.

The judging tasks leave each connection's transcript (its head and pieces) in a file for the routing replay
(:data:`~.task_files.TRANSCRIPTS_DIR`); what they hand Spark to shuffle is its name and counts, no ClientId. Decrypted
from TLS, the transcripts' bytes are the user's secrets, and a run killed before its clean-up would leave them behind.
So with a key log the transcripts are sealed (AES-GCM, a fresh nonce each) under a key drawn for the run that is never
written: it travels in the tasks' closures, in memory, and dies with the run.
"""

from __future__ import annotations

import os
from typing import Final

KEY_BYTES: Final = 32
_NONCE_BYTES: Final = 12


def new_key() -> bytes:
    """A key for one run."""
    return os.urandom(KEY_BYTES)


def seal(key: bytes | None, data: bytes) -> bytes:
    """``data`` sealed under ``key`` (nonce, then ciphertext and tag); as they are without a key."""
    if key is None:
        return data
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    nonce = os.urandom(_NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, data, None)


def unseal(key: bytes | None, sealed: bytes) -> bytes:
    """What :func:`seal` sealed under ``key``."""
    if key is None:
        return sealed
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    plain: bytes = AESGCM(key).decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], None)
    return plain
