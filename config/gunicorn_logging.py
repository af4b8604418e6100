"""gunicorn's access log without capabilities in it: rater, external and open-link tokens are redacted
from the request line, the path and the Referer, and credential headers are never written.

Only the atoms the access-log format names are kept (and redacted); gunicorn hands the logger every request
and response header and every environ variable, and redacting all of them cost ~5 % of a worker's CPU at
50 raters at maximum pace (bench/README.md, "Raters under load"). An atom the format does not name is never
written, so dropping it changes no line of the log.
"""

from __future__ import annotations

import functools
import re

from gunicorn.glogging import Logger

from config.logfilters import redact

CREDENTIAL_ATOMS = ("{authorization}i", "{proxy-authorization}i", "{cookie}i", "{set-cookie}o")
FORMAT_ATOM = re.compile(r"%\(([^)]*)\)")


@functools.lru_cache(maxsize=8)
def used_atoms(access_log_format: str) -> frozenset[str]:
    """The atoms a format names, as gunicorn looks them up (header and environ atoms in lower case)."""
    return frozenset(name.lower() if name.startswith("{") else name for name in FORMAT_ATOM.findall(access_log_format))


class RedactingLogger(Logger):
    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        kept = {}
        for key in used_atoms(self.cfg.access_log_format):
            if key in CREDENTIAL_ATOMS:
                kept[key] = "[redacted]"
            elif key in atoms:
                value = atoms[key]
                kept[key] = redact(value) if isinstance(value, str) else value
        return kept
