"""axe-core (through axe-playwright-python, which ships it) on every page raters and researchers use, with the
CSP on: no critical and no serious violation."""

from __future__ import annotations

import json

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.test import Client
from django.urls import reverse

from annotation import elicitation
from annotation.crowd import sites
from annotation.elicitation import Answer
from annotation.rating import allocation, recording
from annotation.studies import creation, enrolment, lifecycle
from tests.browser.test_rater_ux import LONG
from tests.conftest import answer_all, study_jsonl

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = Axe()


def serious(page) -> list[str]:
    """The critical and serious violations on the page, one line each with the elements involved."""
    violations = AXE.run(page).response["violations"]
    return [
        f"{v['id']} ({v['impact']}): {v['help']} -> {[n['target'] for n in v['nodes']][:3]}"
        for v in violations
        if v["impact"] in ("critical", "serious")
    ]


@pytest.mark.parametrize("mode", list(elicitation.MODES))
def test_the_rater_pages_of_every_mode_short_and_long_outputs_and_the_preview(
    browser_page, live_server, researcher, mode
) -> None:
    lines = [
        {"id": "long", "input": "How do I list Python files?", "outputs": {"a": [LONG], "b": ["Use glob."]}},
        {"id": "short", "input": "Say hi.", "outputs": {"a": ["Hi."], "b": ["Hello!"]}},
    ]
    study = creation.do_create_study(
        researcher, f"axe-{mode}", "".join(json.dumps(x) + "\n" for x in lines).encode(), "a.jsonl"
    )
    # three raters per item: after the two below a place is left, so the preview offers work (a preview
    # with every place taken says there is none)
    lifecycle.do_update_settings(study, {"elicitation": mode, "neither_option": True, "raters_per_item": 3}, None)
    page = browser_page.new_page(viewport={"width": 1280, "height": 900})
    found: dict[str, list[str]] = {}
    for n in range(2):  # two raters: both items, whichever comes first
        rater = enrolment.do_create_rater_link(study, f"r{n}")
        page.goto(live_server.url + rater.link_path())
        found[f"welcome {n}"] = serious(page)
        page.get_by_role("button", name="Start rating").click()
        page.locator("#rating-form").wait_for()
        found[f"rating page {n}"] = serious(page)
    link = sites.do_create_external_link(study, "mturk")
    page.goto(live_server.url + link.path() + "?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h")
    found["mturk preview"] = serious(page)
    # the preview shows this mode's own question, options and keys, and the real size
    for fieldset in study.elicitation_mode.fieldsets(study):
        assert page.get_by_role("group", name=fieldset.legend).is_visible()
        for option in fieldset.options:
            assert page.locator(f'input[name="{option.name}"][value="{option.value}"][disabled]').count() == 1
    assert "Each assignment: 2 pairs" in page.get_by_test_id("assignment-size").inner_text()
    assert found == {name: [] for name in found}


