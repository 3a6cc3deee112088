"""What the tasks of an audit with a key log hand each other through files and shuffles, unreadable after the run.

The judging tasks leave each connection's transcript in a file for the routing replay
(:data:`~.task_files.TRANSCRIPTS_DIR`) and hand its ClientId to Spark, which shuffles it to the replay's shards (files
in Spark's local folders). Decrypted from TLS, those bytes are the user's secrets, and a run killed before its clean-up
would leave them behind. So with a key log the transcripts are sealed (AES-GCM, a fresh nonce each) and the ClientIds
replaced by a keyed digest, under a key drawn for the run that is never written: it travels in the tasks' closures, in
memory, and dies with the run.
"""

from __future__ import annotations

import hashlib
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


def keyed_name(key: bytes | None, name: str | None) -> str | None:
    """A name (a ClientId) as it may cross a shuffle: equal names stay equal, and without the run's key nothing of
    it can be read back; as it is without a key."""
    if key is None or name is None:
        return name
    return hashlib.blake2b(name.encode("utf-8", "surrogatepass"), key=key, digest_size=16).hexdigest()
