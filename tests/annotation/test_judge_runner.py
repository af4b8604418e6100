"""Running an LLM judge against the local OpenAI-compatible server (tests/judge_server.py), which validates
every request against the openai client's own request types and answers by a fixed rule:
P(first) = sigmoid((len(first) − len(second)) / 20 + 0.4), verdict A when P(first) > 0.5."""

from __future__ import annotations

import json

import numpy as np
import pytest

from annotation import endpoints, orientation, worker
from annotation.endpoints import EndpointError
from annotation.jobs import run_job
from annotation.judges import runner
from annotation.models import Job, Judge, JudgeCall, Judgment, Pair, TaskPair
from annotation.studies import creation, lifecycle
from tests.judge_server import p_first, server_fixture

KEY = "sk-test-0123456789abcdef"


server = server_fixture()


def study_with(researcher, inputs: list[str], name: str = "judged", **settings):
    """Two systems whose outputs differ in length from item to item (so the rule's verdicts differ)."""
    lines = []
    for i, text in enumerate(inputs):
        lines.append(
            json.dumps(
                {
                    "id": f"item-{i}",
                    "input": text,
                    "outputs": {
                        "sys-a": [f"Answer a{i}." + " more" * (i % 3)],
                        "sys-b": [f"Answer b{i}." + " more" * (2 - i % 3)],
                    },
                }
            )
        )
    study = creation.do_create_study(researcher, name, ("\n".join(lines) + "\n").encode(), "s.jsonl")
    return lifecycle.do_update_settings(
        study, {"pairs_per_assignment": 1, "judgments_per_assignment": 1, **settings}, None
    )


def make_judge(study, server, **fields) -> Judge:
    defaults = {
        "base_url": server.base_url,
        "model": "judge-model",
        "api_key_env": "",
        "max_retries": 3,
        "timeout_seconds": 5.0,
    }
    return runner.do_create_judge(study, fields.pop("name", "local-judge"), **{**defaults, **fields})


def expected_first_wins(pair: Pair, a_first: bool) -> bool:
    first, second = orientation.in_display_order(pair.generation_a.text, pair.generation_b.text, a_first)
    return p_first(first, second) > 0.5


def test_judges_every_shown_pair_in_both_orders(researcher, server):
    study = study_with(researcher, [f"Question {i}?" for i in range(6)])
    judge = make_judge(study, server, temperature=0.3, max_tokens=50)
    result = runner.JudgeRun(judge).do_run()
    shown = set(TaskPair.objects.filter(task__study=study).values_list("pair_id", flat=True))
    assert len(shown) == 6 and result.recorded == 12 and not server.invalid
    judgments = Judgment.objects.filter(rater=judge.rater).select_related("pair__generation_a", "pair__generation_b")
    assert sorted((j.pair_id, j.a_shown_first) for j in judgments) == sorted(
        (p, o) for p in shown for o in (True, False)
    )
    for j in judgments:  # the rule's verdict, stored in model coordinates
        first_wins = expected_first_wins(j.pair, j.a_shown_first)
        assert j.choice == orientation.to_model("first" if first_wins else "second", j.a_shown_first)
        assert j.probability_a is None  # no log-probabilities asked for
    body = server.requests[0]
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("judge-model", 0.3, 50)
    assert "logprobs" not in body
    used = runner.JudgeRun(judge).usage()
    assert used.done == 12 and used.prompt_tokens == sum(
        len(b["messages"][0]["content"].split()) for b in server.requests
    )
    assert judge.rater.kind == "judge" and judge.rater.source == "run"


def test_logprobs_give_probability_a(researcher, server):
    study = study_with(researcher, ["Q0?", "Q1?", "Q2?", "[[malformed]] Q3?"])
    judge = make_judge(study, server, logprobs=True)
    runner.JudgeRun(judge).do_run()
    assert server.requests[0]["logprobs"] is True and server.requests[0]["top_logprobs"] == 5
    assert runner.JudgeRun(judge).usage().unusable == 2 and not server.statuses[500]  # a reply, not a crash
    judgments = Judgment.objects.filter(rater=judge.rater).select_related("pair__generation_a", "pair__generation_b")
    assert judgments.count() == 6
    for j in judgments:  # P(A) = P(first) of the rule (A: 0.98 p, B: 0.98 (1 - p)), flipped when B was first
        first, second = orientation.in_display_order(
            j.pair.generation_a.text, j.pair.generation_b.text, j.a_shown_first
        )
        assert j.probability_a == pytest.approx(orientation.probability_first(p_first(first, second), j.a_shown_first))


