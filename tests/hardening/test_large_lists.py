"""Security pass, M6: a large study made the researcher's lists and the API crawl. The study list and the API counted
a study's items and judgments in one query, ``Count(..., distinct=True)`` over a join of both tables: items ×
judgments rows (210 items and 132k judgments: minutes per page on PostgreSQL), and the API's items, judgments and
export actions found their study through the same query. Each page now runs as many queries on a study of 30 items
and 300 judgments as on one of 3 and 10 (on SQLite and on PostgreSQL, whichever this suite runs on), shows the
numbers the data has, and PostgreSQL never reads more rows for a count than the study has judgments."""

from __future__ import annotations

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotation.models import Judgment
from annotation.rating import imports
from annotation.studies import creation
from tests.conftest import study_jsonl
from tests.other_database import run_on


def judgments_file(n_items: int, n_judgments: int) -> bytes:
    """``n_judgments`` lines over ``n_items`` items: every fifth by one of two judges, the rest by three people;
    every seventh a revised answer (kept and exported, counted once on the pages)."""
    lines = []
    for k in range(n_judgments):
        judge = k % 5 == 0
        lines.append(
            json.dumps(
                {
                    "id": f"j{k}",
                    "item": f"item-{k % n_items}",
                    "system_a": "sys-a",
                    "sample_a": 0,
                    "system_b": "sys-b",
                    "sample_b": 0,
                    "shown_first": "sys-a",
                    "rater": f"judge-{k % 2}" if judge else f"person-{k % 3}",
                    "rater_kind": "judge" if judge else "human",
                    "choice": ("sys-a", "sys-b", "tie")[k % 3],
                    "revised": k % 7 == 3,
                }
            )
        )
    return ("\n".join(lines) + "\n").encode()


def expected(n_judgments: int) -> dict[str, int]:
    """What the pages should say of ``judgments_file(_, n_judgments)``, counted from its own rule."""
    kept = [k for k in range(n_judgments) if k % 7 != 3]
    return {
        "all": n_judgments,
        "human": sum(1 for k in kept if k % 5 != 0),
        "judge": sum(1 for k in kept if k % 5 == 0),
    }


def make_study(owner, name: str, n_items: int, n_judgments: int):
    study = creation.do_create_study(owner, name, study_jsonl(n_items, k=1), f"{name}.jsonl")
    imports.do_import_judgments(study, judgments_file(n_items, n_judgments), "j.jsonl")
    assert Judgment.objects.filter(study=study).count() == n_judgments
    return study


def pages(study) -> list[str]:
    item = study.items.order_by("position").first()
    return [
        reverse("study_list"),
        reverse("study_detail", args=[study.pk]),
        reverse("study_items", args=[study.pk]),
        reverse("item_detail", args=[study.pk, item.pk]),
        "/api/studies/",
        f"/api/studies/{study.pk}/",
        f"/api/studies/{study.pk}/items/",
        f"/api/studies/{study.pk}/judgments/",
        f"/api/studies/{study.pk}/judgments/?page=2",
        f"/api/studies/{study.pk}/judgments/export/?as=jsonl",
        f"/api/studies/{study.pk}/judgments/export/?as=csv",
        reverse("judgments_export", args=[study.pk, "jsonl"]),
        reverse("judgments_export", args=[study.pk, "csv"]),
    ]


def queries(client, url: str) -> tuple[int, bytes]:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
    assert response.status_code == 200, (url, response.status_code)
    return len(captured), body


@pytest.fixture
def small_and_large(client, django_user_model):
    """Two researchers, each with one study: 3 items and 110 judgments (two API pages, as the large one has at
    least) against 30 items and 300 judgments."""
    small_owner = django_user_model.objects.create_user("small-owner")
    large_owner = django_user_model.objects.create_user("large-owner")
    return make_study(small_owner, "small", 3, 110), make_study(large_owner, "large", 30, 300)


