"""An LLM judge's endpoint as the server's operator must be able to trust it: its key sent only to the endpoint,
never logged, stored encrypted, read from the environment only where the operator allows; its URL refused for a
private address, credentials or a redirect, and checked again before each run; a failure kept in redacted words.
Against the local OpenAI-compatible server (tests/judge_server.py), as in tests/annotation/test_judge_runner.py."""

from __future__ import annotations

import logging

import pytest

from annotation import jobs
from annotation.endpoints import EndpointError
from annotation.jobs import run_job
from annotation.judges import runner
from annotation.models import Job, Judge, JudgeCall, Judgment
from tests.annotation import test_judge_runner
from tests.annotation.test_judge_runner import KEY, make_judge, study_with
from tests.judge_server import JudgeServer

server = test_judge_runner.server  # the fixture: the local server, started and stopped per test


def test_key_is_sent_never_logged_and_bad_key_stops_the_job(researcher, caplog):
    server = JudgeServer(api_key=KEY).start()
    try:
        study = study_with(researcher, ["Q0?"])
        judge = make_judge(study, server, api_key=KEY)
        caplog.set_level(logging.DEBUG)
        job = runner.JudgeRun(judge).do_start()
        run_job.call(job.pk)
        job.refresh_from_db()
        assert job.status == "done" and "2 judged, 0 unparseable" in job.message
        assert not any(KEY in r.getMessage() for r in caplog.records)
        Judge.objects.filter(pk=judge.pk).update(api_key=KEY + "-wrong")
        JudgeCall.objects.filter(judge=judge).delete()
        judge.refresh_from_db()
        job = runner.JudgeRun(judge).do_start()
        with pytest.raises(Exception, match="AuthenticationError|Incorrect API key"):
            run_job.call(job.pk)
        job.refresh_from_db()
        assert job.status == "failed" and "AuthenticationError" in job.message and KEY not in job.message
        assert not any(KEY in r.getMessage() for r in caplog.records)
    finally:
        server.shutdown()
        server.server_close()


def test_missing_environment_key_is_said_before_the_job(researcher, server, monkeypatch, settings):
    settings.SEPLAB_JUDGE_KEY_VARIABLES = {"SEPLAB_TEST_JUDGE_KEY": ["127.0.0.1"]}
    monkeypatch.delenv("SEPLAB_TEST_JUDGE_KEY", raising=False)
    judge = make_judge(study_with(researcher, ["Q0?"]), server, api_key_env="SEPLAB_TEST_JUDGE_KEY")
    with pytest.raises(EndpointError, match="SEPLAB_TEST_JUDGE_KEY"):
        runner.JudgeRun(judge).do_start()
    assert not Job.objects.filter(kind="judge").exists()


def test_a_judge_may_read_only_the_variables_the_operator_allows(researcher, server, monkeypatch, settings):
    """A judge whose key variable is SECRET_KEY (or DATABASE_URL, cloud credentials...) and whose base
    URL is the researcher's own server would receive it as its bearer token. Only the operator's list may be read,
    and the refusal never says whether a variable exists."""
    settings.SEPLAB_JUDGE_KEY_VARIABLES = {"OPENAI_API_KEY": ["api.openai.com"]}
    monkeypatch.setenv("SECRET_KEY", "the-servers-own-secret-key-0123456789")
    study = study_with(researcher, ["Q0?"])
    for name in ("SECRET_KEY", "DATABASE_URL", "AWS_SECRET_ACCESS_KEY", "NO_SUCH_VARIABLE"):
        with pytest.raises(EndpointError) as refused:
            make_judge(study, server, api_key_env=name, name=f"j-{name}")
        assert (
            "only from the environment variables the server's operator allows: OPENAI_API_KEY (for api.openai.com)"
            in str(refused.value)
        )
        assert "not set" not in str(refused.value)  # the same words whether the variable exists or not
    assert not Judge.objects.exists()
    # a judge stored before the list (or by a script) is refused when it runs: nothing is sent
    judge = make_judge(study, server)
    Judge.objects.filter(pk=judge.pk).update(api_key_env="SECRET_KEY")
    judge.refresh_from_db()
    with pytest.raises(EndpointError, match="operator allows"):
        runner.JudgeRun(judge).do_start()
    with pytest.raises(EndpointError, match="operator allows"):
        runner.JudgeRun(judge).do_run()
    assert server.requests == [] and not Job.objects.filter(kind="judge").exists()
    settings.SEPLAB_JUDGE_KEY_VARIABLES = {}
    with pytest.raises(EndpointError, match="stored keys only"):
        make_judge(study, server, api_key_env="OPENAI_API_KEY", name="j-openai")


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data",  # cloud metadata (link-local)
        "http://10.0.0.5:8000/v1",
        "http://192.168.1.1/v1",
        "http://172.16.0.1/v1",  # private networks
        "http://2130706433:8765/v1",
        "http://0x7f000001:8765/v1",
        "http://127.1:8765/v1",  # loopback, other spellings
        "http://[::1]:8765/v1",
        "http://[::ffff:127.0.0.1]:8765/v1",
        "http://0.0.0.0:8765/v1",
    ],
)
def test_a_judge_may_not_call_a_private_address_unless_the_operator_allows_it(researcher, server, settings, url):
    """No server-side request forgery: base URLs on loopback, private or link-local addresses, in any spelling, are
    refused when saved and before a run, with the same words for every one of them, unless the operator names the
    host."""
    settings.SEPLAB_JUDGE_PRIVATE_HOSTS = []
    study = study_with(researcher, ["Q0?"])
    with pytest.raises(EndpointError) as refused:
        make_judge(study, server, base_url=url)
    assert (
        "loopback, private, link-local or otherwise internal address" in str(refused.value)
        and not Judge.objects.exists()
    )