def test_faults_retried_counted_and_shown(researcher, server):
    inputs = [
        "[[rate-limit]] Q0?",
        "[[server-error]] Q1?",
        "[[malformed]] Q2?",
        "[[slow]] Q3?",
        "[[always-429]] Q4?",
        "Q5?",
    ]
    study = study_with(researcher, inputs)
    # the slow first reply outlasts the timeout by far; every other reply is well inside it, however busy the
    # machine running the suite is
    server.slow_seconds = 6.0
    judge = make_judge(study, server, timeout_seconds=2.0, max_retries=2)
    result = runner.JudgeRun(judge).do_run()
    assert result.recorded == 12 and not server.invalid
    calls = {
        (c.pair.item.input.split()[0], c.a_shown_first): c
        for c in JudgeCall.objects.filter(judge=judge).select_related("pair__item")
    }
    status = {key: c.status for key, c in calls.items()}
    for marker in ("[[rate-limit]]", "[[server-error]]", "[[slow]]"):  # mended by the client's retries
        assert status[(marker, True)] == status[(marker, False)] == "judged"
    assert status[("[[malformed]]", True)] == "unparseable"
    assert "last line is not a 'Verdict:' line" in calls[("[[malformed]]", True)].problem
    assert calls[("[[malformed]]", True)].reply.startswith("Both outputs have merits")
    assert status[("[[always-429]]", True)] == "failed" and "RateLimitError" in calls[("[[always-429]]", True)].problem
    assert server.statuses[429] >= 2 * 2 + 2 * 3  # two per rate-limited prompt, three tries per always-429 prompt
    used = runner.JudgeRun(judge).usage()
    assert (used.done, used.unusable, used.failed, used.replies) == (8, 2, 2, 10)
    assert Judgment.objects.filter(rater=judge.rater).count() == 8  # an unparseable reply is never a judgment
    # resuming asks only for the failed calls again (still 429: they stay failed, nothing else is touched)
    before = len(server.requests)
    assert [(p.item.input.split()[0], o) for p, o in runner.JudgeRun(judge).do_prepare_pending()] == [
        ("[[always-429]]", True),
        ("[[always-429]]", False),
    ]
    runner.JudgeRun(judge).do_run()
    assert len(server.requests) - before == 2 * 3
    assert JudgeCall.objects.filter(judge=judge).count() == 12


def test_budget_and_concurrency(researcher, server):
    study = study_with(researcher, [f"Q{i}?" for i in range(8)])
    server.delay = 0.5  # long enough that three requests overlap even on a loaded machine (0.1 s: 2 in CI once)
    judge = make_judge(study, server, max_concurrency=3, request_budget=9)
    result = runner.JudgeRun(judge).do_run()
    assert result.budget_reached and result.recorded == 9 and len(server.requests) == 9
    assert server.max_in_flight == 3
    with pytest.raises(EndpointError, match="budget"):
        runner.JudgeRun(judge).do_start()


def test_crash_and_stop_resume_without_judging_twice(researcher, server):
    study = study_with(researcher, [f"Q{i}?" for i in range(8)])
    judge = make_judge(study, server, max_concurrency=2)
    answered = []

    def crash(done, total):
        answered.append(done)
        if done >= 5:  # two replies can land in one tick
            raise RuntimeError("worker killed")

    with pytest.raises(RuntimeError):
        runner.JudgeRun(judge).do_run(progress=crash)
    assert JudgeCall.objects.filter(judge=judge).count() == answered[-1] in (5, 6)  # every reply recorded
    result = runner.JudgeRun(judge).do_run(should_stop=lambda: True)  # stop after the first reply
    assert result.stopped and 1 <= result.recorded <= 2
    runner.JudgeRun(judge).do_run()
    keys = list(Judgment.objects.filter(rater=judge.rater).values_list("pair_id", "a_shown_first"))
    assert len(keys) == 16 == len(set(keys))
    assert len(server.requests) <= 16 + 2  # at most the requests in flight at the crash were asked again
    assert runner.JudgeRun(judge).do_prepare_pending() == []
    # a reply recorded twice (two runs racing) is stored once
    call = JudgeCall.objects.filter(judge=judge).first()
    request = runner.Request(call.pair_id, call.a_shown_first, "p")
    assert runner.JudgeRun(judge).do_record(runner.Reply(request, text="Verdict: A")) is None


