"""Secrets a researcher stores with a study (an LLM judge's API key), encrypted in the database: Fernet (AES-128-CBC
with HMAC-SHA256) from the maintained ``cryptography`` package, with a key derived from SEPLAB_ENCRYPTION_KEY (or,
when that is unset, SECRET_KEY). A database dump, a backup or the admin shows ``fernet:…``, never the key.

Rotating the encryption key (or SECRET_KEY without SEPLAB_ENCRYPTION_KEY) makes the stored keys unreadable: a judge
then says its stored key cannot be read and asks for it again; nothing is sent with a wrong key."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings
from django.db import models

PREFIX = "fernet:"


class UnreadableSecret(ValueError):
    """A stored secret encrypted with another key."""


def _fernet() -> Fernet:
    material = (settings.SEPLAB_ENCRYPTION_KEY or settings.SECRET_KEY).encode()
    key = hashlib.sha256(b"seplab.secrets-at-rest\x00" + material).digest()
    return Fernet(base64.urlsafe_b64encode(key))


def seal(plain: str) -> str:
    return PREFIX + _fernet().encrypt(plain.encode()).decode() if plain else ""


def unseal(stored: str) -> str:
    """The plain secret; a value stored before encryption (no prefix) is returned as it is."""
    if not stored or not stored.startswith(PREFIX):
        return stored or ""
    try:
        return _fernet().decrypt(stored[len(PREFIX) :].encode()).decode()
    except InvalidToken:
        raise UnreadableSecret(
            "The stored key cannot be read: the server's encryption key changed since it was "
            "stored. Type the key again on the judge's page."
        ) from None


class SealedTextField(models.TextField):
    """A text column holding its value encrypted (``seal``): Python code reads and writes the plain value; the
    database only ever holds ``fernet:…``. An unreadable stored value reads as ``UnreadableSecret`` when used."""

    def from_db_value(self, value, expression, connection):
        if value is None or not value.startswith(PREFIX):
            return value
        try:
            return unseal(value)
        except UnreadableSecret:
            return SealedUnreadable(value)

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        if value is None or isinstance(value, SealedUnreadable):
            return str(value) if value is not None else None
        return seal(value)


class SealedUnreadable(str):
    """A stored secret this server cannot decrypt: kept as it is on save, refused when used."""