@pytest.mark.slow(seconds=9)
def test_the_completion_page_and_the_researcher_pages(browser_page, live_server, researcher, study) -> None:
    rater = enrolment.do_create_rater_link(study, "done")
    assignment = allocation.do_start_assignment(rater)
    assert assignment is not None
    answer_all(assignment)
    other = creation.do_create_study(researcher, "judged", study_jsonl(3), "j.jsonl")
    # the decisions table (stopping when decided, the ranking as the goal) and a budget plan with money on its pages
    other = lifecycle.do_update_settings(other, {"selection_method": "random", "stop_when_decided": True}, None)
    other.crowd_settings.pay_per_assignment = "1.20"
    other.crowd_settings.save()
    for n in range(2):
        answer_all(allocation.do_start_assignment(enrolment.do_create_rater_link(other, f"j{n}")), choice="second")
    tied = allocation.do_start_assignment(enrolment.do_create_rater_link(other, "t"))
    assert tied is not None
    tie = tied.pairs.first()
    assert tie is not None
    allocation.do_mark_shown(tie)  # as the rating page does before an answer
    recording.do_record_judgment(tie, idempotency_key="tie", answer=Answer(choice="tie"))
    from analytics import stored
    from analytics.populations import Population

    for s in (study, other):  # the report's body, not only its "computing" notice
        stored.do_refresh(s, Population())
    from analytics import budgeting
    from analytics.models import BudgetPlan

    BudgetPlan.objects.create(
        study=other,
        result=budgeting.plan(
            other,
            budgeting.read_request(other, {"margins": "0.2,0.3", "raters": "1,2", "rounds": "20", "max_items": "200"}),
        ),
    )
    client = Client()
    client.force_login(researcher)
    context = browser_page.new_context(viewport={"width": 1280, "height": 900})
    context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
    page = context.new_page()
    found: dict[str, list[str]] = {}
    page.goto(live_server.url + reverse("rate", args=[rater.token(), assignment.pk]))
    found["completion page"] = serious(page)
    for name in (
        "study_detail",
        "report",
        "study_settings",
        "separability",
        "external_links",
        "study_items",
        "study_preview",
        "live_selection",
        "study_delete",
        "study_duplicate",
        "rater_links_bulk",
    ):
        for s in (study, other):
            page.goto(live_server.url + reverse(name, args=[s.pk]))
            found[f"{name} {s.name}"] = serious(page)
    page.goto(live_server.url + reverse("study_list"))
    found["study list"] = serious(page)
    context.close()
    assert found == {name: [] for name in found}


RESEARCHER_PAGES = (
    "study_detail",
    "report",
    "study_settings",
    "separability",
    "external_links",
    "study_items",
    "study_preview",
    "live_selection",
    "study_delete",
    "study_duplicate",
    "rater_links_bulk",
    "judges",
    "review_queue",
    "systems",
    "team",
)  # every GET page of a study (the others are form targets)


SIZES = {"desktop": (1280, 900), "phone": (390, 844)}