def test_all_pairs_scope_creates_first_sample_pairs(researcher, server):
    study = study_with(researcher, [f"Q{i}?" for i in range(3)])
    judge = make_judge(study, server, scope=Judge.Scope.ALL)
    before = Pair.objects.count()
    assert runner.JudgeRun(judge).remaining() == 6 and Pair.objects.count() == before  # the pages only read
    pairs = {p for p, _ in runner.JudgeRun(judge).do_prepare_pending()}
    assert len(pairs) == 3 and all(p.generation_a.sample_index == p.generation_b.sample_index == 0 for p in pairs)
    assert {p.generation_a.system.name for p in pairs} == {"sys-a"}


def test_a_live_run_is_not_started_twice_and_a_dead_one_is_resumed(researcher, server):
    from django.utils import timezone

    judge = make_judge(study_with(researcher, ["Q0?", "Q1?"]), server)
    job = runner.JudgeRun(judge).do_start()
    with pytest.raises(EndpointError, match="already running"):
        runner.JudgeRun(judge).do_start()
    Job.objects.filter(pk=job.pk).update(status="running", heartbeat=timezone.now() - worker.stale_after() * 2)
    again = runner.JudgeRun(judge).do_start()
    job.refresh_from_db()
    assert again.pk != job.pk and job.status == "failed" and "resumed" in job.message


def test_a_run_judge_is_in_the_report_with_its_debiasing_threshold(researcher, server):
    """Both orders and P(A): the report's positional bias and debiasing (docs/comparative-assessment.md#debiasing)
    read the run judge like an imported one; the threshold is the median P(first) over the symmetric set."""
    import numpy as np

    from analytics.populations import Population
    from analytics.report.assembly import study_report

    study = study_with(researcher, [f"Q{i}?" for i in range(6)])
    judge = make_judge(study, server, logprobs=True)
    runner.JudgeRun(judge).do_run()
    p = []
    for pair in Pair.objects.filter(pk__in=TaskPair.objects.filter(task__study=study).values("pair_id")):
        for a_first in (True, False):
            first, second = orientation.in_display_order(pair.generation_a.text, pair.generation_b.text, a_first)
            p.append(p_first(first, second))
    report = study_report(study, Population(kind="judge", judge="local-judge"))
    debiasing = report.positional_bias.debiasing["local-judge"]
    assert debiasing.threshold_all == pytest.approx(float(np.median(p)))
    bias = report.positional_bias.populations["judge"]
    assert bias.n == 12 and bias.first_chosen == sum(x > 0.5 for x in p)


def test_the_heartbeat_ticks_while_slow_requests_are_out(researcher, server, monkeypatch):
    """A run whose requests are slow still reports every TICK (the job's heartbeat), so it is not taken for a
    dead worker and resumed twice; a stop asked meanwhile sends no new request and cuts off the one out (recorded
    as failed, asked again on resume)."""
    monkeypatch.setattr(endpoints, "TICK", 0.1)
    monkeypatch.setattr(endpoints, "STOP_TICK", 0.1)
    server.delay = 0.6
    judge = make_judge(study_with(researcher, ["Q0?", "Q1?"]), server, max_concurrency=1)
    calls = []
    result = runner.JudgeRun(judge).do_run(
        progress=lambda done, total: calls.append(done), should_stop=lambda: len(calls) >= 3
    )
    assert calls[:3] == [0, 0, 0]  # the start, then ticks before the first reply
    assert result.stopped and result.asked == 1 and result.recorded == 1 and len(server.requests) == 1
    assert list(JudgeCall.objects.filter(judge=judge).values_list("status", flat=True)) == ["failed"]


def test_create_judge_validates_every_caller(researcher, server):
    study = study_with(researcher, ["Q0?"])
    with pytest.raises(EndpointError, match="temperature: .*2.0"):
        make_judge(study, server, temperature=5)
    assert not study.raters.exists()  # nothing half-made
    judge = make_judge(study, server, price_input=2.5, price_output=10)  # floats, as a script passes them
    assert runner.JudgeRun(judge).usage().cost == 0


