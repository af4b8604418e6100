"""Managing a study from the browser: pause / resume / archive, delete, duplicate, and every link revoked or
rotated with immediate effect on raters who already hold it; bulk links; the public base URL; copy buttons."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from annotation.crowd import sites
from annotation.models import ExternalLink, Generation, Judgment, Rater, Study
from annotation.rating import allocation, imports
from annotation.studies import lifecycle
from tests.conftest import answer_all, found


def rate_url(rater: Rater, assignment) -> str:
    return reverse("rate", args=[rater.token(), assignment.pk])


def submit(client, url: str, page: str, key: str = "k1"):
    pair = found(r'name="pair" value="(\d+)"', page).group(1)
    return client.post(url + "submit/", {"pair": pair, "key": key, "choice": "first"})


def test_pause_keeps_the_answer_on_screen_and_stops_new_work(researcher_client, client, study, rater):
    assignment = allocation.do_start_assignment(rater)
    page = client.get(rate_url(rater, assignment)).content.decode()
    researcher_client.post(reverse("study_status", args=[study.pk]), {"status": "paused"})
    # the pair already on the rater's screen: the answer is stored once, then the rater sees the pause
    done = client.post(
        rate_url(rater, assignment) + "submit/",
        follow=True,
        data={"pair": found(r'name="pair" value="(\d+)"', page).group(1), "key": "k1", "choice": "first"},
    )
    assert Judgment.objects.filter(rater=rater).count() == 1
    assert 'data-testid="paused"' in done.content.decode()
    assert 'data-testid="paused"' in client.get(rate_url(rater, assignment)).content.decode()
    assert client.post(reverse("rater_start", args=[rater.token()])).status_code == 503
    assert b"Rating is paused" in client.get(reverse("rater_home", args=[rater.token()])).content
    Study.objects.filter(pk=study.pk).update(open_link_enabled=True)
    assert client.get(study.open_link_path()).status_code == 503
    link = sites.do_create_external_link(study, "generic")
    assert client.get(link.path(), {"worker_id": "G1"}).status_code == 503
    assert 'data-testid="paused-notice"' in researcher_client.get(study.get_absolute_url()).content.decode()
    researcher_client.post(reverse("study_status", args=[study.pk]), {"status": "active"})
    resumed = client.get(rate_url(rater, assignment)).content.decode()
    assert 'data-testid="paused"' not in resumed and "Pair 2 of" in resumed


def test_archive_hides_the_study_and_stops_rating(researcher_client, client, study, rater):
    researcher_client.post(reverse("study_status", args=[study.pk]), {"status": "archived"})
    listing = researcher_client.get(reverse("study_list")).content.decode()
    assert study.get_absolute_url() not in listing and "Show 1 archived" in listing
    assert study.get_absolute_url() in researcher_client.get(reverse("study_list") + "?archived=1").content.decode()
    assert client.post(reverse("rater_start", args=[rater.token()])).status_code == 503
    bad = researcher_client.post(reverse("study_status", args=[study.pk]), {"status": "gone"}, follow=True)
    assert "status: &#x27;gone&#x27; is not one of" in bad.content.decode()


def test_delete_offers_the_exports_and_needs_the_name(researcher_client, study, rater):
    answer_all(allocation.do_start_assignment(rater))
    url = reverse("study_delete", args=[study.pk])
    page = researcher_client.get(url).content.decode()
    assert reverse("judgments_export", args=[study.pk, "jsonl"]) in page and "5 judgments" in page
    wrong = researcher_client.post(url, {"confirm": "not it"})
    assert wrong.status_code == 400 and Study.objects.filter(pk=study.pk).exists()
    assert researcher_client.post(url, {"confirm": study.name}).status_code == 302
    assert not Study.objects.filter(pk=study.pk).exists() and not Judgment.objects.exists()


def test_duplicate_copies_items_outputs_and_settings_but_no_people(researcher_client, study, rater):
    answer_all(allocation.do_start_assignment(rater))
    study.analysis_settings.elo_k = 12
    study.analysis_settings.save()
    lifecycle.do_update_settings(study, {"question": "Which summary is better?"}, None)
    response = researcher_client.post(reverse("study_duplicate", args=[study.pk]), {"name": "small again"})
    copy = Study.objects.get(name="small again")
    assert response["Location"] == copy.get_absolute_url()
    assert copy.items.count() == study.items.count() == 4
    assert Generation.objects.filter(item__study=copy).count() == Generation.objects.filter(item__study=study).count()
    assert copy.analysis_settings.elo_k == 12 and copy.question == "Which summary is better?"
    assert copy.judgments_per_assignment == study.judgments_per_assignment and copy.seed == study.seed
    assert not copy.raters.exists() and not copy.judgments.exists()
    assert copy.tasks.count() == study.tasks.count()  # the plan, built afresh from the same settings and seed
    taken = researcher_client.post(reverse("study_duplicate", args=[study.pk]), {"name": "small again"})
    assert taken.status_code == 400 and "already have a study named" in taken.content.decode()


def test_revoking_and_rotating_a_personal_link_stop_the_rater_at_once(researcher_client, client, study, rater):
    assignment = allocation.do_start_assignment(rater)
    old = rate_url(rater, assignment)
    page = client.get(old).content.decode()
    researcher_client.post(reverse("rater_link", args=[study.pk, rater.pk, "revoke"]))
    assert client.get(old).status_code == 404
    assert submit(client, old, page).status_code == 404  # the open page's submit is refused too
    assert not Judgment.objects.exists()
    assert 'data-testid="revoked"' in researcher_client.get(study.get_absolute_url()).content.decode()
    researcher_client.post(reverse("rater_link", args=[study.pk, rater.pk, "rotate"]))
    rater.refresh_from_db()
    assert client.get(old).status_code == 404
    assert client.get(rate_url(rater, assignment)).status_code == 200  # the new link continues the assignment


def test_closing_or_rotating_the_open_link_stops_raters_who_joined(researcher_client, client, study):
    researcher_client.post(reverse("open_link_toggle", args=[study.pk]), {"enabled": "1"})
    study.refresh_from_db()
    joined = client.post(study.open_link_path())
    rating = joined["Location"]
    assert client.get(rating).status_code == 200
    researcher_client.post(reverse("open_link_toggle", args=[study.pk]), {"enabled": "0"})
    assert client.get(rating).status_code == 404
    researcher_client.post(reverse("open_link_toggle", args=[study.pk]), {"enabled": "1"})
    old_link = study.open_link_path()
    researcher_client.post(reverse("open_link_rotate", args=[study.pk]))
    study.refresh_from_db()
    assert client.get(old_link).status_code == 404
    # the same browser comes back through the new link: the same rater, with a working link
    back = client.get(study.open_link_path())
    assert back.status_code == 302 and client.get(back["Location"]).status_code == 200
    assert Rater.objects.filter(study=study, source="open_link").count() == 1


def test_disabling_or_rotating_a_crowd_link_stops_its_workers(researcher_client, client, study):
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    arrived = client.get(link.path(), {"worker_id": "G1"})
    rating = arrived["Location"]
    assert client.get(rating).status_code == 200
    researcher_client.post(reverse("external_link_action", args=[study.pk, link.pk, "disable"]))
    assert client.get(rating).status_code == 404
    assert client.get(link.path(), {"worker_id": "G1"}).status_code == 404
    assert (
        'data-testid="link-disabled"'
        in researcher_client.get(reverse("external_links", args=[study.pk])).content.decode()
    )
    researcher_client.post(reverse("external_link_action", args=[study.pk, link.pk, "enable"]))
    again = client.get(link.path(), {"worker_id": "G1"})  # the worker resumes through the open link
    assert client.get(again["Location"]).status_code == 200
    old_path = link.path()
    researcher_client.post(reverse("external_link_action", args=[study.pk, link.pk, "rotate"]))
    link.refresh_from_db()
    assert client.get(old_path, {"worker_id": "G1"}).status_code == 404
    assert client.get(again["Location"]).status_code == 404
    assert client.get(link.path(), {"worker_id": "G1"}).status_code == 302


def test_bulk_links_all_or_nothing_as_csv(researcher_client, client, study):
    url = reverse("rater_links_bulk", args=[study.pk])
    response = researcher_client.post(url, {"names": "ann\n\nben_2\ncat\n"})
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["name", "link"] and [r[0] for r in rows[1:]] == ["ann", "ben_2", "cat"]
    for _name, link in rows[1:]:
        assert link.startswith("http://testserver/r/") and client.get(link).status_code == 200
    duplicate = researcher_client.post(url, {"names": "dan\neve\ndan"})
    assert duplicate.status_code == 400 and "line 3: &#x27;dan&#x27; is also on line 1" in duplicate.content.decode()
    existing = researcher_client.post(url, {"names": "fay\nann"})
    assert existing.status_code == 400 and "already has raters named ann" in existing.content.decode()
    assert set(study.raters.values_list("external_id", flat=True)) == {"ann", "ben_2", "cat"}


def test_the_public_base_url_builds_every_link(researcher_client, study, rater):
    lifecycle.do_update_settings(study, {"public_base_url": "https://eval.example.org"}, None)
    page = researcher_client.get(study.get_absolute_url()).content.decode()
    assert f">https://eval.example.org{rater.link_path()}</textarea>" in page  # the whole link, in its copy box
    assert 'data-copy="copy-' in page  # every link box has its copy button
    sites.do_create_external_link(study, ExternalLink.Platform.MTURK)
    crowd_page = researcher_client.get(reverse("external_links", args=[study.pk])).content.decode()
    assert "https://eval.example.org/x/" in crowd_page and "ExternalQuestion" in crowd_page
    rows = list(
        csv.reader(
            io.StringIO(
                researcher_client.post(reverse("rater_links_bulk", args=[study.pk]), {"names": "zed"}).content.decode()
            )
        )
    )
    assert rows[1][1].startswith("https://eval.example.org/r/")


def test_an_http_address_tells_the_web_user_where_to_set_https(researcher_client, study):
    sites.do_create_external_link(study, ExternalLink.Platform.MTURK)
    page = researcher_client.get(reverse("external_links", args=[study.pk])).content.decode()
    # said once, in the web's words (the command-line flag is the command's own hint)
    assert page.count("needs an https address") == 1 and "public base URL" in page and "--base-url" not in page


@pytest.mark.parametrize(
    "name, args, data",
    [
        ("study_status", [], {"status": "paused"}),
        ("study_delete", [], {"confirm": "small"}),
        ("study_duplicate", [], {"name": "stolen"}),
        ("open_link_rotate", [], {}),
        ("rater_links_bulk", [], {"names": "x"}),
    ],
)
def test_management_is_private(client, study, other_researcher, name, args, data):
    client.force_login(other_researcher)
    assert client.post(reverse(name, args=[study.pk, *args]), data).status_code == 404
    study.refresh_from_db()
    assert study.status == "active" and Study.objects.count() == 1 and not study.raters.exists()


def test_a_duplicate_and_an_import_check_the_study_name_the_same_way(researcher, researcher_client, study):
    """The duplicate once repeated the import's name check with another exception, and its view stripped a
    "name: " prefix off the message; now both call creation.check_study_name."""
    from annotation.exchange.rules import FormatError
    from annotation.studies import creation
    from tests.conftest import study_jsonl

    refusals = []
    for attempt in (
        lambda name: creation.do_create_study(researcher, name, study_jsonl(), "s.jsonl"),
        lambda name: lifecycle.do_duplicate_study(study, name),
    ):
        for name in ("  small ", "   "):
            with pytest.raises(FormatError) as refused:
                attempt(name)
            refusals.append([(p.field, p.message) for p in refused.value.problems])
    assert refusals[:2] == refusals[2:]
    assert refusals[0] == [("name", "you already have a study named 'small'; choose another name")]
    page = researcher_client.post(reverse("study_duplicate", args=[study.pk]), {"name": "small"}).content.decode()
    assert "you already have a study named &#x27;small&#x27;; choose another name" in page and "name: " not in page


def test_a_copy_whose_plan_cannot_be_built_is_refused_with_the_reason(researcher_client, study):
    """The copy has no judge verdicts, so a selection by the judges' disagreement cannot choose its items: the page
    says so (a 400), never a server error."""
    import json

    lines = [
        {
            "id": f"j{i}",
            "item": f"item-{i}",
            "system_a": "sys-a",
            "sample_a": 0,
            "system_b": "sys-b",
            "sample_b": 0,
            "shown_first": "sys-a",
            "rater": "judge-1",
            "rater_kind": "judge",
            "choice": "sys-a" if i % 2 else "sys-b",
            "created": "2026-01-01T00:00:00Z",
        }
        for i in range(4)
    ]
    imports.do_import_judgments(study, "".join(json.dumps(x) + "\n" for x in lines).encode(), "j.jsonl")
    lifecycle.do_update_settings(study, {"selection_method": "judge-disagreement", "budget": 2}, None)
    response = researcher_client.post(reverse("study_duplicate", args=[study.pk]), {"name": "copy"})
    assert response.status_code == 400 and "judge" in response.content.decode()
    assert not Study.objects.filter(name="copy").exists()  # nothing of the refused copy stays