@pytest.mark.slow(seconds=90)
def test_every_researcher_page_with_real_data_at_both_sizes(browser_page, live_server, researcher) -> None:
    """Every page a researcher reaches, with real data on it -- the demo study (20 items, five simulated people and
    a judge) and, when ../shared/data is here, PRD's Vicuna-80 study with its five judges -- at desktop and phone
    sizes: no critical and no serious violation, and no page wider than the screen. The studies are loaded once
    and each page is opened at both sizes, in a browser context per size."""
    from io import StringIO

    from django.core.management import call_command

    from analytics import curation, stored
    from analytics.populations import Population
    from annotation.models import Item, Study, SystemEndpoint
    from tests.analytics.conftest import PRD

    call_command("load_demo", "--username", researcher.username, stdout=StringIO())
    if (PRD / "ratings-gpt4").exists():
        call_command("load_prd", "--data", str(PRD), "--owner", researcher.username, stdout=StringIO())
    studies = list(Study.objects.filter(owner=researcher))
    for study in studies:
        stored.do_refresh(study, Population())
    with_workers(studies[0])  # the crowd page's Workers, Pay workers, ledger and Consent tables, filled
    with_team(studies[0], researcher)  # the Team page's members and audit trail, filled
    curated = list(Item.objects.filter(study=studies[0]).order_by("position")[:2])  # the data manager's states
    curation.do_curate(studies[0], "exclude", [curated[0].pk], researcher)
    curation.do_curate(studies[0], "review", [curated[1].pk], researcher)
    generated = generated_study(researcher)  # systems generated from endpoints, with their faults
    board = arena_board_study(researcher)  # an arena's leaderboard, with categories and flagged votes
    researcher.refresh_from_db()  # load_demo gave the account a new password: a session needs the current one
    client = Client()
    client.force_login(researcher)
    urls: dict[str, str] = {}  # what the finding is called -> the page
    wide_checked: set[str] = set()  # pages that must fit the screen (wide tables scroll inside their own region)
    for study in studies:
        pages = [reverse(name, args=[study.pk]) for name in RESEARCHER_PAGES]
        item = Item.objects.filter(study=study).first()
        assert item is not None
        pages.append(reverse("item_detail", args=[study.pk, item.pk]))  # the demo's is excluded
        pages.append(reverse("study_items", args=[study.pk]) + "?flagged=yes&judges=disagree")
        pages.append(reverse("study_items", args=[study.pk]) + "?winner=nobody")  # a refused filter, said
        pages += [reverse("judge_detail", args=[study.pk, judge.pk]) for judge in study.judges.all()[:1]]
        pages += [
            reverse("system_detail", args=[study.pk, endpoint.pk])
            for endpoint in SystemEndpoint.objects.filter(system__study=study)[:1]
        ]
        for url in pages:
            urls[f"{url} ({study.name})"] = url
            wide_checked.add(f"{url} ({study.name})")
    system_pages = [reverse("systems", args=[generated.pk])] + [
        reverse("system_detail", args=[generated.pk, e.pk])
        for e in SystemEndpoint.objects.filter(system__study=generated)
    ]
    arena_pages = [reverse("arena_board", args=[board.pk]), reverse("study_detail", args=[board.pk])]
    for url in (
        *system_pages,
        *arena_pages,
        reverse("study_list"),
        reverse("study_create"),
        reverse("api_token"),
        reverse("health"),  # a person checking by hand gets a page
    ):
        urls[url] = url
        if url in system_pages or url in arena_pages or url == reverse("study_list"):
            wide_checked.add(url)
    found: dict[str, list[str]] = {}
    wider: dict[str, int] = {}
    for size, width, page in logged_in_pages(browser_page, live_server, client):
        for name, url in urls.items():
            page.goto(live_server.url + url)
            assert "/accounts/login/" not in page.url, url  # the page itself, not the login form
            found[f"{name} [{size}]"] = serious(page)
            scrolled = page.evaluate("document.scrollingElement.scrollWidth")
            if name in wide_checked and scrolled > width:  # the study page was once 862 px wide on a 390 px phone
                wider[f"{name} [{size}]"] = scrolled
    assert found == {name: [] for name in found}
    assert wider == {}


def logged_in_pages(browser_page, live_server, client):
    """A page at each of ``SIZES`` logged in as ``client`` is: (size, width, page), its browser context closed once
    the caller is done with it."""
    for size, (width, height) in SIZES.items():
        context = browser_page.new_context(viewport={"width": width, "height": height})
        context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
        try:
            yield size, width, context.new_page()
        finally:
            context.close()


@pytest.mark.slow(seconds=15)
def test_the_apis_page_for_browsers_at_both_sizes(browser_page, live_server, researcher, study) -> None:
    """Django REST framework's browsable page (annotation/views/api_renderers.py), on a list, a study, its judgments
    and its settings: no serious violation at either size, nothing wider than the screen, its language declared."""
    client = Client()
    client.force_login(researcher)
    urls = (
        "/api/studies/",
        f"/api/studies/{study.pk}/",
        f"/api/studies/{study.pk}/items/",
        f"/api/studies/{study.pk}/settings/",
    )
    found: dict[str, list[str]] = {}
    wider: dict[str, int] = {}
    for size, width, page in logged_in_pages(browser_page, live_server, client):
        for url in urls:
            page.goto(live_server.url + url)
            assert page.locator("html").get_attribute("lang") == "en-us"
            assert page.get_by_label("response info").is_visible()  # the answer itself, as a GET gives it
            found[f"{url} [{size}]"] = serious(page)
            scrolled = page.evaluate("document.scrollingElement.scrollWidth")
            if scrolled > width:
                wider[f"{url} [{size}]"] = scrolled
    assert found == {name: [] for name in found}
    assert wider == {}


