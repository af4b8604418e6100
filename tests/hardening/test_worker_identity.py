"""Security pass, M1: a site session belongs to the worker who opened it; another worker who knows its id gets
nothing of it; the blocklist applies to whoever arrives; the ids never reach a log. L10: an id longer than any
site's is refused with what is wrong, never cut and never a 500 (PostgreSQL)."""

from __future__ import annotations

import pytest

from annotation.crowd import sites
from annotation.errors import ServiceError
from annotation.models import BlockedWorker, ExternalLink, Rater, WorkerSession
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


@pytest.mark.parametrize("length", [151, 193, 200, 201, 5000])
@pytest.mark.parametrize("platform", ["generic", "prolific", "mturk"])
def test_an_over_long_worker_id_is_refused_not_a_500(client, study, platform, length):
    """A worker id of 193 to 200 characters once answered 500 on PostgreSQL (the stored ``platform:`` prefix pushed
    the rater's id past its column); a longer one was cut to 200 characters. Now one over MAX_ID_CHARS is refused with
    what is wrong, and nothing is stored."""
    link = sites.do_create_external_link(study, platform, "ps1" if platform == "prolific" else "")
    worker = "W" * length
    params = {
        "generic": {"worker_id": worker},
        "prolific": {"PROLIFIC_PID": worker, "STUDY_ID": "ps1", "SESSION_ID": "s1"},
        "mturk": {"workerId": worker, "assignmentId": "A1", "hitId": "H1"},
    }[platform]
    refused = client.get(link.path(), params)
    assert refused.status_code == 400
    assert f"is {length} characters long" in refused.content.decode() and str(sites.MAX_ID_CHARS) in (
        refused.content.decode()
    )
    assert not WorkerSession.objects.exists() and not Rater.objects.filter(source="external").exists()


@pytest.mark.parametrize("platform", ["generic", "prolific", "mturk"])
def test_the_longest_accepted_ids_are_stored_whole(client, study, platform):
    link = sites.do_create_external_link(study, platform)
    worker, session = "W" * sites.MAX_ID_CHARS, "S" * sites.MAX_ID_CHARS
    params = {
        "generic": {"worker_id": worker},
        "prolific": {"PROLIFIC_PID": worker, "STUDY_ID": "x" * sites.MAX_ID_CHARS, "SESSION_ID": session},
        "mturk": {"workerId": worker, "assignmentId": session, "hitId": "H" * sites.MAX_ID_CHARS},
    }[platform]
    assert client.get(link.path(), params).status_code == 302
    stored = WorkerSession.objects.get()
    assert stored.worker_id == worker and stored.rater.external_id == f"{platform}:{worker}"


def test_a_long_session_id_or_submit_address_is_refused_too(client, study):
    link = ExternalLink.objects.create(study=study, platform="mturk")
    too_long = "A" * (sites.MAX_ID_CHARS + 1)
    assert mturk(client, link, "W1", too_long).status_code == 400
    cut_to_a_host = {"assignmentId": "A1", "workerId": "W1", "turkSubmitTo": SUBMIT_HOST + "/" * 300}
    assert client.get(link.path(), cut_to_a_host).status_code == 400
    assert not WorkerSession.objects.exists()


def test_blocking_an_over_long_worker_id_is_refused_with_its_length(study):
    with pytest.raises(ServiceError, match="at most 150 characters"):
        sites.do_block_worker(study.owner, "mturk", "W" * 199)
    assert not BlockedWorker.objects.exists()