def test_every_page_runs_as_many_queries_on_a_large_study_as_on_a_small_one(client, small_and_large):
    small, large = small_and_large
    counts = {}
    for study in (small, large):
        client.force_login(study.owner)
        counts[study.name] = [queries(client, url)[0] for url in pages(study)]
    named = list(zip(pages(large), counts["small"], counts["large"], strict=True))
    assert all(s == n for _, s, n in named), [(url, s, n) for url, s, n in named if s != n]


def test_the_study_list_shows_the_numbers_the_data_has(client, django_user_model):
    owner = django_user_model.objects.create_user("owner")
    sizes = {"one": (3, 10), "two": (7, 45), "three": (30, 300)}
    for name, (n_items, n_judgments) in sizes.items():
        make_study(owner, name, n_items, n_judgments)
    creation.do_create_study(owner, "empty", study_jsonl(2, k=1), "e.jsonl")  # no judgments: zeros, not blanks
    client.force_login(owner)
    page = client.get(reverse("study_list")).content.decode()
    for name, (n_items, n_judgments) in {**sizes, "empty": (2, 0)}.items():
        row = re.search(
            rf">{name}</a></td><td[^>]*>[^<]*</td><td[^>]*>(\d+)</td><td[^>]*>(\d+)</td><td[^>]*>(\d+)</td>", page
        )
        assert row, name
        want = expected(n_judgments)
        assert tuple(map(int, row.groups())) == (n_items, want["human"], want["judge"]), name
        # the study page says the same
        study = owner.studies.get(name=name)
        detail = client.get(reverse("study_detail", args=[study.pk]))
        assert (detail.context["n_items"], detail.context["n_judgments"]) == (
            n_items,
            {"human": want["human"], "judge": want["judge"]},
        ), name


def test_the_api_shows_the_numbers_the_data_has(client, django_user_model):
    owner = django_user_model.objects.create_user("owner")
    sizes = {"one": (3, 10), "two": (30, 250)}
    studies = {name: make_study(owner, name, *size) for name, size in sizes.items()}
    client.force_login(owner)
    listed = {s["name"]: (s["n_items"], s["n_judgments"]) for s in client.get("/api/studies/").json()["results"]}
    assert listed == {name: (n_items, n_judgments) for name, (n_items, n_judgments) in sizes.items()}
    for name, (n_items, n_judgments) in sizes.items():
        study = studies[name]
        one = client.get(f"/api/studies/{study.pk}/").json()
        assert (one["n_items"], one["n_judgments"]) == (n_items, n_judgments)
        assert client.get(f"/api/studies/{study.pk}/items/").json()["count"] == n_items
        # every judgment once over the pages, in the export's order
        ids, url = [], f"/api/studies/{study.pk}/judgments/"
        while url:
            data = client.get(url).json()
            assert data["count"] == n_judgments
            ids += [line["id"] for line in data["results"]]
            url = data["next"]
        exported = client.get(f"/api/studies/{study.pk}/judgments/export/?as=jsonl")
        lines = b"".join(exported.streaming_content).decode().splitlines()
        assert ids == [json.loads(line)["id"] for line in lines] and len(set(ids)) == n_judgments


def test_a_deep_api_page_is_the_same_as_the_exports_lines(client, django_user_model):
    owner = django_user_model.objects.create_user("owner")
    study = make_study(owner, "deep", 5, 250)
    client.force_login(owner)
    exported = client.get(reverse("judgments_export", args=[study.pk, "jsonl"]))
    lines = [json.loads(line) for line in b"".join(exported.streaming_content).decode().splitlines()]
    page = client.get(f"/api/studies/{study.pk}/judgments/?page=3").json()
    fields = ("id", "item", "rater", "rater_kind", "choice", "created", "revised")
    shown = [tuple(line[f] for f in fields) for line in page["results"]]
    assert shown == [tuple(line[f] for f in fields) for line in lines[200:250]] and page["next"] is None


