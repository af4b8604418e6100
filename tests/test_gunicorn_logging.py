"""The access log's redaction, atom by atom, for any format an operator may configure."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from gunicorn.config import Config
from gunicorn.glogging import SafeAtoms

from config.gunicorn_logging import RedactingLogger

TOKEN = "eyJyIjoxLCJuIjoiYWJjIn0:SECRETSIGNATURE"
EVERYTHING = (
    '%(h)s %(l)s %(u)s %(t)s "%(r)s" %(s)s %(m)s %(U)s %(q)s %(H)s %(b)s %(f)s "%(a)s" %(D)s '
    "%({authorization}i)s %({Referer}i)s %({cookie}i)s %({set-cookie}o)s %({raw_uri}e)s "
    "%({x-request-path}o)s"
)


def line(access_log_format: str) -> tuple[str, dict]:
    cfg = Config()
    cfg.set("access_log_format", access_log_format)
    logger = RedactingLogger(cfg)
    path = f"/r/{TOKEN}/a/1/submit/"
    environ = {
        "REQUEST_METHOD": "POST",
        "RAW_URI": path + "?workerId=W123",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "PATH_INFO": path,
        "QUERY_STRING": "workerId=W123",
        "REMOTE_ADDR": "127.0.0.1",
        "HTTP_REFERER": f"http://h/x/{TOKEN}/?assignmentId=A1",
        "HTTP_USER_AGENT": "test",
    }
    req = SimpleNamespace(
        headers=[
            ("AUTHORIZATION", "Token APITOKENSECRET"),
            ("REFERER", environ["HTTP_REFERER"]),
            ("COOKIE", "sessionid=COOKIESECRET"),
        ]
    )
    resp = SimpleNamespace(
        status="200 OK", sent=12, headers=[("Set-Cookie", "sessionid=COOKIESECRET"), ("X-Request-Path", path)]
    )
    atoms = logger.atoms(resp, req, environ, dt.timedelta(microseconds=1500))
    return access_log_format % SafeAtoms(atoms), atoms


def test_no_token_id_or_credential_reaches_any_atom_of_the_log():
    text, _ = line(EVERYTHING)
    for secret in ("SECRETSIGNATURE", "APITOKENSECRET", "COOKIESECRET", "W123", "A1"):
        assert secret not in text
    assert '"POST /r/[redacted]/a/1/submit/?workerId=[redacted] HTTP/1.1"' in text
    assert "http://h/x/[redacted]/?assignmentId=[redacted]" in text
    assert text.count("[redacted]") >= 9


def test_only_the_atoms_the_format_names_are_kept():
    text, atoms = line("%(s)s %(U)s %(D)s")
    assert set(atoms) == {"s", "U", "D"}
    assert text == "200 /r/[redacted]/a/1/submit/ 1500"
