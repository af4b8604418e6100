"""Researcher pages over HTTP: access, import, settings, raters, exports."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from annotation.elicitation import Answer
from annotation.models import Judgment, Study
from annotation.rating import allocation, recording
from annotation.studies import creation, enrolment, lifecycle, monitoring
from tests.conftest import answer_all, found, study_jsonl


def upload(name: str, data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data)


@pytest.mark.parametrize("name", ["study_detail", "study_items", "study_settings"])
def test_researcher_pages_require_login(client, study, name):
    response = client.get(reverse(name, args=[study.pk]))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("name", ["study_detail", "study_items", "study_settings"])
def test_another_researcher_cannot_see_the_study(client, study, other_researcher, name):
    client.force_login(other_researcher)
    assert client.get(reverse(name, args=[study.pk])).status_code == 404


def test_another_researchers_exports_and_posts_are_404(client, study, other_researcher):
    client.force_login(other_researcher)
    assert client.get(reverse("judgments_export", args=[study.pk, "jsonl"])).status_code == 404
    assert client.post(reverse("rater_create", args=[study.pk]), {"name": "x"}).status_code == 404
    assert client.post(reverse("open_link_toggle", args=[study.pk]), {"enabled": "1"}).status_code == 404
    assert not study.raters.exists()


def test_the_study_list_shows_only_own_studies(researcher_client, study, other_researcher):
    creation.do_create_study(other_researcher, "bobs-study", study_jsonl(), "b.jsonl")
    response = researcher_client.get(reverse("study_list"))
    assert response.status_code == 200
    assert b"small" in response.content and b"bobs-study" not in response.content


def test_the_study_list_has_a_helpful_empty_state(researcher_client):
    response = researcher_client.get(reverse("study_list"))
    assert b"No studies yet" in response.content and b"Create your first study" in response.content


def test_the_study_list_runs_a_fixed_number_of_queries(researcher_client, researcher, django_assert_num_queries):
    for i in range(5):
        creation.do_create_study(researcher, f"s{i}", study_jsonl(), "s.jsonl")
    with django_assert_num_queries(4):  # session, user, studies with counts, how many are archived
        researcher_client.get(reverse("study_list"))


def test_a_researcher_creates_a_study_from_a_jsonl_upload(researcher_client):
    response = researcher_client.post(
        reverse("study_create"),
        {"name": "uploaded", "description": "d", "file": upload("s.jsonl", study_jsonl(3, k=2))},
    )
    study = Study.objects.get(name="uploaded")
    assert response.status_code == 302 and response["Location"] == study.get_absolute_url()
    page = researcher_client.get(study.get_absolute_url())
    assert b"<strong>3</strong> items" in page.content and b"<strong>12</strong> generations" in page.content
    items = researcher_client.get(reverse("study_items", args=[study.pk]))
    assert b"item-0" in items.content and b"item-2" in items.content


def test_a_researcher_creates_a_study_from_a_csv_upload(researcher_client):
    data = b"item_id,input,system,sample,output\ni1,in,a,0,x\ni1,in,b,0,y\n"
    researcher_client.post(reverse("study_create"), {"name": "csv", "file": upload("s.csv", data)})
    study = Study.objects.get(name="csv")
    assert [s.name for s in study.systems.all()] == ["a", "b"]


def test_a_bad_upload_lists_every_problem_and_saves_nothing(researcher_client):
    data = study_jsonl(2) + b'{"id": "item-1"}\nnot json\n'
    response = researcher_client.post(reverse("study_create"), {"name": "bad", "file": upload("s.jsonl", data)})
    assert response.status_code == 400
    content = response.content.decode()
    assert "line 3, field &#x27;id&#x27;: duplicate id &#x27;item-1&#x27; (first on line 2)" in content
    assert "line 3, field &#x27;input&#x27;: missing input" in content
    assert "line 4: malformed JSON" in content
    assert not Study.objects.exists()


def test_an_upload_over_the_limit_is_refused_before_reading(researcher_client, settings):
    settings.SEPLAB_MAX_IMPORT_BYTES = 100
    data = {"name": "big", "file": upload("s.jsonl", study_jsonl())}
    response = researcher_client.post(reverse("study_create"), data)
    assert response.status_code == 400 and b"file too large" in response.content
    assert not Study.objects.exists()


def test_the_new_study_page_explains_the_formats(researcher_client):
    response = researcher_client.get(reverse("study_create"))
    assert response.status_code == 200 and b"item_id,input,system,sample,output" in response.content


def test_logging_out_ends_the_session(researcher_client):
    researcher_client.post(reverse("logout"))
    assert researcher_client.get(reverse("study_list")).status_code == 302


def test_the_item_page_shows_generations_escaped(researcher_client, researcher):
    line = {"id": "x", "input": "<b>in</b>", "outputs": {"a": ["<script>alert(1)</script>\n  indented"], "b": ["fine"]}}
    study = creation.do_create_study(researcher, "xss", (json.dumps(line) + "\n").encode(), "x.jsonl")
    item = study.items.get()
    response = researcher_client.get(reverse("item_detail", args=[study.pk, item.pk]))
    assert b"&lt;script&gt;alert(1)&lt;/script&gt;\n  indented" in response.content
    assert b"<script>alert(1)" not in response.content and b"&lt;b&gt;in&lt;/b&gt;" in response.content


def test_the_item_page_shows_the_item_as_raters_saw_it_with_its_source_a_toggle_away(researcher_client, researcher):
    """The page a researcher adjudicates on renders the study's Markdown as the rating page did (a list, a code
    block), with the source text beside it behind the same toggle the raters have."""
    text = "Steps:\n\n1. **Boil** water\n2. Add `tea`\n"
    line = {"id": "md", "input": "# How?", "outputs": {"a": [text], "b": ["plain"]}}
    study = creation.do_create_study(researcher, "md", (json.dumps(line) + "\n").encode(), "m.jsonl")
    assert study.output_format == "markdown"
    page = researcher_client.get(reverse("item_detail", args=[study.pk, study.items.get().pk])).content.decode()
    assert "<strong>Boil</strong>" in page and "<code>tea</code>" in page and "<ol>" in page  # rendered
    assert 'data-testid="show-source"' in page and "1. **Boil** water" in page  # the source, one toggle away
    assert 'data-testid="item-input-source">' in page and "<h1>How?</h1>" in page
    Study.objects.filter(pk=study.pk).update(output_format="plain")
    page = researcher_client.get(reverse("item_detail", args=[study.pk, study.items.get().pk])).content.decode()
    assert "<strong>Boil</strong>" not in page and 'data-testid="show-source"' not in page  # shown as plain text


def settings_form(**overrides) -> dict:
    form = {
        "elicitation": "forced_choice",
        "question": "Q",
        "response_set_question": "q",
        "also_acceptable_question": "a",
        "allow_tie": "on",
        "tie_label": "No preference",
        "instructions": "Read.",
        "neither_label": "Both are bad",
        "output_format": "markdown",
        "pairs_per_assignment": 5,
        "sample_pairing": "one_to_one",
        "raters_per_item": 3,
        "judgments_per_assignment": 5,
        "pair_mode": "all",
        "scheduling": "random",
        "stopping_ties_in_n": "on",
        "rating_aggregation": "every",
        "selection_method": "random",
        "budget": "",
        "seed": 1,
        "separability_metric": "cosine",
        "separability_threshold": 0.2,
        "risk": 0.1,
        "min_n": 5,
        "sep_threshold_t": 0.4,
        "sep_alpha": 2.0,
        "sep_beta": 6.0,
        "elo_k": 4.0,
        "bootstrap_rounds": 100,
        "indeterminacy_beta": 0.0,
        "estimate_target": "items_like_these",
        "style_penalty": 1.0,
        "max_assignments_per_rater": "",
        "assignment_timeout_minutes": 60,
        "gold_rate": 0.0,
        "min_seconds_per_pair": 0,
        "first_answer_minutes": 5,
        "screen_min_gold": 3,
        "screen_accuracy": 0.6,
        "decision_alpha": 0.05,
        "error_control": "auto",
        "decision_margin": 0.05,
        "decision_goal": "pairs",
        "decision_looks": 5,
        "decision_futility": 0.1,
    }
    form.update(overrides)
    return form


def test_settings_save_and_rebuild_the_plan(researcher_client, study):
    form = settings_form(
        elicitation="paired",
        tie_label="Same",
        pairs_per_assignment=2,
        raters_per_item=1,
        scheduling="symmetric",
        seed=42,
    )
    response = researcher_client.post(reverse("study_settings", args=[study.pk]), form)
    assert response.status_code == 302
    study.refresh_from_db()
    assert (study.elicitation, study.tie_label, study.pairs_per_assignment, study.seed) == ("paired", "Same", 2, 42)
    assert {t.task_pairs.count() for t in study.tasks.all()} == {2}


def test_settings_validation_errors_are_shown(researcher_client, study):
    form = settings_form(tie_label=" ", pairs_per_assignment=0, pair_mode="baseline")
    response = researcher_client.post(reverse("study_settings", args=[study.pk]), form)
    content = response.content.decode()
    assert response.status_code == 200
    assert "Give the tie option a label" in content and "Choose the baseline system." in content
    assert "Must be a whole number from 1 to 50, not 0." in content  # the declared range (annotation/setting_ranges.py)


def test_settings_freeze_the_plan_once_raters_started(researcher_client, study, rater):
    allocation.do_start_assignment(rater)
    response = researcher_client.get(reverse("study_settings", args=[study.pk]))
    assert b"what is compared is frozen" in response.content
    [field] = re.findall(r'<input[^>]*name="pairs_per_assignment"[^>]*>', response.content.decode())
    assert 'value="5"' in field and " disabled" in field


def test_a_researcher_creates_a_personal_rater_link(researcher_client, study):
    response = researcher_client.post(reverse("rater_create", args=[study.pk]), {"name": "ana"}, follow=True)
    rater = study.raters.get(external_id="ana")
    assert rater.link_path().encode() in response.content
    again = researcher_client.post(reverse("rater_create", args=[study.pk]), {"name": "ana"}, follow=True)
    assert b"A rater named &#x27;ana&#x27; already exists" in again.content


def test_the_study_page_shows_progress_per_pair_and_rater(researcher_client, study, rater, django_assert_num_queries):
    answer_all(allocation.do_start_assignment(rater))
    for name in ("rater-2", "rater-3"):  # more raters must not mean more queries
        allocation.do_start_assignment(enrolment.do_create_rater_link(study, name))
    # + embedding coverage (2), the latest embed, plan and import jobs (3: judgments and rankings imports in one),
    # the times on long outputs (1), the assignment size (4), the raters table's counts (4: assignments open and done,
    # judgments, skips, each one aggregate of its table by rater, whatever the number of raters), the stopped
    # judgments and rankings imports waiting (2), the rankings (1)
    with django_assert_num_queries(29):
        response = researcher_client.get(study.get_absolute_url())
    content = response.content.decode()
    assert "sys-a vs sys-b" in content and "5 / 60" in content
    assert "rater-1" in content


def test_the_open_link_can_be_opened_and_closed(researcher_client, study):
    researcher_client.post(reverse("open_link_toggle", args=[study.pk]), {"enabled": "1"})
    study.refresh_from_db()
    assert study.open_link_enabled
    assert study.open_link_path().encode() in researcher_client.get(study.get_absolute_url()).content
    researcher_client.post(reverse("open_link_toggle", args=[study.pk]), {"enabled": "0"})
    study.refresh_from_db()
    assert not study.open_link_enabled


def test_judgments_export_as_jsonl_and_csv(researcher_client, study, rater):
    answer_all(allocation.do_start_assignment(rater))
    response = researcher_client.get(reverse("judgments_export", args=[study.pk, "jsonl"]))
    assert response["Content-Type"].startswith("application/x-ndjson")
    assert 'filename="small-judgments.jsonl"' in response["Content-Disposition"]
    lines = [json.loads(x) for x in b"".join(response.streaming_content).decode().splitlines()]
    assert len(lines) == 5 and {line["rater"] for line in lines} == {"rater-1"}
    csv_response = researcher_client.get(reverse("judgments_export", args=[study.pk, "csv"]))
    rows = b"".join(csv_response.streaming_content).decode().splitlines()
    assert rows[0].startswith("id,item,system_a,sample_a") and len(rows) == 6
    assert researcher_client.get(reverse("judgments_export", args=[study.pk, "xml"])).status_code == 404


def test_judgments_import_from_the_page(researcher_client, study):
    line = {
        "item": "item-0",
        "system_a": "sys-a",
        "system_b": "sys-b",
        "shown_first": "sys-b",
        "rater": "judge-1",
        "rater_kind": "judge",
        "choice": "sys-b",
        "probability_a": 0.2,
    }
    data = (json.dumps(line) + "\n").encode()
    response = researcher_client.post(
        reverse("judgments_import", args=[study.pk]), {"file": upload("j.jsonl", data)}, follow=True
    )
    assert b"Imported 1 judgments (0 already present)" in response.content
    bad = researcher_client.post(
        reverse("judgments_import", args=[study.pk]), {"file": upload("j.jsonl", b'{"item": "nope"}\n')}
    )
    assert bad.status_code == 400 and b"unknown item" in bad.content
    assert Judgment.objects.count() == 1


def test_the_api_token_page_creates_and_replaces_a_token(researcher_client, researcher):
    from rest_framework.authtoken.models import Token

    assert b"no API token yet" in researcher_client.get(reverse("api_token")).content
    researcher_client.post(reverse("api_token"))
    first = Token.objects.get(user=researcher).key
    researcher_client.post(reverse("api_token"))
    assert Token.objects.get(user=researcher).key != first


def test_login_page_and_home_redirect(client, researcher):
    assert client.get("/")["Location"] == reverse("login")
    response = client.post(reverse("login"), {"username": "alice", "password": "pw-alice"})
    assert response["Location"] == reverse("study_list")


def test_the_settings_page_edits_every_apps_settings_and_shows_what_they_become(researcher_client, study):
    form = settings_form(
        selection_method="random",
        budget=3,
        sep_alpha=3.5,
        elo_k=8,
        gold_rate=0.1,
        neither_option="on",
        neither_label="Neither works",
    )
    assert researcher_client.post(reverse("study_settings", args=[study.pk]), form).status_code == 302
    study = type(study).objects.get(pk=study.pk)
    assert (
        study.selection_settings.selection_method,
        study.selection_settings.budget,
        study.selection_settings.sep_alpha,
    ) == ("random", 3, 3.5)
    assert (study.analysis_settings.elo_k, study.crowd_settings.gold_rate) == (8, 0.1)
    assert (study.neither_option, study.neither_label) == (True, "Neither works")
    page = researcher_client.get(reverse("study_settings", args=[study.pk])).content.decode()
    assert "<code>method = random</code>" in page and "<code>alpha = 3.5</code>" in page
    assert "<code>k = 8.0</code>" in page and 'name="neither_label" value="Neither works"' in page


def test_the_study_page_warns_without_a_minimum_time_and_flags_implausibly_fast_raters(researcher_client, researcher):
    long_text = " ".join(["word"] * (monitoring.LONG_OUTPUT_WORDS + 1))
    lines = [{"id": f"i{n}", "input": "Q", "outputs": {"a": [long_text], "b": ["short"]}} for n in range(3)]
    study = creation.do_create_study(
        researcher, "speed", "".join(json.dumps(x) + "\n" for x in lines).encode(), "s.jsonl"
    )
    lifecycle.do_update_settings(study, {"judgments_per_assignment": 1}, None)  # one pair per assignment
    times = {"careful": [4000, 6000, 5000], "hasty": [900, 1200, 30000]}  # medians 5.0 s and 1.2 s
    for name, spent in times.items():
        rater = enrolment.do_create_rater_link(study, name)
        for ms in spent:
            assignment = allocation.do_start_assignment(rater)
            pair = assignment.pairs.get()
            allocation.do_mark_shown(pair)  # as the rating page does before an answer
            recording.do_record_judgment(pair, idempotency_key=f"{name}{ms}", answer=Answer(choice="first"))
            Judgment.objects.filter(assignment_pair=pair).update(time_on_task_ms=ms)
    page = researcher_client.get(study.get_absolute_url()).content.decode()
    assert 'data-testid="no-minimum-time"' in page
    rows = {r.external_id: r for r in monitoring.rater_progress(study)}
    assert (rows["careful"].median_long_seconds, rows["careful"].too_fast) == (5.0, False)
    assert (rows["hasty"].median_long_seconds, rows["hasty"].too_fast) == (1.2, True)
    assert page.count('data-testid="too-fast"') == 1
    lifecycle.do_update_settings(study, {"min_seconds_per_pair": 3}, None)
    assert 'data-testid="no-minimum-time"' not in researcher_client.get(study.get_absolute_url()).content.decode()


def test_preview_as_a_rater_runs_the_real_page_and_stores_nothing(researcher_client, study):
    url = reverse("study_preview", args=[study.pk])
    page = researcher_client.get(url).content.decode()
    assert 'data-testid="preview-banner"' in page and "Pair 1 of 5" in page
    assert 'type="radio" name="choice" value="first" data-key="1"' in page
    refused = researcher_client.get(url, {"n": 1}).content.decode()  # no answer: the mode says what is missing
    assert "Choose one of the options" in refused and "Pair 1 of 5" in refused
    assert "Pair 2 of 5" in researcher_client.get(url, {"n": 1, "choice": "first"}).content.decode()
    end = researcher_client.get(url, {"n": 5, "choice": "tie"}).content.decode()
    assert "End of the preview" in end
    assert not (Judgment.objects.exists() or study.raters.exists() or study.assignments.exists())


def test_the_preview_is_the_researchers_own(client, other_researcher, study):
    client.force_login(other_researcher)
    assert client.get(reverse("study_preview", args=[study.pk])).status_code == 404


def test_the_settings_page_is_grouped_by_task_with_readable_labels_and_defaults(researcher_client, study):
    page = researcher_client.get(reverse("study_settings", args=[study.pk])).content.decode()
    legends = re.findall(r"<legend>([^<]+)</legend>", page)
    assert legends == ["What raters see", "Who rates", "Which items", "How results are computed"]
    # human labels with a one-line explanation and the default, no raw field names
    assert ">ELO K factor</label>" in page and "Default: 4.0." in page and "Elo k" not in page
    assert ">Separability midpoint (T)</label>" in page and "Sep threshold t" not in page and "Min n" not in page
    assert "bench/README" not in page
    # only what applies to the saved choices is shown; the rest waits, closed, still in the form
    not_used = page.split('data-testid="not-used-selection"')[1].split("</details>")[0]
    for name in ("risk", "min_n", "separability_threshold", "baseline"):
        assert f'name="{name}"' in not_used
    lifecycle.do_update_settings(study, {"selection_method": "diffuse-iterative"}, None)
    page = researcher_client.get(reverse("study_settings", args=[study.pk])).content.decode()
    not_used = page.split('data-testid="not-used-selection"')[1].split("</details>")[0]
    assert 'name="risk"' not in not_used and 'name="min_n"' not in not_used and 'name="risk"' in page


def test_every_setting_is_placed_on_the_settings_page(study):
    from annotation import study_settings
    from annotation.views.forms import StudySettingsForm

    form = StudySettingsForm(instance=study)
    placed = {e["field"].name for g in form.groups() for e in g["fields"] + g["others"]}
    assert placed == set(form.fields) == set(study_settings.SETTINGS)
    assert all(form.fields[n].label == s.label for n, s in study_settings.SETTINGS.items())


def test_item_metadata_reads_as_json_not_python(researcher_client, researcher):
    line = {
        "id": "m",
        "input": "i",
        "outputs": {"a": ["x"], "b": ["y"]},
        "metadata": {"source": "cnn", "verified": True, "note": None, "tags": ["a", "<b>"]},
    }
    study = creation.do_create_study(researcher, "meta", (json.dumps(line) + "\n").encode(), "m.jsonl")
    page = researcher_client.get(reverse("item_detail", args=[study.pk, study.items.get().pk])).content.decode()
    rows = dict(re.findall(r'<tr><th scope="row">([^<]+)</th><td>([^<]*)</td></tr>', page))
    assert rows == {
        "source": "cnn",
        "verified": "true",
        "note": "null",
        "tags": "[&quot;a&quot;, &quot;&lt;b&gt;&quot;]",
    }
    assert "True" not in page.split('data-testid="metadata"')[1].split("</table>")[0]


def test_a_new_strategy_reaches_the_settings_page_without_editing_annotation(study, monkeypatch):
    """Annotation's form once hard-coded selection's strategy names (THRESHOLD_METHODS, LIVE_METHOD); the
    choices and the "applies when" rules now come from selection's registry through the settings' declarations."""
    import dataclasses

    from annotation import study_settings
    from annotation.views.forms import StudySettingsForm
    from selection.strategies import STRATEGIES

    for name, like in (("my-threshold", "separability-threshold"), ("my-live", "diffuse-iterative")):
        monkeypatch.setitem(STRATEGIES, name, dataclasses.replace(STRATEGIES[like], name=name, label=name.upper()))
    assert {("my-threshold", "MY-THRESHOLD"), ("my-live", "MY-LIVE")} <= set(
        StudySettingsForm(instance=study).fields["selection_method"].choices
    )
    for method, used in (
        ("my-threshold", {"separability_threshold"}),
        ("my-live", {"risk", "min_n"}),
        ("random", set()),
    ):
        saved = {"selection_method": method}
        read = lambda n, saved=saved: saved.get(n, study_settings.value(study, n))  # noqa: E731
        assert {n for n in ("separability_threshold", "risk", "min_n") if study_settings.applies(n, read)} == used


def test_the_settings_page_keeps_its_order_whichever_app_declares_a_setting(study):
    """The sections are read off each app's declarations; the page keeps the order people know."""
    from annotation import study_settings

    assert [names for *_, names in study_settings.sections()] == [
        [
            "answer_unit",  # a pair, or several outputs at once: what the rest of the section asks about
            "outputs_shown",
            "elicitation",
            "question",
            "response_set_question",
            "also_acceptable_question",
            "further_questions",
            "allow_tie",
            "tie_label",
            "neither_option",
            "neither_label",
            "allow_skip",
            "allow_comment",
            "output_format",
            "instructions",
            "raters_language",
            "consent_text",
            "practice_pairs",
            "pairs_per_assignment",
            "sample_pairing",
            "judgments_per_assignment",
        ],
        [
            "raters_per_item",
            "max_assignments_per_rater",
            "assignment_timeout_minutes",
            "first_answer_minutes",
            "gold_rate",
            "min_seconds_per_pair",
            "screen_min_gold",
            "screen_accuracy",
            "pay_per_assignment",
            "public_base_url",
        ],
        [
            "pair_mode",
            "baseline",
            "explicit_pairs",
            "scheduling",
            "selection_method",
            "budget",
            "separability_metric",
            "separability_threshold",
            "risk",
            "min_n",
            "decision_alpha",
            "error_control",
            "decision_margin",
            "stop_when_decided",
            "decision_goal",
            "one_rater_first",
            "decision_looks",
            "decision_futility",
            "seed",
        ],
        [
            "elo_k",
            "bootstrap_rounds",
            "rating_aggregation",
            "sep_threshold_t",
            "sep_alpha",
            "sep_beta",
            "stopping_ties_in_n",
            "indeterminacy_beta",
            "style_penalty",
            "estimate_target",
        ],
    ]


