"""gunicorn's access log without capabilities in it: rater, external and open-link tokens are redacted
from the request line, the path and the Referer, and credential headers are never written."""

from __future__ import annotations

from gunicorn.glogging import Logger

from config.logfilters import redact

CREDENTIAL_ATOMS = ("{authorization}i", "{proxy-authorization}i", "{cookie}i", "{set-cookie}o")


class RedactingLogger(Logger):
    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        for key, value in atoms.items():
            if isinstance(value, str):
                atoms[key] = redact(value)
        for key in CREDENTIAL_ATOMS:
            if key in atoms:
                atoms[key] = "[redacted]"
        return atoms