def with_team(study, owner) -> None:
    """Two collaborators in roles and a change each in the audit trail (a setting before and after, a ruling)."""
    from django.contrib.auth import get_user_model

    from annotation.studies import team

    for name, role in (("carol", "reviewer"), ("dmitri-with-a-long-account-name", "editor")):
        get_user_model().objects.create_user(name, password="pw")
        team.do_add_member(study, name, role, owner)
    lifecycle.do_update_settings(study, {"question": "Which summary is more faithful to the article?"}, None, by=owner)


@pytest.mark.slow(seconds=20)
def test_a_viewers_pages_and_a_refused_change_at_both_sizes(browser_page, live_server, researcher, study) -> None:
    """A viewer's study page says their role; a change their role does not allow is refused on a page that says
    which role it needs: no serious violation at either size, nothing wider than the screen."""
    from django.contrib.auth import get_user_model

    from annotation.studies import team

    viewer = get_user_model().objects.create_user("vera", password="pw")
    team.do_add_member(study, "vera", "viewer", researcher)
    client = Client()
    client.force_login(viewer)
    found: dict[str, list[str]] = {}
    wider: dict[str, int] = {}
    for size, width, page in logged_in_pages(browser_page, live_server, client):
        for name in (
            "study_detail",
            "team",
            "external_links",
            "review_queue",
            "study_settings",
        ):  # settings last: its form is sent below
            page.goto(live_server.url + reverse(name, args=[study.pk]))
            found[f"{name} [{size}]"] = serious(page)
        assert page.get_by_test_id("study-role").is_visible()
        page.get_by_role("button", name="Save settings").click()
        page.get_by_test_id("forbidden").wait_for()
        assert "an editor's role" in page.get_by_test_id("forbidden").inner_text()
        found[f"refused [{size}]"] = serious(page)
        scrolled = page.evaluate("document.scrollingElement.scrollWidth")
        if scrolled > width:
            wider[size] = scrolled
    assert found == {name: [] for name in found}
    assert wider == {}


def with_workers(study) -> None:
    """Crowd workers on the study's crowd page, as a site sends them (long worker ids, as MTurk's are), one of them
    agreed to a consent text and screened out: the Workers and the Consent tables have rows to lay out."""
    from django.utils import timezone

    from annotation.crowd import sites
    from annotation.models import ExternalLink, Rater

    study.consent_text = "You agree to take part in this study."
    study.save(update_fields=["consent_text"])
    sites.do_create_external_link(study, ExternalLink.Platform.MTURK)
    for n in range(3):
        Rater.objects.create(
            study=study,
            source=Rater.Source.EXTERNAL,
            external_id=f"mturk:A{n}1B2C3D4E5F6G7H8I9J0KLMNOPQ",
            consented_at=timezone.now() if n else None,
            screened_out=n == 2,
        )
    # submissions to pay, and a ledger with a long refusal in MTurk's words
    from annotation.crowd import payments
    from annotation.models import CrowdPayment, MTurkHIT

    link = sites.do_create_external_link(study, ExternalLink.Platform.MTURK)
    MTurkHIT.objects.create(
        study=study, hit_id="3AQN9REUTFGXCRWFE1WOS2EXAMPLE", sandbox=False, max_assignments=3, reward="1.20"
    )
    for n in range(2):
        session = sites.do_accept(
            link,
            sites.Arrival(
                "mturk", f"A{n}9XYZWORKER1234567", f"3K4J6M3CXES74RFXQAPR43{n}EXAMPLE", "3AQN9REUTFGXCRWFE1WOS2EXAMPLE"
            ),
        )
        payments.do_queue(study, session, "approve", "", "", "", None)
    CrowdPayment.objects.filter(pk=CrowdPayment.objects.order_by("pk").values_list("pk", flat=True)[0]).update(
        status="failed",
        problem="MTurk refused: RequestError: This operation can be called with a status of: Submitted "
        "(1700000000000 3K4J6M3CXES74RFXQAPR430EXAMPLE)",
    )


