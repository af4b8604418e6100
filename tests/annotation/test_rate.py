"""The rater's side over HTTP: links, assignments, exactly-once submits, htmx and no-JS flows."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.elicitation import Answer
from annotation.errors import ServiceError
from annotation.models import Assignment, AssignmentPair, Judgment, Rater
from annotation.rating import allocation, recording
from annotation.studies import creation, enrolment, lifecycle, monitoring
from tests.conftest import found, study_jsonl


def start(client, rater) -> Assignment:
    response = client.post(reverse("rater_start", args=[rater.token()]))
    assert response.status_code == 302
    return Assignment.objects.get(pk=int(response["Location"].rstrip("/").split("/")[-1]))


def form_of(content: bytes) -> dict[str, str]:
    html = content.decode()
    return {name: found(rf'name="{name}" value="([^"]*)"', html).group(1) for name in ("pair", "key")}


def rate_url(rater, assignment, submit=False):
    return reverse("rate_submit" if submit else "rate", args=[rater.token(), assignment.pk])


def test_a_forged_or_revoked_link_is_404(client, rater):
    assert client.get(reverse("rater_home", args=["bogus:token"])).status_code == 404
    token = rater.token()
    rater.token_nonce = "revoked"
    rater.save()
    assert client.get(reverse("rater_home", args=[token])).status_code == 404


def test_the_rater_home_shows_instructions_and_shortcuts(client, rater):
    response = client.get(reverse("rater_home", args=[rater.token()]))
    assert response.status_code == 200
    assert rater.study.instructions.encode() in response.content and b"<kbd>Enter</kbd>" in response.content


def test_a_rater_judges_a_pair_without_javascript(client, rater):
    assignment = start(client, rater)
    page = client.get(rate_url(rater, assignment))
    assert b"Pair 1 of 5" in page.content and b"Input text number" in page.content
    assert b"about 2 min left" in page.content  # 5 pairs at the default 30 s, before the study has timings
    response = client.post(rate_url(rater, assignment, True), {**form_of(page.content), "choice": "first"})
    assert response.status_code == 302 and response["Location"] == rate_url(rater, assignment)
    assert b"Pair 2 of 5" in client.get(rate_url(rater, assignment)).content
    assert Judgment.objects.count() == 1


def test_htmx_submits_swap_in_the_next_pair(client, rater):
    assignment = start(client, rater)
    page = client.get(rate_url(rater, assignment))
    response = client.post(
        rate_url(rater, assignment, True), {**form_of(page.content), "choice": "second"}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200 and "HX-Trigger" not in response  # no event nobody listens to
    assert b"<html" not in response.content and b'id="rating"' in response.content
    assert b"Pair 2 of 5" in response.content


def test_a_double_submit_records_one_judgment(client, rater):
    assignment = start(client, rater)
    fields = {**form_of(client.get(rate_url(rater, assignment)).content), "choice": "first"}
    client.post(rate_url(rater, assignment, True), fields)
    client.post(rate_url(rater, assignment, True), fields, HTTP_HX_REQUEST="true")
    assert Judgment.objects.count() == 1


def test_a_resubmit_from_the_back_button_with_a_new_key_is_not_counted(client, rater):
    assignment = start(client, rater)
    fields = form_of(client.get(rate_url(rater, assignment)).content)
    client.post(rate_url(rater, assignment, True), {**fields, "choice": "first"})
    client.post(rate_url(rater, assignment, True), {**fields, "key": "another-key", "choice": "second"})
    [judgment] = Judgment.objects.all()
    assert judgment.idempotency_key == fields["key"]


def test_a_missing_choice_is_explained(client, rater):
    assignment = start(client, rater)
    fields = form_of(client.get(rate_url(rater, assignment)).content)
    htmx = client.post(rate_url(rater, assignment, True), fields, HTTP_HX_REQUEST="true")
    assert htmx.status_code == 200 and b"Choose one of the options before submitting." in htmx.content
    plain = client.post(rate_url(rater, assignment, True), fields)
    assert plain.status_code == 400 and b"Pair 1 of 5" in plain.content
    assert not Judgment.objects.exists()


def test_the_assignment_ends_with_a_completion_code_and_more_work(client, rater):
    assignment = start(client, rater)
    for _ in range(5):
        fields = form_of(client.get(rate_url(rater, assignment)).content)
        client.post(rate_url(rater, assignment, True), {**fields, "choice": "tie"})
    assignment.refresh_from_db()
    page = client.get(rate_url(rater, assignment))
    assert assignment.status == "completed"
    assert b"Assignment complete" in page.content and assignment.completion_code.encode() in page.content
    following = start(client, rater)
    assert following.pk != assignment.pk
    assert not set(following.places.values_list("item_id", flat=True)) & set(
        assignment.places.values_list("item_id", flat=True)
    )


def test_a_rater_with_nothing_left_is_thanked(client, study):
    lifecycle.do_update_settings(study, {"budget": 1}, None)
    rater = enrolment.do_create_rater_link(study, "solo")
    assignment = start(client, rater)
    for pair in assignment.pairs.all():
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(pair, idempotency_key=f"k{pair.pk}", answer=Answer(choice="first"))
    response = client.post(reverse("rater_start", args=[rater.token()]))
    assert response.status_code == 200 and b"Nothing left to rate" in response.content


def test_a_rater_cannot_see_or_submit_another_raters_assignment(client, study, rater):
    other = enrolment.do_create_rater_link(study, "other")
    theirs = allocation.do_start_assignment(other)
    assert client.get(reverse("rate", args=[rater.token(), theirs.pk])).status_code == 404
    their_pair = theirs.pairs.first()
    response = client.post(
        reverse("rate_submit", args=[rater.token(), theirs.pk]), {"pair": their_pair.pk, "key": "k", "choice": "first"}
    )
    assert response.status_code == 404
    mine = start(client, rater)
    response = client.post(rate_url(rater, mine, True), {"pair": their_pair.pk, "key": "k", "choice": "first"})
    assert response.status_code == 400 and b"not part of your assignment" in response.content
    assert not Judgment.objects.exists()


def test_a_revoked_link_can_neither_show_nor_submit_its_own_pairs(client, rater):
    assignment = start(client, rater)
    token = rater.token()
    fields = {**form_of(client.get(rate_url(rater, assignment)).content), "choice": "first"}
    rater.token_nonce = "revoked"
    rater.save()
    assert client.get(reverse("rate", args=[token, assignment.pk])).status_code == 404
    assert client.post(reverse("rate_submit", args=[token, assignment.pk]), fields).status_code == 404
    assert client.post(reverse("rate_submit", args=[token, assignment.pk]), {"pair": "x"}).status_code == 404
    assert not Judgment.objects.exists()


def test_a_rater_cannot_open_researcher_pages(client, study, rater):
    start(client, rater)
    for url in (study.get_absolute_url(), reverse("study_list"), reverse("judgments_export", args=[study.pk, "csv"])):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_outputs_are_escaped_and_keep_their_whitespace(client, researcher):
    line = {
        "id": "x",
        "input": "Input",
        "outputs": {"a": ["<script>alert(1)</script>\n\n  second line"], "b": ["<img src=x onerror=alert(2)>"]},
    }
    study = creation.do_create_study(researcher, "xss", (json.dumps(line) + "\n").encode(), "x.jsonl")
    rater = enrolment.do_create_rater_link(study, "r")
    assignment = start(client, rater)
    content = client.get(rate_url(rater, assignment)).content
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;\n\n  second line" in content
    assert b"&lt;img src=x onerror=alert(2)&gt;" in content
    assert b"<script>alert(1)" not in content and b"<img src=x" not in content


def test_the_rating_page_runs_a_fixed_number_of_queries(client, rater, django_assert_num_queries):
    assignment = start(client, rater)
    # The hot path under load: the pairs with outputs and answers, each with the assignment, its rater and
    # study, in one query; the first view of a pair also records when it was shown.
    with django_assert_num_queries(2):
        first = client.get(rate_url(rater, assignment))
    with django_assert_num_queries(1):
        again = client.get(rate_url(rater, assignment))
    assert first.content.count(b'name="pair"') == again.content.count(b'name="pair"') == 1
    assert AssignmentPair.objects.filter(assignment=assignment, shown_at__isnull=False).count() == 1


def statements(captured) -> list[str]:
    """The SQL a request ran, without the test's transaction control (SAVEPOINT / RELEASE: BEGIN / COMMIT in
    production, which Django does not log), as "VERB table" per statement."""
    out = []
    for query in captured:
        sql = query["sql"].strip()
        verb = sql.split()[0].upper()
        if verb in ("SAVEPOINT", "RELEASE"):
            continue
        table = found(r'(?:FROM|UPDATE|INTO)\s+"?(\w+)"?', sql, re.IGNORECASE).group(1)
        out.append(f"{verb} {table}")
    return out


def test_a_submit_runs_a_fixed_number_of_queries(client, rater):
    assignment = start(client, rater)
    fields = form_of(client.get(rate_url(rater, assignment)).content)
    # The assignment's pairs with any earlier answers, its rater and study in one query; then, in one
    # transaction, the answer's count on the assignment (touch, lock, complete), whether the place was skipped
    # meanwhile (read under that lock: a skip from another tab commits first or waits) and the insert.
    with CaptureQueriesContext(connection) as captured:
        response = client.post(rate_url(rater, assignment, submit=True), {**fields, "choice": "first"})
    assert response.status_code == 302
    assert statements(captured) == [
        "SELECT annotation_assignmentpair",
        "UPDATE annotation_assignment",
        "SELECT annotation_skip",
        "INSERT annotation_judgment",
    ]
    assert Judgment.objects.filter(assignment=assignment, idempotency_key=fields["key"]).count() == 1


def test_an_htmx_submit_records_and_returns_the_next_pair_in_a_fixed_number_of_queries(client, rater):
    # The path every browser with JavaScript takes: four statements besides the insert -- the one read, the
    # answer's count on the assignment, the skip check under its lock, and the next pair's first view (its
    # shown_at). The next pair comes from the rows read before the answer. It was ten: the assignment was refreshed
    # and its study loaded lazily before the pairs were read again, and touching and completing were two statements.
    assignment = start(client, rater)
    fields = form_of(client.get(rate_url(rater, assignment)).content)
    with CaptureQueriesContext(connection) as captured:
        response = client.post(
            rate_url(rater, assignment, submit=True), {**fields, "choice": "first"}, HTTP_HX_REQUEST="true"
        )
    assert response.status_code == 200 and b"<html" not in response.content
    assert b"Pair 2 of 5" in response.content
    assert statements(captured) == [
        "SELECT annotation_assignmentpair",
        "UPDATE annotation_assignment",
        "SELECT annotation_skip",
        "INSERT annotation_judgment",
        "UPDATE annotation_assignmentpair",
    ]
    assert Judgment.objects.filter(assignment=assignment, idempotency_key=fields["key"]).count() == 1
    assert AssignmentPair.objects.get(assignment=assignment, position=1).shown_at is not None


def test_the_open_link_makes_one_anonymous_rater_per_browser(client, study):
    study.open_link_enabled = True
    study.save()
    url = study.open_link_path()
    assert b"Join and start" in client.get(url).content
    response = client.post(url)
    rater = Rater.objects.get(study=study, source="open_link")
    # joining shows the instructions once: the POST goes straight to the first pair, not a second welcome
    assignment = Assignment.objects.get(rater=rater)
    assert response["Location"] == rate_url(rater, assignment)
    assert client.get(url)["Location"] == rater.link_path()  # same browser, same rater
    assert Rater.objects.filter(source="open_link").count() == 1


def test_a_closed_open_link_is_404(client, study):
    assert client.get(study.open_link_path()).status_code == 404
    study.open_link_enabled = True
    study.save()
    old = study.open_link_path()
    study.open_link_nonce = "rotated"
    study.save()
    assert client.get(old).status_code == 404


@pytest.mark.parametrize("mode", ["response_set", "paired"])
def test_response_sets_are_collected_through_the_form(client, study, rater, mode):
    lifecycle.do_update_settings(study, {"elicitation": mode}, None)
    assignment = start(client, rater)
    page = client.get(rate_url(rater, assignment))
    assert b'name="response" value="first"' in page.content
    data = {**form_of(page.content), "response": ["first", "second"]}
    if mode == "paired":
        data["choice"] = "first"
    client.post(rate_url(rater, assignment, True), data)
    assert Judgment.objects.get().response_set == ["a", "b"]


def test_a_database_hiccup_asks_for_a_retry_and_the_retry_counts_once(client, rater, monkeypatch):
    from django.db import OperationalError

    assignment = start(client, rater)
    fields = {**form_of(client.get(rate_url(rater, assignment)).content), "choice": "second"}
    real = recording.do_record_judgment
    calls = []

    def flaky(*args, **kwargs):
        calls.append(kwargs["idempotency_key"])
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args, **kwargs)

    monkeypatch.setattr(recording, "do_record_judgment", flaky)
    failed = client.post(rate_url(rater, assignment, True), fields, HTTP_HX_REQUEST="true")
    assert failed.status_code == 503 and failed["Retry-After"] == "2"
    assert b"could not be saved just now" in failed.content
    assert form_of(failed.content)["key"] == fields["key"]  # the retry carries the same key
    assert 'name="choice" value="second" data-key="2" data-alt-key="ArrowRight" required checked>' in (
        failed.content.decode()
    )  # and the same answer, shown again
    assert not Judgment.objects.exists()
    client.post(rate_url(rater, assignment, True), fields, HTTP_HX_REQUEST="true")
    client.post(rate_url(rater, assignment, True), fields, HTTP_HX_REQUEST="true")  # and a double retry
    assert calls == [fields["key"]] * 3 and Judgment.objects.count() == 1


def test_an_optional_comment_is_stored_with_the_judgment_and_exported(client, study, rater, researcher_client):
    lifecycle.do_update_settings(study, {"allow_comment": True}, None)
    assignment = start(client, rater)
    page = client.get(rate_url(rater, assignment)).content
    assert b'<textarea name="comment" id="id_comment"' in page
    client.post(
        rate_url(rater, assignment, True),
        {**form_of(page), "choice": "first", "comment": "  Output 2 invents a citation.  "},
    )
    page = client.get(rate_url(rater, assignment)).content
    client.post(rate_url(rater, assignment, True), {**form_of(page), "choice": "second"})  # none: fine
    too_long = client.post(
        rate_url(rater, assignment, True),
        {**form_of(client.get(rate_url(rater, assignment)).content), "choice": "tie", "comment": "x" * 2001},
    )
    assert too_long.status_code == 400 and Judgment.objects.count() == 2
    assert list(Judgment.objects.order_by("id").values_list("comment", flat=True)) == [
        "Output 2 invents a citation.",
        "",
    ]
    lines = [
        json.loads(x)
        for x in researcher_client.get(reverse("judgments_export", args=[study.pk, "jsonl"]))
        .getvalue()
        .decode()
        .splitlines()
    ]
    assert [x["comment"] for x in lines] == ["Output 2 invents a citation.", None]


def test_the_previous_answer_can_be_revised_once_per_submit_and_the_old_one_is_kept(
    client, study, rater, researcher_client
):
    assignment = start(client, rater)
    first = client.get(rate_url(rater, assignment)).content
    response = client.post(
        rate_url(rater, assignment, True), {**form_of(first), "choice": "first"}, HTTP_HX_REQUEST="true"
    )
    page = response.content.decode()
    assert "Pair 2 of 5" in page and 'data-testid="revise-link"' in page
    pair_1 = AssignmentPair.objects.get(assignment=assignment, position=0)
    revising = client.get(rate_url(rater, assignment), {"revise": pair_1.pk}).content
    assert b'data-testid="revising"' in revising and b"Pair 1 of 5" in revising
    fields = {**form_of(revising), "choice": "second", "revise": "1"}
    assert fields["pair"] == str(pair_1.pk)
    again = client.post(rate_url(rater, assignment, True), fields, HTTP_HX_REQUEST="true")
    client.post(rate_url(rater, assignment, True), fields, HTTP_HX_REQUEST="true")  # a double submit
    assert b"Pair 2 of 5" in again.content
    old, new = Judgment.objects.order_by("id")
    assert (old.revised, old.assignment_pair_id, new.revised, new.assignment_pair_id) == (True, None, False, pair_1.pk)
    assert {old.choice, new.choice} == {"a", "b"} and Assignment.objects.get(pk=assignment.pk).answered == 1
    from analytics.report.data import load_rows

    assert [r.choice for r in load_rows(study)] == [new.choice]  # the replaced one is not analysed
    lines = [
        json.loads(x)
        for x in researcher_client.get(reverse("judgments_export", args=[study.pk, "jsonl"]))
        .getvalue()
        .decode()
        .splitlines()
    ]
    assert [x["revised"] for x in lines] == [True, False]


def test_a_finished_assignment_cannot_be_revised(study, rater):
    assignment = allocation.do_start_assignment(rater)
    pairs = list(assignment.pairs.order_by("position"))
    for n, pair in enumerate(pairs):
        allocation.do_mark_shown(pair)  # as the rating page does before an answer
        recording.do_record_judgment(pair, idempotency_key=f"k{n}", answer=Answer(choice="first"))
    with pytest.raises(ServiceError, match="finished"):
        recording.do_revise_judgment(
            AssignmentPair.objects.select_related("assignment__study").get(pk=pairs[0].pk),
            idempotency_key="r",
            answer=Answer(choice="second"),
        )
    assert not Judgment.objects.filter(revised=True).exists()


def test_a_skipped_item_is_a_skip_not_a_judgment_and_its_place_returns_to_the_queue(client, researcher):
    from annotation.models import Skip, Task

    study = creation.do_create_study(researcher, "skippy", study_jsonl(4, k=1), "s.jsonl")
    lifecycle.do_update_settings(study, {"allow_skip": True, "raters_per_item": 1, "judgments_per_assignment": 3}, None)
    rater = enrolment.do_create_rater_link(study, "skipper")
    assignment = start(client, rater)
    page = client.get(rate_url(rater, assignment)).content
    assert b'name="skip" value="1"' in page and b'name="skip_reason"' in page
    refused = client.post(rate_url(rater, assignment, True), {**form_of(page), "skip": "1", "skip_reason": "nope"})
    assert refused.status_code == 400 and b"Choose why you skip" in refused.content and not Skip.objects.exists()
    fields = {**form_of(page), "skip": "1", "skip_reason": "cannot_judge"}
    response = client.post(rate_url(rater, assignment, True), fields, HTTP_HX_REQUEST="true")
    client.post(rate_url(rater, assignment, True), fields, HTTP_HX_REQUEST="true")  # a double click
    assert b"Pair 2 of 3" in response.content
    skip = Skip.objects.get()
    assert (skip.reason, skip.rater_id, Judgment.objects.count()) == ("cannot_judge", rater.pk, 0)
    skipped_item = skip.assignment_pair.pair.item_id
    assert Task.objects.get(item_id=skipped_item).taken == 0  # the place went back to the queue
    assert Assignment.objects.get(pk=assignment.pk).answered == 1
    other = allocation.do_start_assignment(enrolment.do_create_rater_link(study, "other"))
    assert skipped_item in set(other.places.values_list("item_id", flat=True))
    from analytics.report.assembly import study_report

    judgments = study_report(study).judgments
    assert (judgments.total, judgments.skipped) == (0, {"cannot_judge": 1})  # apart from judgments
    assert [r.n_skipped for r in monitoring.rater_progress(study) if r.external_id == "skipper"] == [1]