@pytest.mark.slow(seconds=40)
@pytest.mark.own_database
def test_postgresql_counts_never_join_items_to_judgments(tmp_path):
    """On a PostgreSQL database of its own: no step of the list's or the API's queries handles (rows × loops, by
    EXPLAIN ANALYZE) more than a few rows per judgment (a loop over the study's five raters for each judgment at
    most); counted in one query together, a step joined the 200 items to the 300 judgments: 60,000 rows."""
    result = run_on(
        "postgresql",
        """
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from tests.hardening.test_large_lists import make_study

owner = get_user_model().objects.create_user("owner")
study = make_study(owner, "big", 200, 300)
client = Client()
client.force_login(owner)

def largest(plan):
    return max([plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1)]
               + [largest(p) for p in plan.get("Plans", [])])

result = {}
for url in ["/studies/", "/api/studies/", f"/api/studies/{study.pk}/", f"/api/studies/{study.pk}/items/",
            f"/api/studies/{study.pk}/judgments/"]:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200, url
    rows = 0
    with connection.cursor() as cursor:
        for query in captured.captured_queries:
            if query["sql"].startswith("SELECT"):
                cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + query["sql"])
                plan = cursor.fetchone()[0]
                plan = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
                rows = max(rows, largest(plan))
    result[url] = rows
""",
        tmp_path,
    )
    assert all(rows <= 5 * 300 for rows in result.values()), result


def test_the_study_pages_rater_table_counts_each_table_on_its_own(researcher_client, study):
    """The raters table counted assignments, judgments and skips in one join (assignments × judgments × skips rows
    per rater); each is now a count of its own table, and the numbers are the data's."""
    from annotation.models import Assignment, Skip
    from annotation.rating import allocation, recording
    from annotation.studies import enrolment
    from tests.conftest import answer_all

    study.allow_skip = True
    study.save(update_fields=["allow_skip"])
    busy, idle = enrolment.do_create_rater_link(study, "busy"), enrolment.do_create_rater_link(study, "idle")
    for _ in range(2):
        answer_all(allocation.do_start_assignment(busy))
    third = allocation.do_start_assignment(busy)
    shown_pair = third.pairs.order_by("position").first()
    allocation.do_mark_shown(shown_pair)
    recording.do_skip_item(shown_pair, idempotency_key="s1", reason="other")  # its five pairs: done, by skips
    allocation.do_start_assignment(busy)  # the fourth item, open
    page = researcher_client.get(reverse("study_detail", args=[study.pk]))
    shown = {r.external_id: (r.completed, r.active, r.n_judgments, r.n_skipped) for r in page.context["raters"]}
    for rater in (busy, idle):
        assignments = Assignment.objects.filter(rater=rater)
        assert shown[rater.external_id] == (
            assignments.filter(status=Assignment.Status.COMPLETED).count(),
            assignments.filter(status=Assignment.Status.ACTIVE).count(),
            Judgment.objects.filter(rater=rater, revised=False).count(),
            Skip.objects.filter(rater=rater).count(),
        )
    assert shown["busy"] == (3, 1, 10, 5)
    assert shown["idle"] == (0, 0, 0, 0)


def test_the_study_list_and_the_api_count_with_one_helper(client, django_user_model, monkeypatch):
    """The study list and the API each built the same count-per-study subquery (the API a copy of its own, since
    importing the study pages' module pulled the rating wing into the API). Both now call the study model's one
    helper, on the ground floor (a copy of it elsewhere is what `duplicates` finds)."""
    from annotation.models import Study

    owner = django_user_model.objects.create_user("owner")
    make_study(owner, "one", 3, 10)
    counted: list[str] = []
    real = Study.count_per_study

    def watched(rows):
        counted.append(rows.model.__name__)
        return real(rows)

    monkeypatch.setattr(Study, "count_per_study", staticmethod(watched))
    client.force_login(owner)
    want = expected(10)
    page = client.get(reverse("study_list")).content.decode()
    assert re.search(
        rf">one</a></td><td[^>]*>[^<]*</td><td[^>]*>3</td><td[^>]*>{want['human']}</td><td[^>]*>{want['judge']}</td>",
        page,
    )
    assert counted == ["Item", "Judgment", "Judgment"]
    counted.clear()
    listed = client.get("/api/studies/").json()["results"]
    assert [(s["n_items"], s["n_judgments"]) for s in listed] == [(3, 10)] and counted == ["Item", "Judgment"]