def generated_study(researcher):
    """A study from inputs alone with two systems generated from the local server: one run to its end with an unusable
    reply and a failed request among its outputs (more than a page of them), one not started."""
    from annotation.generating import runner
    from tests.judge_server import JudgeServer

    inputs = ["[[nul]] a bad byte", "[[always-429]] busy", *(f"Question {i}: why is the sky blue?" for i in range(11))]
    lines = "".join(
        json.dumps({"id": f"generated-question-{i:04d}", "input": text}) + "\n" for i, text in enumerate(inputs)
    )
    study = creation.do_create_study(researcher, "generated", lines.encode(), "inputs.jsonl")
    server = JudgeServer().start()
    try:
        for name, model in (("verbose-model-with-a-long-name", "gen-verbose-a"), ("terse", "gen-terse-b")):
            endpoint = runner.do_add_endpoint_system(
                study,
                name,
                base_url=server.base_url,
                model=model,
                api_key_env="",
                samples=2,
                max_retries=0,
                system_prompt="Answer in one paragraph.",
            )
            if name != "terse":
                runner.GenerationRun(endpoint).do_run()
    finally:
        server.shutdown()
        server.server_close()
    return study


def arena_board_study(researcher):
    """An arena whose board the worker has computed: three systems, votes with a researcher's category and automatic
    tags, separabilities for sep-ELO, and two votes flagged."""
    from analytics import arena
    from annotation.models import Battle, Judgment
    from tests.analytics.arena_fixtures import add_separability, add_votes, make_arena

    study = make_arena(researcher, ("alpha", "beta", "a-system-with-a-rather-long-name"), 12, name="arena board")
    names = ("alpha", "beta", "a-system-with-a-rather-long-name")
    votes = [
        (i, f"r{i % 3}", names[i % 3], names[(i + 1) % 3], names[(i * 7) % 3 if i % 4 else i % 3]) for i in range(12)
    ]
    add_votes(study, [(p, r, a, b, w if w in (a, b) else "tie") for p, r, a, b, w in votes])
    add_separability(study, {i: 0.1 * (i % 9) for i in range(10)})
    Battle.objects.filter(study=study, item__position__lt=6).update(
        category="writing", tags={"language": "en", "code": True}
    )
    Judgment.objects.filter(study=study, pair__item__position__in=[7, 8]).update(superseded=True)
    Battle.objects.filter(study=study, item__position__in=[7, 8]).update(flag="near-duplicate prompt: repeats battle 1")
    arena.do_refresh(study)
    return study


