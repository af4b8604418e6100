"""Rater, open and external links are capabilities: their signed tokens must never reach a log; nor do the
crowd sites' worker and session ids in their query strings (knowing one is enough to try to take a session)."""

from __future__ import annotations

import logging
import re

TOKEN_IN_PATH = re.compile(r"/(r|x|join)/[^/\s]+")
SITE_IDS = ("assignmentId", "workerId", "hitId", "worker_id", "session_id", "PROLIFIC_PID", "SESSION_ID", "STUDY_ID")
SITE_ID_IN_QUERY = re.compile(r"((?:^|[?&])(?:" + "|".join(SITE_IDS) + r")=)[^&\s\"']*")


def redact(text: str) -> str:
    text = TOKEN_IN_PATH.sub(lambda m: f"/{m.group(1)}/[redacted]", text)
    return SITE_ID_IN_QUERY.sub(lambda m: f"{m.group(1)}[redacted]", text)


class RedactTokens(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(str(record.msg))
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        return True