def test_the_site_has_an_icon_and_a_rater_can_continue_with_enter(client, study):
    """favicon.ico was once 404 on every page, and "Continue where you left off" was not focused."""
    icon = client.get("/favicon.ico")
    assert icon.status_code == 301 and icon["Location"].endswith("favicon.svg")
    rater = enrolment.do_create_rater_link(study, "r-continue")
    allocation.do_start_assignment(rater)
    page = client.get(reverse("rater_home", args=[rater.token()])).content.decode()
    assert 'rel="icon"' in page and re.search(r'href="[^"]+"\s+autofocus>Continue where you left off', page)


def test_the_study_page_says_the_pairs_an_item_really_has(researcher_client, researcher):
    """N = 5 sampled pairs per item, but each system gave one output: an item has one distinct pair, and the page
    says so instead of "5 pairs per item"."""
    lines = [{"id": f"i{n}", "input": f"Q{n}?", "outputs": {"a": [f"x{n}"], "b": [f"y{n}"]}} for n in range(3)]
    study = creation.do_create_study(
        researcher, "one each", "".join(json.dumps(x) + "\n" for x in lines).encode(), "o.jsonl"
    )
    assert study.pairs_per_assignment == 5
    page = researcher_client.get(reverse("study_detail", args=[study.pk])).content.decode()
    assert "1 pair per item (N is 5: each item has only 1 distinct output pair)" in page
    assert "5 pairs per item" not in page


