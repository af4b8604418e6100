"""Rater, open and external links are capabilities: their signed tokens must never reach a log."""

from __future__ import annotations

import logging
import re

TOKEN_IN_PATH = re.compile(r"/(r|x|join)/[^/\s]+")


def redact(text: str) -> str:
    return TOKEN_IN_PATH.sub(lambda m: f"/{m.group(1)}/[redacted]", text)


class RedactTokens(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(str(record.msg))
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        return True