def test_a_judge_run_over_every_item_feeds_the_judge_disagreement_selection(researcher, server):
    """The whole path a researcher takes: run a judge over every item, then choose the selection method that sends
    people where the judges disagree; the plan draws from the run's verdicts and states each item's chance. One judge
    in both orders gives two verdicts an item, too few for the disagreement to pay (docs/human-and-judge.md): every
    item then gets the same chance, and the run says why."""
    from selection.core.sampling import disagreement_inclusion, too_few_verdicts
    from selection.models import SelectionRun
    from selection.services import judge_scores

    study = study_with(researcher, [f"Question {i}?" for i in range(12)], name="judged-all")
    judge = make_judge(study, server, scope=Judge.Scope.ALL)
    assert runner.JudgeRun(judge).do_run().recorded == 24 and not server.invalid
    study = lifecycle.do_update_settings(study, {"selection_method": "judge-disagreement", "budget": 4}, None)
    run = SelectionRun.objects.filter(study=study).latest("id")
    assert run.method == "judge-disagreement" and len(run.items) == 4 == study.tasks.count()
    comparison = study.comparisons.select_related("system_a", "system_b").get()
    items = list(study.items.order_by("position"))
    scores = judge_scores(comparison, items)
    assert scores.shape == (12, 2) and not np.isnan(scores).any()  # one verdict per order on every item
    pi = dict(zip([i.external_id for i in items], disagreement_inclusion(scores, 4), strict=True))
    assert run.details["inclusion"] == pytest.approx([pi[i] for i in run.items])
    assert too_few_verdicts(scores) and run.details["inclusion"] == pytest.approx([4 / 12] * 4)
    assert run.details.get("uniform_because")


def test_replies_the_judge_did_not_finish_or_that_say_two_things_are_unparseable(researcher, server):
    """A reply cut off at the token limit whose last line happens to be a quoted verdict, two verdict
    lines, a verdict after a U+2028 (not a new line), and a 2 MB reply are unparseable, counted and shown, never a
    verdict; a 2 MB reply is kept once, cut to 100,000 characters."""
    inputs = ["[[cut]] Q0?", "[[two-verdicts]] Q1?", "[[line-separator]] Q2?", "[[huge]] Q3?", "Q4?"]
    judge = make_judge(study_with(researcher, inputs), server)
    runner.JudgeRun(judge).do_run()
    calls = {c.pair.item.input: c for c in JudgeCall.objects.filter(judge=judge).select_related("pair__item")}
    expected = {
        "[[cut]] Q0?": "cut off at the token limit",
        "[[two-verdicts]] Q1?": "more than one 'Verdict:' line",
        "[[line-separator]] Q2?": "last line is not a 'Verdict:' line",
        "[[huge]] Q3?": "2,000,0",
    }
    for text, words in expected.items():
        call = calls[text]
        assert call.status == "unparseable" and words in call.problem and call.judgment is None, text
    huge = calls["[[huge]] Q3?"]
    assert len(huge.reply) == runner.MAX_REPLY_CHARS
    assert len(huge.response["choices"][0]["message"]["content"]) == runner.MAX_REPLY_CHARS
    assert calls["Q4?"].status == "judged" and not server.invalid
    assert Judgment.objects.filter(rater=judge.rater).count() == 2  # Q4 in both orders, nothing else


def test_a_reply_with_a_character_no_database_stores_is_kept_readable_and_unparseable(researcher, server):
    """An endpoint's reply is untrusted: a NUL (PostgreSQL refuses it in text and in JSON) once made the whole run
    fail; the reply is now kept with it replaced by U+FFFD, in the call and in the response, and is no verdict."""
    judge = make_judge(study_with(researcher, ["[[nul]] Q0?", "Q1?"]), server)
    result = runner.JudgeRun(judge).do_run()
    assert result.recorded == 4
    calls = {c.pair.item.input: c for c in JudgeCall.objects.filter(judge=judge).select_related("pair__item")}
    nul = calls["[[nul]] Q0?"]
    assert nul.status == "unparseable" and "NUL" in nul.problem and nul.judgment is None
    assert nul.reply.startswith("A is better.\ufffd\n") and "\x00" not in json.dumps(nul.response)
    assert "\ufffd" in nul.response["choices"][0]["message"]["content"]
    assert calls["Q1?"].status == "judged"


def test_token_counts_an_endpoint_gets_wrong_do_not_drop_a_paid_reply(researcher, server):
    """completion_tokens -5 once failed the database's check, which record() took for "another run got there
    first": the paid reply was dropped and the budget never filled. Counts outside 0 .. 2^31 - 1 now count as 0,
    with a note kept in the response."""
    judge = make_judge(study_with(researcher, ["[[bad-usage]] Q0?", "[[huge-usage]] Q1?"]), server, request_budget=4)
    result = runner.JudgeRun(judge).do_run()
    calls = list(JudgeCall.objects.filter(judge=judge).select_related("pair__item"))
    assert result.recorded == 4 and len(calls) == 4 and {c.status for c in calls} == {"judged"}
    for call in calls:
        assert call.prompt_tokens >= 0 and 0 <= call.completion_tokens < 2**31
        assert call.response["seplab_notes"] and "counted as 0" in call.response["seplab_notes"][0]
    assert runner.JudgeRun(judge).usage().replies == 4  # the budget is used up: a fifth request would be refused


