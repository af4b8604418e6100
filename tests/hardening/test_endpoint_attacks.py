"""The attacks on judges' and generated systems' endpoints that broke the production setup, each reproduced against
the local OpenAI-compatible server (tests/judge_server.py) and now refused: the operator's key sent to a host the
researcher controls and echoed onto the page; a stored key sent to a changed URL; internal addresses the address
check let through and DNS rebinding; replies of any size and whole extra JSON kept; Stop that waited for a hung
request; malformed replies that failed a run and an error message of megabytes; a request allowed to take hours."""

from __future__ import annotations

import io
import itertools
import threading
import time
import tracemalloc

import httpx2
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connections
from django.urls import reverse

from annotation import endpoints, outbound
from annotation.endpoints import ERROR_CHARS, EndpointError
from annotation.generating import runner as generating
from annotation.jobs import run_job
from annotation.judges import runner
from annotation.models import Generation, GenerationCall, Job, Judge, JudgeCall
from tests.annotation.test_generation import add, inputs_study
from tests.annotation.test_judge_runner import KEY, make_judge, study_with
from tests.annotation.test_judge_views import form_data
from tests.judge_server import JudgeServer, server_fixture

OPERATOR_KEY = "sk-operator-9f8e7d6c5b4a39281706"
VARIABLE = "SEPLAB_TEST_OPERATOR_KEY"
server = server_fixture()


@pytest.fixture
def operator_key(monkeypatch, settings):
    """The operator allows one variable, for api.openai.com only."""
    monkeypatch.setenv(VARIABLE, OPERATOR_KEY)
    settings.SEPLAB_JUDGE_KEY_VARIABLES = {VARIABLE: ["api.openai.com"]}


def bearer_tokens(server: JudgeServer) -> set[str]:
    return {
        value for headers in server.headers_seen for name, value in headers.items() if name.lower() == "authorization"
    }


# ----------------------------------------------------------------------------------------------------------
# High 1: the operator's key goes only to its hosts; a stored key only to its URL; replies never show a key


def test_the_operators_key_is_refused_for_any_other_host_on_save_at_start_and_per_request(
    researcher, server, operator_key, settings
):
    study = study_with(researcher, ["Q0?"])
    with pytest.raises(EndpointError, match=f"The key in {VARIABLE} is for api.openai.com only, not for 127.0.0.1"):
        make_judge(study, server, api_key_env=VARIABLE)
    assert not Judge.objects.exists()
    # stored by a script (or before the operator tied the variable to its hosts): refused at start and by a run
    judge = make_judge(study, server)
    Judge.objects.filter(pk=judge.pk).update(api_key_env=VARIABLE)
    judge.refresh_from_db()
    for attempt in (runner.JudgeRun(judge).do_start, runner.JudgeRun(judge).do_run):
        with pytest.raises(EndpointError, match="is for api.openai.com only"):
            attempt()
    # and by the transport itself, before each request, whatever URL the request was built with
    transport = outbound.EndpointTransport(key_variable=VARIABLE)
    request = httpx2.Request("POST", server.base_url + "/chat/completions", headers={"Authorization": "Bearer x"})
    with pytest.raises(outbound.EndpointRefused, match="is for api.openai.com only"):
        transport.handle_request(request)
    assert server.requests == [] and not Job.objects.exists()
    # on its own host, the key goes: the operator names the local server's address
    settings.SEPLAB_JUDGE_KEY_VARIABLES = {VARIABLE: ["api.openai.com", "127.0.0.1"]}
    assert runner.JudgeRun(judge).do_run().recorded == 2
    assert bearer_tokens(server) == {f"Bearer {OPERATOR_KEY}"}


def test_the_form_offers_each_variable_with_its_hosts_and_refuses_it_elsewhere(
    researcher_client, researcher, server, operator_key
):
    study = study_with(researcher, ["Q0?"])
    url = reverse("judges", args=[study.pk])
    page = researcher_client.get(url).content.decode()
    assert f'<option value="{VARIABLE}">{VARIABLE} (for api.openai.com)</option>' in page
    refused = researcher_client.post(url, form_data(server, api_key="", api_key_env=VARIABLE))
    assert refused.status_code == 200 and not Judge.objects.exists()
    assert "is for api.openai.com only, not for 127.0.0.1" in refused.content.decode()
    systems = reverse("systems", args=[study.pk])
    assert f"{VARIABLE} (for api.openai.com)" in researcher_client.get(systems).content.decode()


