"""The consent step: with a consent text set, every human rater -- own link, open link, crowd link --
agrees before their first pair; agreeing is recorded once with its time, declining stores nothing."""

from __future__ import annotations

from django.urls import reverse

from annotation.models import Assignment, ExternalLink, Judgment, Rater, WorkerSession, text_hash
from annotation.studies import lifecycle

CONSENT = "We store your **answers** only. <script>alert(1)</script>"


def ask_consent(study, text: str = CONSENT):
    return lifecycle.do_update_settings(study, {"consent_text": text}, None)


def test_without_a_consent_text_the_first_pair_comes_at_once(client, study, rater):
    response = client.post(reverse("rater_start", args=[rater.token()]))
    assert response.status_code == 302 and "/a/" in response["Location"]


def test_the_consent_page_comes_before_the_first_pair_and_renders_safe_markdown(client, study, rater):
    ask_consent(study)
    response = client.post(reverse("rater_start", args=[rater.token()]))
    assert response.status_code == 302 and response["Location"] == reverse("rater_consent", args=[rater.token()])
    assert not Assignment.objects.exists()
    page = client.get(response["Location"]).content.decode()
    assert "<strong>answers</strong>" in page and "<script>alert(1)" not in page
    assert "I agree" in page and "I do not agree" in page


def test_agreeing_is_recorded_once_with_its_time_and_leads_to_the_first_pair(client, study, rater):
    ask_consent(study)
    url = reverse("rater_consent", args=[rater.token()])
    response = client.post(url, {"consent": "agree"})
    assignment = Assignment.objects.get(rater=rater)
    assert response.status_code == 302 and response["Location"] == reverse("rate", args=[rater.token(), assignment.pk])
    rater.refresh_from_db()
    first = rater.consented_at
    assert first is not None and rater.consent_text_hash == text_hash(CONSENT)
    again = client.post(url, {"consent": "agree"})  # a double submit: nothing changes
    rater.refresh_from_db()
    assert again.status_code == 302 and rater.consented_at == first
    assert Assignment.objects.filter(rater=rater).count() == 1
    assert b"Pair 1 of 5" in client.get(reverse("rate", args=[rater.token(), assignment.pk])).content


def test_declining_shows_a_polite_page_and_stores_nothing(client, study, rater):
    ask_consent(study)
    response = client.post(reverse("rater_consent", args=[rater.token()]), {"consent": "decline"})
    assert response.status_code == 200 and b"Thank you for considering this study" in response.content
    rater.refresh_from_db()
    assert rater.consented_at is None and not Assignment.objects.exists()


def test_a_rater_who_started_before_consent_was_asked_gets_no_pair_and_answers_none_before_agreeing(
    client, study, rater
):
    start = client.post(reverse("rater_start", args=[rater.token()]))
    page = client.get(start["Location"]).content.decode()
    pair = page.split('name="pair" value="')[1].split('"')[0]
    key = page.split('name="key" value="')[1].split('"')[0]
    ask_consent(study)
    consent_url = reverse("rater_consent", args=[rater.token()])
    assert client.get(start["Location"])["Location"] == consent_url
    submitted = client.post(start["Location"] + "submit/", {"pair": pair, "key": key, "choice": "first"})
    assert submitted.status_code == 302 and submitted["Location"] == consent_url and not Judgment.objects.exists()
    htmx = client.post(
        start["Location"] + "submit/", {"pair": pair, "key": key, "choice": "first"}, HTTP_HX_REQUEST="true"
    )
    assert htmx["HX-Redirect"] == consent_url and not Judgment.objects.exists()
    client.post(consent_url, {"consent": "agree"})
    assert client.get(start["Location"]).status_code == 200


def test_the_open_link_asks_before_it_makes_a_rater_and_declining_leaves_nothing(client, study):
    study.open_link_enabled = True
    study.save()
    ask_consent(study)
    url = study.open_link_path()
    page = client.get(url)
    assert b'data-testid="consent"' in page.content and not Rater.objects.exists()
    declined = client.post(url, {"consent": "decline"})
    assert b"nothing about you was stored" in declined.content and not Rater.objects.exists()
    agreed = client.post(url, {"consent": "agree"})
    rater = Rater.objects.get()
    assert agreed.status_code == 302 and rater.consented_at is not None
    assert Assignment.objects.filter(rater=rater).exists()


def test_a_crowd_worker_agrees_before_anything_is_stored_and_only_once(client, study):
    link = ExternalLink.objects.create(study=study, platform="mturk")
    ask_consent(study)
    params = {"assignmentId": "A1", "hitId": "H1", "workerId": "W1", "turkSubmitTo": "https://workersandbox.mturk.com"}
    page = client.get(link.path(), params)
    assert b'data-testid="consent"' in page.content
    assert not (Rater.objects.exists() or WorkerSession.objects.exists() or Assignment.objects.exists())
    declined = client.post(
        page.content.decode().split('action="')[1].split('"')[0].replace("&amp;", "&"), {"consent": "decline"}
    )
    assert b"Please return the task" in declined.content
    assert not (Rater.objects.exists() or WorkerSession.objects.exists() or Assignment.objects.exists())
    agreed = client.post(f"{link.path()}?{'&'.join(f'{k}={v}' for k, v in params.items())}", {"consent": "agree"})
    worker = Rater.objects.get()
    assert agreed.status_code == 302 and "/a/" in agreed["Location"] and worker.consented_at is not None
    again = client.get(link.path(), params)  # coming back: straight to the work
    assert again.status_code == 302 and again["Location"] == agreed["Location"]


def test_the_preview_of_a_crowd_link_asks_nothing(client, study):
    link = ExternalLink.objects.create(study=study, platform="mturk")
    ask_consent(study)
    page = client.get(link.path(), {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "H1"})
    assert b"Accept the task to start" in page.content and b'data-testid="consent"' not in page.content


def test_the_consent_text_is_a_setting_on_the_settings_page_and_is_copied_by_duplicate(researcher_client, study):
    page = researcher_client.get(reverse("study_settings", args=[study.pk])).content.decode()
    assert "Consent text" in page and "Practice pairs" in page
    ask_consent(study)
    copy = lifecycle.do_duplicate_study(study, "copy")
    assert copy.consent_text == CONSENT


def test_the_consent_page_shows_the_instructions_and_starts_focus_on_the_text(client, study):
    """The open link's consent page is also its welcome page (agreeing joins and starts): it shows what raters will
    do; focus starts on the text, so one Enter does not agree to what was not read."""
    study.open_link_enabled = True
    study.save()
    ask_consent(study)
    lifecycle.do_update_settings(study, {"instructions": "Pick the **clearer** answer."}, None)
    page = client.get(study.open_link_path()).content.decode()
    assert "What you will do" in page and "<strong>clearer</strong>" in page
    text = page.split('data-testid="consent-text"')[0].rsplit("<div", 1)[1]
    assert "autofocus" in text and "autofocus" not in page.split('data-testid="consent-agree"')[0].rsplit("<", 1)[1]


def test_a_known_rater_who_declines_is_not_told_nothing_was_stored(client, study, rater):
    ask_consent(study)
    declined = client.post(reverse("rater_consent", args=[rater.token()]), {"consent": "decline"}).content.decode()
    assert "You did not agree, so you will not rate anything." in declined and "nothing about you" not in declined