def test_urls_with_a_query_a_fragment_or_credentials_are_refused(researcher, server):
    study = study_with(researcher, ["Q0?"])
    for url, words in (
        (server.base_url + "?path=/admin", "query"),
        (server.base_url + "#x", "fragment"),
        (server.base_url.replace("http://", "http://user:pw@"), "user name"),
        ("ftp://127.0.0.1/v1", "http:// or https://"),
    ):
        with pytest.raises(EndpointError, match=words):
            make_judge(study, server, base_url=url)


def test_a_judge_saved_for_an_allowed_host_is_checked_again_before_each_run(researcher, server, settings):
    judge = make_judge(study_with(researcher, ["Q0?"]), server)  # 127.0.0.1: allowed while DEBUG (the tests)
    settings.SEPLAB_JUDGE_PRIVATE_HOSTS = []  # the operator withdraws it
    with pytest.raises(EndpointError, match="loopback, private, link-local"):
        runner.JudgeRun(judge).do_start()
    with pytest.raises(EndpointError, match="loopback, private, link-local"):
        runner.JudgeRun(judge).do_run()
    assert server.requests == []
    settings.SEPLAB_JUDGE_PRIVATE_HOSTS = ["127.0.0.0/8"]  # a network works as well as a name
    assert runner.JudgeRun(judge).do_run().recorded == 2


def test_redirects_are_not_followed(researcher, server):
    """An endpoint that answers 307 to another address does not get the request (or its key) re-sent there."""
    import http.server
    import threading

    class Bounce(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 -- the http.server API
            self.send_response(307)
            self.send_header("Location", server.base_url + "/chat/completions")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    bounce = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Bounce)
    threading.Thread(target=bounce.serve_forever, daemon=True).start()
    try:
        judge = make_judge(
            study_with(researcher, ["Q0?"]),
            server,
            base_url=f"http://127.0.0.1:{bounce.server_address[1]}/v1",
            max_retries=0,
        )
        runner.JudgeRun(judge).do_run()
        assert server.requests == []  # the judge server behind the redirect saw nothing
        calls = JudgeCall.objects.filter(judge=judge)
        assert calls.count() == 2 and {c.status for c in calls} == {"failed"} and all("307" in c.problem for c in calls)
        assert not Judgment.objects.filter(rater=judge.rater).exists()
    finally:
        bounce.shutdown()
        bounce.server_close()


def test_a_stored_key_is_encrypted_at_rest_and_a_changed_encryption_key_asks_for_it_again(researcher, settings):
    """Stored judge keys were once plain text in the database (and so in every dump and backup)."""
    from django.db import connection

    server = JudgeServer(api_key=KEY).start()
    try:
        judge = make_judge(study_with(researcher, ["Q0?"]), server, api_key=KEY)
        with connection.cursor() as cursor:
            cursor.execute("SELECT api_key FROM annotation_judge WHERE id = %s", [judge.pk])
            stored = cursor.fetchone()[0]
        assert stored.startswith("fernet:") and KEY not in stored
        judge.refresh_from_db()
        assert judge.api_key == KEY and runner.JudgeRun(judge).do_run().recorded == 2  # read back and sent as it was
        # a key stored before encryption is read as it is and sealed when written again
        with connection.cursor() as cursor:
            cursor.execute("UPDATE annotation_judge SET api_key = %s WHERE id = %s", [KEY, judge.pk])
        judge.refresh_from_db()
        assert judge.api_key == KEY
        judge.save()
        with connection.cursor() as cursor:
            cursor.execute("SELECT api_key FROM annotation_judge WHERE id = %s", [judge.pk])
            assert cursor.fetchone()[0].startswith("fernet:")
        # the operator changes the encryption key: the stored key cannot be read, nothing is sent, the page says why
        settings.SEPLAB_ENCRYPTION_KEY = "another-key-entirely"
        judge.refresh_from_db()
        requests_before = len(server.requests)
        with pytest.raises(EndpointError, match="cannot be read.*Type the key again"):
            runner.JudgeRun(judge).do_start()
        assert len(server.requests) == requests_before
    finally:
        server.shutdown()
        server.server_close()


def test_a_failed_run_leaves_only_redacted_words_in_the_task_result(researcher, server):
    """A failing run re-raises for django-tasks, whose result row (the admin, the worker's log) kept the original
    exception: an endpoint echoing the key put it there. The task's exception now carries the redacted message only."""
    judge = make_judge(study_with(researcher, ["Q0?"]), server, api_key=KEY)
    job = runner.JudgeRun(judge).do_start()

    def echoing(*args, **kwargs):
        raise RuntimeError(f"the endpoint said: bad request for key {KEY}")

    import unittest.mock

    with unittest.mock.patch.object(runner.JudgeRun, "do_run", echoing), pytest.raises(jobs.JobFailed) as raised:
        run_job.call(job.pk)
    assert KEY not in str(raised.value) and "[key]" in str(raised.value)
    assert raised.value.__suppress_context__ and raised.value.__cause__ is None
    job.refresh_from_db()
    assert job.status == "failed" and KEY not in job.message
