"""Security pass, M1: a site session belongs to the worker who opened it; another worker who knows its id gets
nothing of it; the blocklist applies to whoever arrives; the ids never reach a log."""

from __future__ import annotations

from annotation.crowd import sites
from annotation.models import BlockedWorker, ExternalLink, WorkerSession
from config.logfilters import redact

SUBMIT_HOST = "https://workersandbox.mturk.com"


def mturk(client, link, worker, assignment):
    return client.get(
        link.path(), {"assignmentId": assignment, "hitId": "H1", "workerId": worker, "turkSubmitTo": SUBMIT_HOST}
    )


def test_another_worker_cannot_take_over_a_session_by_its_id(client, study):
    link = ExternalLink.objects.create(study=study, platform="mturk")
    owner = mturk(client, link, "W1", "A1")
    assert owner.status_code == 302
    thief = mturk(type(client)(), link, "W2", "A1")  # W1's assignmentId, W2's own worker id
    assert thief.status_code == 403 and b"opened by another worker" in thief.content
    assert owner["Location"].encode() not in thief.content
    assert WorkerSession.objects.get().worker_id == "W1"


def test_the_same_holds_for_a_generic_links_session_id(client, study):
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    assert client.get(link.path(), {"worker_id": "G1", "session_id": "S-1"}).status_code == 302
    taken = type(client)().get(link.path(), {"worker_id": "G2", "session_id": "S-1"})
    assert taken.status_code == 403


def test_a_blocked_worker_is_refused_whatever_session_id_they_bring(client, study):
    link = ExternalLink.objects.create(study=study, platform="mturk")
    mturk(client, link, "W1", "A1")
    BlockedWorker.objects.create(owner=study.owner, platform="mturk", worker_id="W2")
    refused = mturk(type(client)(), link, "W2", "A1")
    assert b"not available to your account" in refused.content


def test_site_ids_are_redacted_from_logs():
    line = (
        '"GET /x/TOKEN/?assignmentId=3ABC&hitId=H9&workerId=A1B2C3&turkSubmitTo=https%3A%2F%2Fw HTTP/1.1" 302 '
        "/x/TOKEN/?worker_id=alice&session_id=S1 /x/T/?PROLIFIC_PID=p1&STUDY_ID=s2&SESSION_ID=s3"
    )
    out = redact(line)
    for secret in ("3ABC", "H9", "A1B2C3", "alice", "S1", "p1", "s2", "s3", "TOKEN"):
        assert secret not in out
    assert "assignmentId=[redacted]" in out and "turkSubmitTo=https" in out
    assert redact("assignmentId=3ABC&workerId=W9") == "assignmentId=[redacted]&workerId=[redacted]"  # %(q)s atom


def test_a_percent_encoded_capability_path_is_redacted_too(client, rater, caplog):
    token = rater.token()
    assert client.get(f"/%72/{token}/").status_code == 200  # Django routes /%72/ as /r/
    line = f'"GET /%72/{token}/ HTTP/1.1" 200 - "/a/r/{token}/"'
    assert token not in redact(line) and redact(line).count("/r/[redacted]/") == 2
    missing = client.get(f"/%72/{token}x/a/1/")
    assert missing.status_code == 404
    assert token not in caplog.text