def test_the_welcome_page_says_what_comes_with_the_pairs(client, researcher):
    """Consent, practice and further questions are said up front, on the welcome page (and the crowd preview, which
    shows the same size), in the rater's language."""
    from annotation.studies import enrolment

    study = creation.do_create_study(researcher, "extras", study_jsonl(3), "e.jsonl")
    rater = enrolment.do_create_rater_link(study, "r")
    page = client.get(reverse("rater_home", args=[rater.token()])).content.decode()
    assert 'data-testid="assignment-extras"' not in page  # nothing comes with the pairs
    Study.objects.filter(pk=study.pk).update(
        consent_text="I agree.", practice_pairs=2, further_questions="why | rationale | Why?"
    )
    page = client.get(reverse("rater_home", args=[rater.token()])).content.decode()
    extras = found(r'data-testid="assignment-extras">([^<]*)<', page).group(1)
    assert extras == (
        "Before the first pair you are asked to agree to take part. First 2 practice pairs, not counted, with "
        "feedback. Each pair also asks 1 more question."
    )
    Study.objects.filter(pk=study.pk).update(raters_language="de")
    page = client.get(reverse("rater_home", args=[rater.token()])).content.decode()
    assert "Zu jedem Paar gibt es 1 weitere Frage." in page and "Zuerst 2 Übungspaare" in page