@pytest.mark.slow(seconds=15)
def test_an_arenas_study_page_and_its_settings_page_at_both_sizes(browser_page, live_server, researcher) -> None:
    """A real arena (``setup.do_create_arena``) with battles in every state, one system's budget used up: its study
    page and its Arena settings page, as shown and with every kind of refusal beside its field, at desktop and phone
    sizes: no critical or serious violation, no page wider than the screen."""
    from types import SimpleNamespace

    from annotation.arena import setup
    from annotation.models import Battle
    from tests.annotation.generating import arena_rows

    local = SimpleNamespace(base_url="http://127.0.0.1:8000/v1")  # never asked: rows only
    study = arena_rows.arena(researcher, local, samples=2, request_budget=3)
    setup.do_update_arena(study, starters=["Write a haiku about rain."], categories=["poetry", "code"])
    for n, status in enumerate(("voted", "voted", "failed")):
        battle = arena_rows.ready_battle(study, f"Prompt number {n}.")
        Battle.objects.filter(pk=battle.pk).update(status=status)
    client = Client()
    client.force_login(researcher)
    found: dict[str, list[str]] = {}
    wider: dict[str, int] = {}
    for size, width, page in logged_in_pages(browser_page, live_server, client):
        for name in ("study_detail", "arena_settings"):
            page.goto(live_server.url + reverse(name, args=[study.pk]))
            assert "/accounts/login/" not in page.url
            found[f"{name} [{size}]"] = serious(page)
            wider[f"{name} [{size}]"] = page.evaluate("document.scrollingElement.scrollWidth")
        # refused: a number out of range, a line too long, too many categories
        page.fill("#id_samples", "11")
        page.fill("#id_starters", "fine\n" + "x" * (setup.MAX_PROMPT_CHARS + 1))
        page.fill("#id_categories", "\n".join(f"c{i}" for i in range(setup.MAX_CATEGORIES + 1)))
        page.evaluate("document.querySelector('[data-testid=arena-settings]').noValidate = true")  # the server's
        page.get_by_role("button", name="Save arena settings").click()
        page.get_by_test_id("arena-settings-problems").wait_for()
        assert page.get_by_text("Line 2 has").is_visible()
        found[f"arena_settings refused [{size}]"] = serious(page)
        wider[f"arena_settings refused [{size}]"] = page.evaluate("document.scrollingElement.scrollWidth")
        for name in [n for n in wider if n.endswith(f"[{size}]")]:
            if wider[name] <= width:
                del wider[name]
    assert found == {name: [] for name in found}
    assert wider == {}


@pytest.mark.slow(seconds=15)
def test_a_conversations_rating_page_preview_and_item_page_at_both_sizes(browser_page, live_server, researcher) -> None:
    """A study of conversation items (annotation/conversations.py), one of them long, in German for its raters: the
    rating page, the crowd preview and the item page under axe at desktop and phone sizes, none wider than the
    screen, the judged turn shown."""
    from annotation.models import Item

    chat = [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "How do I list Python files?"},
        {"role": "assistant", "content": LONG},
        {"role": "user", "content": "And recursively?"},
    ]
    lines = [
        {"id": "chat-long", "messages": chat, "outputs": {"a": [LONG], "b": ["Use `glob('**/*.py')`."]}},
        {"id": "chat-short", "messages": chat[1:2], "outputs": {"a": ["Use glob."], "b": ["ls *.py"]}},
    ]
    study = creation.do_create_study(
        researcher, "axe-chats", "".join(json.dumps(x) + "\n" for x in lines).encode(), "c.jsonl"
    )
    lifecycle.do_update_settings(study, {"raters_per_item": 3, "raters_language": "de"}, None)
    client = Client()
    client.force_login(researcher)
    item = Item.objects.get(study=study, external_id="chat-long")
    link = sites.do_create_external_link(study, "mturk")
    found: dict[str, list[str]] = {}
    wider: dict[str, int] = {}
    for size, (width, height) in SIZES.items():
        context = browser_page.new_context(viewport={"width": width, "height": height})
        context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_server.url}])
        page = context.new_page()
        rater = enrolment.do_create_rater_link(study, f"reader-{size}")
        page.goto(live_server.url + rater.link_path())
        page.get_by_role("button", name="Mit dem Bewerten beginnen").click()
        page.locator("#rating-form").wait_for()
        assert page.get_by_test_id("judged-turn").is_visible()
        urls = {
            "rating page": None,
            "mturk preview": link.path() + "?assignmentId=ASSIGNMENT_ID_NOT_AVAILABLE&hitId=h",
            "item page": reverse("item_detail", args=[study.pk, item.pk]),
        }
        for name, url in urls.items():
            if url is not None:
                page.goto(live_server.url + url)
            assert page.get_by_test_id("judged-turn").count() == 1, name
            found[f"{name} [{size}]"] = serious(page)
            scrolled = page.evaluate("document.scrollingElement.scrollWidth")
            if scrolled > width:
                wider[f"{name} [{size}]"] = scrolled
        context.close()
    assert found == {name: [] for name in found}
    assert wider == {}