def test_a_request_that_never_ends_is_cut_off_at_its_total_time_limit(researcher, server):
    """An endpoint answering 200 and then one byte every 0.3 s once held the only worker for ever (the
    timeout is per read). Each request now has a total limit (timeout x attempts): it is cut off, recorded as failed
    (asked again on resume), and the run goes on with the other pairs."""
    import time

    judge = make_judge(
        study_with(researcher, ["[[trickle]] Q0?", "Q1?"]),
        server,
        timeout_seconds=1.0,
        max_retries=0,
        max_concurrency=2,
    )
    assert endpoints.request_limit(judge) == 1.0
    started = time.monotonic()
    result = runner.JudgeRun(judge).do_run()
    assert time.monotonic() - started < 10  # the reply would take ~16 s to trickle in
    calls = {c.pair.item.input: c for c in JudgeCall.objects.filter(judge=judge).select_related("pair__item")}
    assert result.abandoned == 2 and {c.status for i, c in calls.items() if "trickle" in i} == {"failed"}
    assert all("took longer than 1 s" in c.problem for i, c in calls.items() if "trickle" in i)
    assert Judgment.objects.filter(rater=judge.rater).count() == 2  # Q1 in both orders


def test_stop_cuts_off_the_requests_in_flight_at_once(researcher, server, monkeypatch):
    """Stop was ignored for minutes while slow requests were out: now the requests in flight are cut off (their
    connections closed) at the run's next look at Stop (every ``STOP_TICK``, half a second) and asked again on
    resume."""
    import time

    judge = make_judge(study_with(researcher, ["[[trickle]] Q0?"]), server, timeout_seconds=60.0, max_retries=0)
    started = time.monotonic()
    result = runner.JudgeRun(judge).do_run(should_stop=lambda: time.monotonic() - started > 0.5)
    # stopped at the first look after the stop (a second's slack for a loaded machine), not when the replies end
    assert result.stopped and time.monotonic() - started < 0.5 + endpoints.STOP_TICK + 1.0
    assert set(JudgeCall.objects.filter(judge=judge).values_list("status", flat=True)) == {"failed"}
    deadline = time.monotonic() + 5
    while server.hung_up < 2 and time.monotonic() < deadline:  # the server sees both connections close
        time.sleep(0.1)
    assert server.hung_up == 2


def test_a_long_run_gives_the_worker_back_and_goes_on_in_a_job_queued_behind_the_others(researcher, server, settings):
    """One judge must not hold the worker while other researchers' jobs wait: after its time slice a run stops
    sending, records what was out as failed, and queues its continuation behind the jobs already waiting."""
    settings.SEPLAB_JUDGE_SLICE_SECONDS = 0.0
    server.delay = 0.2
    judge = make_judge(study_with(researcher, [f"Q{i}?" for i in range(4)]), server, max_concurrency=1)
    job = runner.JudgeRun(judge).do_start()
    run_job.call(job.pk)
    job.refresh_from_db()
    assert job.status == "done" and "Paused after 0 s so that other jobs can run" in job.message
    follow = runner.JudgeRun(judge).current_job()
    assert follow.pk != job.pk and follow.status == "queued"
    settings.SEPLAB_JUDGE_SLICE_SECONDS = 300.0
    run_job.call(follow.pk)
    follow.refresh_from_db()
    assert follow.status == "done" and Judgment.objects.filter(rater=judge.rater).count() == 8


def test_untrusted_error_words_and_malformed_replies_do_not_end_the_run(researcher, server):
    """An error message holding a NUL (PostgreSQL refuses it) and a 200 reply that is no chat completion are kept as
    a failed call and an unparseable one; the other pairs are judged."""
    judge = make_judge(
        study_with(researcher, ["[[nul-error]] Q0?", "[[malformed-shape]] Q1?", "Q2?"]), server, max_retries=0
    )
    runner.JudgeRun(judge).do_run()
    calls = {}
    for call in JudgeCall.objects.filter(judge=judge).select_related("pair__item"):
        calls.setdefault(call.pair.item.input, set()).add((call.status, call.problem.split(" (")[0]))
    assert {status for status, _ in calls["[[nul-error]] Q0?"]} == {"failed"}
    assert any("bad\ufffdgateway" in problem for _, problem in calls["[[nul-error]] Q0?"])
    assert calls["[[malformed-shape]] Q1?"] == {("unparseable", "The endpoint's response is malformed")}
    assert {status for status, _ in calls["Q2?"]} == {"judged"}