def test_a_stored_key_is_never_sent_to_a_url_it_was_not_entered_for(researcher_client, researcher):
    first, second = JudgeServer(api_key=KEY).start(), JudgeServer().start()
    try:
        study = study_with(researcher, ["Q0?"])
        researcher_client.post(reverse("judges", args=[study.pk]), form_data(first))
        judge = Judge.objects.get()
        assert judge.api_key == KEY and judge.api_key_url == first.base_url
        detail = reverse("judge_detail", args=[study.pk, judge.pk])
        # a changed URL without the key typed again is refused, and nothing changes
        moved = researcher_client.post(detail, form_data(first, api_key="", base_url=second.base_url))
        assert moved.status_code == 200 and "Type the key again for the new base URL" in moved.content.decode()
        judge.refresh_from_db()
        assert (judge.base_url, judge.api_key) == (first.base_url, KEY)
        # changed behind the form's back (a script): refused before anything is sent
        Judge.objects.filter(pk=judge.pk).update(base_url=second.base_url)
        judge.refresh_from_db()
        with pytest.raises(EndpointError, match="stored key was entered for .*Type the key again"):
            runner.JudgeRun(judge).do_start()
        with pytest.raises(EndpointError, match="stored key was entered for"):
            runner.JudgeRun(judge).do_run()
        assert second.requests == []
        # typed again with the new URL: it goes there, and only there
        Judge.objects.filter(pk=judge.pk).update(base_url=first.base_url)
        researcher_client.post(detail, form_data(second, api_key="sk-new-key-for-second"))
        judge.refresh_from_db()
        assert (judge.api_key, judge.api_key_url) == ("sk-new-key-for-second", second.base_url)
        assert runner.JudgeRun(judge).do_run().recorded == 2
        assert bearer_tokens(second) == {"Bearer sk-new-key-for-second"} and bearer_tokens(first) == set()
    finally:
        for s in (first, second):
            s.shutdown()
            s.server_close()


def test_a_reply_that_echoes_the_headers_shows_no_key(researcher_client, researcher, server, operator_key, settings):
    """The attack's endpoint repeated the request's headers in its reply, and the judge's page showed the reply."""
    settings.SEPLAB_JUDGE_KEY_VARIABLES = {VARIABLE: ["127.0.0.1"]}
    study = study_with(researcher, ["[[echo-headers]] Q0?", "[[extra-fields]] Q1?"])
    server.extra_bytes = 1000
    judge = make_judge(study, server, api_key_env=VARIABLE)
    assert runner.JudgeRun(judge).do_run().recorded == 4
    calls = list(JudgeCall.objects.filter(judge=judge))
    assert any("[key]" in call.reply for call in calls)  # the echo arrived, redacted
    assert all(OPERATOR_KEY not in f"{call.reply} {call.problem} {call.response}" for call in calls)
    page = researcher_client.get(reverse("judge_detail", args=[study.pk, judge.pk])).content.decode()
    assert OPERATOR_KEY not in page and "[key]" in page
    # a stored key and a generated system: the same
    system_study = inputs_study(researcher, ["[[echo-headers]] One?"], name="echo")
    endpoint = add(system_study, server, "echo", "gen-echo", api_key=KEY, samples=1)
    generating.GenerationRun(endpoint).do_run()
    call = GenerationCall.objects.get(endpoint=endpoint)
    assert KEY not in f"{call.generation.text} {call.response} {call.generation.provenance}"


ECHOED_KEY = "Zq9x-operator-7f3a1c5e9b2d4f60a8"  # its first four characters occur nowhere else


