"""Rater, open and external links are capabilities: their signed tokens must never reach a log; nor do the
crowd sites' worker and session ids in their query strings (knowing one is enough to try to take a session)."""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote

# A capability segment: /r/, /x/ or /join/, also percent-encoded (/%72/ routes like /r/), then the token.
# Zero-width, so candidates may overlap (/a/r/TOKEN/ has the candidate a/r and then r/TOKEN).
TOKEN_IN_PATH = re.compile(r"(?=/((?:[A-Za-z]|%[0-9A-Fa-f]{2}){1,12})/([^/\s?\"]+))")
CAPABILITY_SEGMENTS = {"r", "x", "join"}
SITE_IDS = ("assignmentId", "workerId", "hitId", "worker_id", "session_id", "PROLIFIC_PID", "SESSION_ID", "STUDY_ID")
SITE_ID_IN_QUERY = re.compile(r"((?:^|[?&])(?:" + "|".join(SITE_IDS) + r")=)[^&\s\"']*")


def redact(text: str) -> str:
    out, done = [], 0
    for match in TOKEN_IN_PATH.finditer(text):
        start = match.start()
        segment = unquote(match.group(1))
        if start < done or segment not in CAPABILITY_SEGMENTS:
            continue
        out.append(f"{text[done:start]}/{segment}/[redacted]")
        done = start + len(match.group(1)) + len(match.group(2)) + 2
    text = "".join(out) + text[done:]
    return SITE_ID_IN_QUERY.sub(lambda m: f"{m.group(1)}[redacted]", text)


class RedactTokens(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(str(record.msg))
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        return True