def strings(value) -> list[str]:
    """Every string of a stored value (a reply's JSON: its keys and values)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
    if isinstance(value, list | tuple):
        return [s for item in value for s in strings(item)]
    return []


def assert_no_piece_of_the_key(*values) -> None:
    """Not the key, nor any piece of four or more of its first characters, in any string or in them joined (a key
    split over log-probability tokens)."""
    found = [s for v in values for s in strings(v)]
    for text in [*found, "".join(found)]:
        assert ECHOED_KEY[:4] not in text, text[-300:]


def test_a_key_echoed_where_a_cut_splits_it_leaves_no_piece_of_it(
    researcher_client, researcher, server, monkeypatch, settings
):
    """The reply's text (cut at 100,000 characters), an error (cut at 2,000), the job's message and a generated
    system's problem were cut before the key was taken out: the cut split the key, and its first part was kept whole.
    Log-probabilities kept each token apart, so a key split over tokens was never matched."""
    monkeypatch.setenv(VARIABLE, ECHOED_KEY)
    settings.SEPLAB_JUDGE_KEY_VARIABLES = {VARIABLE: ["127.0.0.1"]}
    bearer = len("Bearer ")
    # each so that the cut lands ten characters into the key
    in_text = runner.MAX_REPLY_CHARS - bearer - 10
    in_error = ERROR_CHARS - len("InternalServerError: Error code: 500 - ") - bearer - 10
    study = study_with(
        researcher, [f"[[echo-key:200:{in_text}]] Q0?", f"[[echo-key:500:{in_error}]] Q1?", "[[echo-key:200:5]] Q2?"]
    )
    judge = make_judge(study, server, api_key_env=VARIABLE, max_retries=0, logprobs=True)
    assert runner.JudgeRun(judge).do_run().recorded == 6
    calls = list(JudgeCall.objects.filter(judge=judge).select_related("pair__item"))
    by_input = {c.pair.item.input.split()[0]: c for c in calls}
    assert by_input[f"[[echo-key:200:{in_text}]]"].reply.startswith("x" * 1000)
    assert by_input[f"[[echo-key:500:{in_error}]]"].status == "failed"
    assert by_input[f"[[echo-key:500:{in_error}]]"].problem.endswith("Bearer [key]")  # taken out, then cut
    assert by_input["[[echo-key:200:5]]"].status == "judged"
    assert_no_piece_of_the_key(*[(c.reply, c.problem, c.response) for c in calls])
    # text that ends, where it is cut, in the first part of a key (an endpoint that cut its own echo short)
    assert endpoints.cut("x" * 20 + ECHOED_KEY[:10] + "-more", 30, [ECHOED_KEY]) == "x" * 20 + "[key]"
    assert endpoints.cut("x" * 27 + ECHOED_KEY, 30, [ECHOED_KEY]) == "x" * 27 + "[ke"
    # a fatal error's words become the job's message
    in_message = ERROR_CHARS - len("BadRequestError: Error code: 400 - ") - bearer - 10
    fatal = make_judge(
        study_with(researcher, [f"[[echo-key:400:{in_message}]] Q0?"], name="fatal"),
        server,
        name="fatal",
        api_key_env=VARIABLE,
        max_retries=0,
    )
    job = runner.JudgeRun(fatal).do_start()
    with pytest.raises(Exception, match="BadRequestError") as raised:
        run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and "Bearer [key]" in job.message
    assert_no_piece_of_the_key(job.message, str(raised.value))
    for shown in (judge, fatal):
        page = researcher_client.get(reverse("judge_detail", args=[shown.study_id, shown.pk]))
        assert page.status_code == 200
        assert_no_piece_of_the_key(page.content.decode())
    # a generated system's unusable reply quotes its first 300 characters
    system_study = inputs_study(researcher, ["[[echo-key:200:283]] [[nul]] One?"], name="echo")
    endpoint = add(system_study, server, "echo", "gen-echo", api_key_env=VARIABLE, samples=1, max_retries=0)
    generating.GenerationRun(endpoint).do_run()
    call = GenerationCall.objects.get(endpoint=endpoint)
    assert call.status == "unusable" and "[key]" in call.problem
    assert_no_piece_of_the_key(call.problem, call.response, list(Generation.objects.values_list("text", flat=True)))
    page = researcher_client.get(reverse("systems", args=[system_study.pk]))
    assert_no_piece_of_the_key(page.content.decode())


# ----------------------------------------------------------------------------------------------------------
# Medium 8: internal addresses and DNS rebinding


@pytest.mark.parametrize(
    "url",
    [
        "http://100.100.100.200/latest/meta-data",  # a cloud's metadata service (shared address space)
        "http://100.64.0.1/v1",  # carrier-grade NAT
        "http://168.63.129.16/metadata",  # a cloud's host address: global, answers only inside the cloud
        "http://[2002:7f00:1::]:8765/v1",  # 6to4 of 127.0.0.1
        "http://[64:ff9b::7f00:1]:8765/v1",  # NAT64 of 127.0.0.1
        "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/v1",  # Teredo
        "http://[::ffff:10.0.0.1]/v1",  # IPv4-mapped private
        "http://192.0.0.170/v1",  # IETF protocol assignments
        "http://198.18.0.1/v1",  # benchmarking
        "http://240.0.0.1/v1",  # reserved
        "http://224.0.0.1/v1",  # multicast
        "http://[fec0::1]/v1",  # IPv6 site-local (deprecated, routed inside a site only)
        "http://[fec0::a9fe:a9fe]/v1",  # site-local, 169.254.169.254 in its last 32 bits
    ],
)
def test_addresses_that_are_not_globally_routable_are_refused_on_save_and_at_start(researcher, server, settings, url):
    settings.SEPLAB_JUDGE_PRIVATE_HOSTS = []
    study = study_with(researcher, ["Q0?"])
    with pytest.raises(EndpointError, match="otherwise internal address"):
        make_judge(study, server, base_url=url)
    judge = make_judge(study, server, base_url="http://8.8.8.8/v1")  # a global address saves
    Judge.objects.filter(pk=judge.pk).update(base_url=url)
    judge.refresh_from_db()
    with pytest.raises(EndpointError, match="otherwise internal address"):
        runner.JudgeRun(judge).do_start()
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://8.8.8.8/v1",
        "https://[2001:4860:4860::8888]/v1",
        "http://[::ffff:8.8.8.8]/v1",  # the embedded address is what counts: a public one passes
        "http://[2002:808:808::]/v1",
        "http://[64:ff9b::808:808]/v1",  # NAT64 on an IPv6-only (DNS64) network
    ],
)
def test_globally_routable_addresses_pass(settings, url):
    settings.SEPLAB_JUDGE_PRIVATE_HOSTS = []
    outbound.check_endpoint(url)


def test_dns_rebinding_cannot_reach_loopback(researcher, settings, monkeypatch):
    """A host that answers an allowed address to the check and 127.0.0.1 to the connection sent 8 of 12 requests to
    127.0.0.1. Each connection now resolves once, checks that answer and connects to it: the internal server is never
    reached, and the run stops saying why."""
    # bound first, on a free port: 127.0.0.1 is where other tests (other xdist workers) take ports
    inside = JudgeServer().start()  # 127.0.0.1: what rebinding aims at
    port = inside.server_address[1]
    outside = JudgeServer(host="127.0.0.2", port=port).start()  # stands for a public endpoint the operator allows
    try:
        settings.SEPLAB_JUDGE_PRIVATE_HOSTS = ["127.0.0.2"]
        answers = itertools.chain(["127.0.0.2"] * 3, itertools.cycle(["127.0.0.1", "127.0.0.2"]))
        asked: list[str] = []

        def rebinding(host: str, port: int) -> list[str]:
            assert host == "rebind.example"
            asked.append(next(answers))
            return [asked[-1]]

        monkeypatch.setattr(outbound, "resolve", rebinding)
        study = study_with(researcher, [f"Q{i}?" for i in range(6)])
        judge = make_judge(
            study, outside, base_url=f"http://rebind.example:{port}/v1", max_retries=2, max_concurrency=1
        )
        with pytest.raises(EndpointError, match="otherwise internal address"):
            runner.JudgeRun(judge).do_run()
        # the save, the run's check, the first connection; the second connection got 127.0.0.1 and was refused
        assert asked == ["127.0.0.2"] * 3 + ["127.0.0.1"]
        assert inside.requests == [] and len(outside.requests) == 1  # the first request, to the address checked
    finally:
        for s in (outside, inside):
            s.shutdown()
            s.server_close()


def test_a_pinned_connection_keeps_the_host_name_for_tls_and_the_host_header(tmp_path, monkeypatch):
    """Connecting to the checked address, not the name, must not cost TLS: the certificate is still verified for the
    URL's host name (sent as SNI) and the Host header is the URL's."""
    import datetime
    import http.server
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    (tmp_path / "cert.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (tmp_path / "key.pem").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    hosts: list[str] = []
    names: list[str | None] = []

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 -- the http.server API
            hosts.append(self.headers["Host"])
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args):
            pass

    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    tls.sni_callback = lambda sock, server_name, context: names.append(server_name)
    https = http.server.HTTPServer(("127.0.0.1", 0), Hello)
    https.socket = tls.wrap_socket(https.socket, server_side=True)
    threading.Thread(target=https.serve_forever, daemon=True).start()
    try:
        monkeypatch.setattr(outbound, "_ssl_context", lambda: ssl.create_default_context(cafile=tmp_path / "cert.pem"))
        monkeypatch.setattr(outbound, "resolve", lambda host, port: ["127.0.0.1"])
        port = https.server_address[1]
        with httpx2.Client(transport=outbound.EndpointTransport(), trust_env=False) as client:
            assert client.get(f"https://localhost:{port}/v1").text == "ok"
            with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED|certificate"):
                client.get(f"https://127.0.0.1:{port}/v1")  # the certificate is not for the address
        assert names == ["localhost", None] and hosts == [f"localhost:{port}"]
    finally:
        https.shutdown()
        https.server_close()


# ----------------------------------------------------------------------------------------------------------
# Medium 4: a reply's size; what is kept of it


@pytest.mark.parametrize("marker", ["[[giant]]", "[[giant-chunked]]"])
def test_a_reply_is_read_up_to_the_limit_and_the_run_goes_on(researcher, server, settings, marker):
    settings.SEPLAB_ENDPOINT_REPLY_BYTES = 1_000_000
    server.giant_bytes = 40_000_000
    judge = make_judge(study_with(researcher, [f"{marker} Q0?", "Q1?"]), server, max_retries=0)
    tracemalloc.start()
    try:
        result = runner.JudgeRun(judge).do_run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 15_000_000  # a 40 MB reply never in memory (one 1 MB limit, a few chunks)
    calls = {(c.pair.item.input, c.a_shown_first): c for c in JudgeCall.objects.filter(judge=judge)}
    giant = [c for (text, _), c in calls.items() if marker in text]
    assert result.recorded == 4 and len(giant) == 2
    assert {c.status for c in giant} == {"failed"}
    assert all("longer than 1,000,000 bytes" in c.problem and c.response is None for c in giant)
    assert {c.status for (text, _), c in calls.items() if marker not in text} == {"judged"}


@pytest.mark.slow(seconds=20)
def test_replies_small_on_the_wire_but_large_once_parsed_are_parsed_a_few_at_a_time(researcher, server):
    """1 MB of ``{},`` is 35 MB of dicts once parsed: twelve such replies at once took more than a gigabyte. A reply
    past ``LARGE_REPLY_BYTES`` is now read and parsed in one of ``LARGE_REPLIES_AT_ONCE`` slots."""
    server.many_bytes = 1_000_000
    study = study_with(researcher, [f"[[many-objects]] Q{i}?" for i in range(6)])
    # a time limit no parse comes near: every reply is read and parsed inside the run (and the measurement)
    judge = make_judge(study, server, max_retries=0, max_concurrency=12, timeout_seconds=60.0)
    tracemalloc.start()
    try:
        result = runner.JudgeRun(judge).do_run()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.abandoned == 0 and endpoint_threads(judge) == []
    assert peak < 250_000_000, peak  # four parses at a time at most (about 35 MB each), not twelve
    calls = JudgeCall.objects.filter(judge=judge)
    assert calls.count() == 12
    for call in calls:  # read and parsed whole: a completion without choices
        assert call.status == "failed" and call.problem == "The response has no choices.", call.problem


def endpoint_threads(judge) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith(f"endpoint-Judge-{judge.pk}_")]


@pytest.mark.parametrize("ended_by", ["stop", "time limit"])
def test_requests_cut_off_while_waiting_to_read_a_large_reply_leave_no_thread_behind(researcher, server, ended_by):
    """A request waiting for a slot to read a large reply (``outbound.LARGE_REPLIES_AT_ONCE``) waited on, whatever
    happened to its run: Stop, a request's time limit and a slice's end close the connection, which does not wake a
    thread waiting for a slot; its threads were still alive long after the run, and slowed the tests after it."""
    server.many_bytes = 400_000  # past LARGE_REPLY_BYTES: each reply needs a slot
    judge = make_judge(
        study_with(researcher, [f"[[many-objects]] Q{i}?" for i in range(3)]),
        server,
        max_retries=0,
        max_concurrency=6,
        timeout_seconds=1.0 if ended_by == "time limit" else 30.0,
    )
    taken = 0
    while outbound._large_replies.acquire(blocking=False):  # every slot held: as by other runs' large replies
        taken += 1
    assert taken == outbound.LARGE_REPLIES_AT_ONCE
    try:
        began = time.monotonic()
        result = runner.JudgeRun(judge).do_run(
            should_stop=lambda: ended_by == "stop" and time.monotonic() - began > 0.5
        )
        ended = time.monotonic()
        assert result.abandoned == 6 and (result.stopped if ended_by == "stop" else not result.stopped)
        assert ended - began < 3
        deadline = ended + 1
        while endpoint_threads(judge) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert endpoint_threads(judge) == []
    finally:
        for _ in range(taken):
            outbound._large_replies.release()
    assert {c.status for c in JudgeCall.objects.filter(judge=judge)} == {"failed"}


def test_only_the_fields_needed_are_kept_of_a_reply(researcher, server):
    server.extra_bytes = 2_000_000  # under the limit: read, and not kept
    judge = make_judge(study_with(researcher, ["[[extra-fields]] Q0?"]), server)
    runner.JudgeRun(judge).do_run()
    for call in JudgeCall.objects.filter(judge=judge):
        assert call.status == "judged" and set(call.response) == {
            "id",
            "model",
            "created",
            "system_fingerprint",
            "choices",
            "usage",
        }
        assert len(str(call.response)) < 2000 and call.response["choices"][0]["message"]["content"] == call.reply
    endpoint = add(inputs_study(researcher, ["[[extra-fields]] One?"], name="x"), server, "s", "gen-s", samples=1)
    generating.GenerationRun(endpoint).do_run()
    call = GenerationCall.objects.get(endpoint=endpoint)
    assert call.status == "generated" and "debug" not in call.response and len(str(call.response)) < 2000
    assert call.response["choices"][0]["message"]["content"] is None  # the text is the output's


# ----------------------------------------------------------------------------------------------------------
# Low 11: Stop on a hung run


@pytest.mark.django_db(transaction=True)
def test_stop_takes_effect_within_a_second_on_a_hung_run(transactional_db, researcher, server):
    judge = make_judge(
        study_with(researcher, ["[[hang]] Q0?", "[[hang]] Q1?"]),
        server,
        timeout_seconds=300.0,
        max_retries=0,
        max_concurrency=4,
    )
    run = runner.JudgeRun(judge)
    job = run.do_start()

    def work() -> None:
        try:
            run_job.call(job.pk)
        finally:
            connections.close_all()  # this thread's own connection: the test database can be dropped after

    worker = threading.Thread(target=work)
    worker.start()
    deadline = time.monotonic() + 10
    while server.hanging < 4 and time.monotonic() < deadline:  # every request is out and held
        time.sleep(0.05)
    assert server.hanging == 4
    pressed = time.monotonic()
    run.do_stop()
    worker.join(timeout=10)
    took = time.monotonic() - pressed
    job.refresh_from_db()
    assert not worker.is_alive() and job.status == "stopped" and took < 1.2, took
    assert set(JudgeCall.objects.filter(judge=judge).values_list("status", flat=True)) == {"failed"}
    deadline = time.monotonic() + 3
    while server.hanging and time.monotonic() < deadline:  # the held connections were closed, not left open
        time.sleep(0.05)
    assert server.hanging == 0


# ----------------------------------------------------------------------------------------------------------
# Low 12: malformed replies; an error message of megabytes


@pytest.mark.parametrize("deep", [1000, 100_000])
def test_a_malformed_reply_is_one_failed_call_not_a_failed_run(researcher, server, deep):
    server.deep = deep  # JSON nested this deep: 100,000 is deeper than the parser goes
    study = study_with(researcher, ["[[invalid-json]] Q0?", "[[empty-body]] Q1?", "[[deep-json]] Q2?", "Q3?"])
    judge = make_judge(study, server, max_retries=0)
    job = runner.JudgeRun(judge).do_start()
    run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == "done"
    calls = {(c.pair.item.input, c.a_shown_first): c for c in JudgeCall.objects.filter(judge=judge)}
    for marker in ("[[invalid-json]]", "[[empty-body]]", "[[deep-json]]"):
        bad = [c for (text, _), c in calls.items() if marker in text]
        assert len(bad) == 2 and {c.status for c in bad} == {"failed"}, marker
        assert all("could not be read" in c.problem for c in bad), [c.problem for c in bad]
    assert {c.status for (text, _), c in calls.items() if text == "Q3?"} == {"judged"}
    # the same for a generated system
    study = inputs_study(researcher, ["[[invalid-json]] One?", "Two?"], name="g")
    endpoint = add(study, server, "s", "gen-s", samples=1, max_retries=0)
    generating.GenerationRun(endpoint).do_run()
    statuses = dict(GenerationCall.objects.filter(endpoint=endpoint).values_list("item__input", "status"))
    assert statuses == {"[[invalid-json]] One?": "failed", "Two?": "generated"}


def test_an_error_message_of_megabytes_is_cut_before_it_is_kept_or_shown(researcher_client, researcher, server):
    server.huge_error_chars = 1_000_000  # a 400 (a request the endpoint refuses: the run stops) under the limit
    study = study_with(researcher, ["[[huge-error]] Q0?"])
    judge = make_judge(study, server, max_retries=0)
    job = runner.JudgeRun(judge).do_start()
    with pytest.raises(Exception, match="BadRequestError"):
        run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and len(job.message) < 2500 and "more characters" in job.message
    page = researcher_client.get(reverse("judge_detail", args=[study.pk, judge.pk]))
    assert len(page.content) < 200_000
    server.huge_error_chars = 5_000_000  # beyond the limit: not read at all, one failed call
    JudgeCall.objects.all().delete()
    runner.JudgeRun(judge).do_run()
    calls = JudgeCall.objects.filter(judge=judge)
    assert {c.status for c in calls} == {"failed"} and all(len(c.problem) < 2500 for c in calls)


# ----------------------------------------------------------------------------------------------------------
# Medium 3 (its part here): the most time one request may take is bounded where it is configured


def test_timeout_times_attempts_is_bounded_in_the_forms_and_the_command(researcher_client, researcher, server):
    study = study_with(researcher, ["Q0?"])
    refused = researcher_client.post(
        reverse("judges", args=[study.pk]), form_data(server, timeout_seconds="3600", max_retries="20")
    )
    assert refused.status_code == 200 and not Judge.objects.exists()
    assert "times the attempts (1 + 20 retries) is 75,600 s" in refused.content.decode()
    with pytest.raises(EndpointError, match="at most 300 s with all its attempts"):
        make_judge(study, server, timeout_seconds=3600.0, max_retries=20)
    systems = researcher_client.post(
        reverse("systems", args=[study.pk]),
        {**form_data(server, name="gen", model="gen-x", timeout_seconds="300", max_retries="5"), "samples": "1"},
    )
    assert "is 1,800 s" in systems.content.decode()
    with pytest.raises(CommandError, match="at most 300 s with all its attempts"):
        call_command(
            "generate",
            *("--study", study.name, "--system", "s", "--base-url", server.base_url, "--model", "gen-s"),
            *("--samples", "1", "--timeout", "600", "--retries", "2"),
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
    assert endpoints.request_limit(make_judge(study, server, timeout_seconds=60.0, max_retries=4)) == 300.0
