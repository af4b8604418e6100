"""Raters in their own language: every page a rater sees speaks the study's language (or their browser's),
SepLab's own words only -- the researcher's texts are shown as written -- and no English UI string escapes the German
catalogue, which is complete and compiled (locale/de/LC_MESSAGES)."""

from __future__ import annotations

import ast
import gettext
import html
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from annotation import questions
from annotation.models import Assignment, BlockedWorker, ExternalLink, GoldPair, Study
from annotation.rating import practice
from annotation.studies import enrolment, lifecycle
from tests.conftest import found

CATALOGUE = Path(settings.BASE_DIR) / "locale" / "de" / "LC_MESSAGES"

# The researcher's own words, written in German as a German study's researcher would: shown as written.
RESEARCHER = {
    "question": "Welche Antwort ist hilfreicher?",
    "instructions": "Lesen Sie beide Antworten sorgfältig.",
    "consent_text": "Ihre Antworten werden anonym ausgewertet.",
    "tie_label": "Kein Unterschied",
    "neither_option": True,
    "neither_label": "Beide sind schlecht",
    "allow_skip": True,
    "allow_comment": True,
    "further_questions": "warum | optional rationale | Warum?\nsicher | forced_choice | Welche ist harmloser?",
}


# --------------------------------------------------------------------------------------------------------------
# The catalogue


def po_entries() -> list[dict]:
    """The German .po file's entries: msgctxt, msgid, msgid_plural, msgstr (a list: one per plural form), flags."""
    entries = []
    for block in (CATALOGUE / "django.po").read_text(encoding="utf-8").strip().split("\n\n"):
        entry: dict = {"flags": "", "msgctxt": None, "msgid": None, "msgid_plural": None, "msgstr": []}
        field = None
        for line in block.splitlines():
            if line.startswith("#,"):
                entry["flags"] += line
            elif line.startswith("#"):
                continue
            elif match := re.match(r'^(msgctxt|msgid_plural|msgid|msgstr(?:\[\d+\])?) (".*")$', line):
                field, text = match.group(1), ast.literal_eval(match.group(2))
                if field.startswith("msgstr"):
                    entry["msgstr"].append(text)
                else:
                    entry[field] = text
            elif line.startswith('"'):
                assert field is not None, f"a continued line before any field: {line}"
                if field.startswith("msgstr"):
                    entry["msgstr"][-1] += ast.literal_eval(line)
                else:
                    entry[field] += ast.literal_eval(line)
        entries.append(entry)
    return [e for e in entries if e["msgid"]]  # without the header


def test_the_german_catalogue_is_complete_and_nothing_in_it_is_fuzzy():
    entries = po_entries()
    assert len(entries) > 100
    untranslated = [e["msgid"] for e in entries if not all(s.strip() for s in e["msgstr"])]
    fuzzy = [e["msgid"] for e in entries if "fuzzy" in e["flags"]]
    assert untranslated == [] and fuzzy == []
    plural = [e for e in entries if e["msgid_plural"]]
    assert plural and all(len(e["msgstr"]) == 2 for e in plural)


def test_the_committed_mo_file_is_the_compiled_po_file():
    """Nothing is compiled at run time: the .mo in the repository holds exactly the .po's translations."""
    with open(CATALOGUE / "django.mo", "rb") as file:
        compiled = gettext.GNUTranslations(file)._catalog
    for entry in po_entries():
        key = entry["msgid"] if entry["msgctxt"] is None else f"{entry['msgctxt']}\x04{entry['msgid']}"
        if entry["msgid_plural"]:
            assert [compiled[(key, n)] for n in range(len(entry["msgstr"]))] == entry["msgstr"]
        else:
            assert compiled[key] == entry["msgstr"][0]


def _words(text: str) -> set[str]:
    text = re.sub(r"%\(\w+\)[sd]|<[^>]+>", " ", text)
    return {w.lower() for w in re.findall(r"[A-Za-zÄÖÜäöüß]+", text)}


def english_words() -> set[str]:
    """Every word of SepLab's English rater strings that German never uses (so "in", "was" or "Code" don't count)."""
    entries = po_entries()
    english = set().union(*(_words(e["msgid"] + " " + (e["msgid_plural"] or "")) for e in entries))
    german = set().union(*(_words(" ".join(e["msgstr"])) for e in entries))
    return english - german - {"seplab"}


def test_the_word_list_holds_the_english_ui_words():
    words = english_words()
    assert {"pair", "please", "submit", "thank", "your", "the", "skip", "answer", "assignment"} <= words
    assert "prolific" not in words and "in" not in words  # the same in both languages


# --------------------------------------------------------------------------------------------------------------
# The pages


@pytest.fixture
def german(study) -> Study:
    """A study whose raters read German, with every step a rater can meet: consent, practice, skip, comment, a tie
    and "both are bad", further questions."""
    for i in range(3):
        GoldPair.objects.create(
            study=study, input=f"Goldeingabe {i}.", good_output=f"Gute Antwort {i}.", bad_output=f"Antwort {i} gute."
        )
    return lifecycle.do_update_settings(study, {**RESEARCHER, "raters_language": "de", "practice_pairs": 2}, None)


def researcher_texts(study: Study) -> list[str]:
    """What the page shows that is not SepLab's: the researcher's settings, the study's inputs, outputs and gold
    pairs, its name, codes and ids."""
    study.refresh_from_db()
    texts = [
        getattr(study, name)
        for name in (
            "question",
            "response_set_question",
            "also_acceptable_question",
            "instructions",
            "consent_text",
            "tie_label",
            "neither_label",
            "name",
        )
    ]
    texts += [q.text for q in questions.further(study)] + [v for v in RESEARCHER.values() if isinstance(v, str)]
    for item in study.items.prefetch_related("generations"):
        texts += [item.input, item.external_id, *(g.text for g in item.generations.all())]
    for gold in study.gold_pairs.all():
        texts += [gold.input, gold.good_output, gold.bad_output]
    texts += list(Assignment.objects.filter(study=study).values_list("completion_code", flat=True))
    texts += list(ExternalLink.objects.filter(study=study).values_list("screened_code", flat=True))
    return sorted(filter(None, texts), key=len, reverse=True)  # longest first: a text inside another goes with it


def visible_text(page: str) -> str:
    """What a reader meets on the page: its text, its title and the labels read aloud (aria-label)."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    page = re.sub(r"<kbd>[a-z]</kbd>", " ", page)  # a further question's key is a letter to press, not a word
    labels = " ".join(re.findall(r'aria-label="([^"]*)"', page))
    return html.unescape(re.sub(r"<[^>]+>", " ", page) + " " + labels)


def escaped_english(page: str, study: Study) -> set[str]:
    text = visible_text(page)
    for own in researcher_texts(study):
        text = text.replace(own, " ")
    return {w for w in re.findall(r"[A-Za-zÄÖÜäöüß]+", text) if w.lower() in english_words()}


def _start(client, rater) -> str:
    """The rater agrees, practises (one right, one wrong answer) and starts: their rating page's URL."""
    token = rater.token()
    client.post(reverse("rater_consent", args=[token]), {"consent": "agree"})
    url = reverse("rater_practice", args=[token])
    for _ in range(2):
        gold = int(found(r'name="gold" value="(\d+)"', client.get(url).content.decode()).group(1))
        client.post(url, {"gold": gold, "choice": "first"})
    return client.post(reverse("rater_start", args=[token]))["Location"]


def _submit(client, url: str, page: str, **answer):
    fields = {n: found(rf'name="{n}" value="([^"]*)"', page).group(1) for n in ("pair", "key")}
    return client.post(url.rstrip("/") + "/submit/", {**fields, "q-sicher-choice": "first", **answer})


def rater_pages(client, study: Study) -> dict[str, tuple[str, int]]:
    """Every page a rater can see, as (html, status), through HTTP."""
    pages = {}

    def keep(name, response):
        pages[name] = (response.content.decode(), response.status_code)
        return pages[name][0]

    rater = enrolment.do_create_rater_link(study, "rater-de")
    token = rater.token()
    keep("welcome", client.get(reverse("rater_home", args=[token])))
    keep("consent", client.get(reverse("rater_consent", args=[token])))
    keep("declined", client.post(reverse("rater_consent", args=[token]), {"consent": "decline"}))
    client.post(reverse("rater_consent", args=[token]), {"consent": "agree"})
    url = reverse("rater_practice", args=[token])
    page = keep("practice", client.get(url))
    gold = int(found(r'name="gold" value="(\d+)"', page).group(1))
    keep("practice answer refused", client.post(url, {"gold": gold}))
    right = "first" if practice.good_first(rater, gold) else "second"
    client.post(url, {"gold": gold, "choice": right})
    keep("practice feedback (right)", client.get(url, {"feedback": gold}))
    page = client.get(url).content.decode()
    gold = int(found(r'name="gold" value="(\d+)"', page).group(1))
    wrong = "second" if practice.good_first(rater, gold) else "first"
    keep("practice feedback (wrong, last)", client.post(url, {"gold": gold, "choice": wrong}, HTTP_HX_REQUEST="true"))
    keep("practice over", client.get(url))
    rate_url = client.post(reverse("rater_start", args=[token]))["Location"]
    page = keep("rating", client.get(rate_url))
    keep("rating: no answer", _submit(client, rate_url, page))
    keep("rating: no skip reason", _submit(client, rate_url, page, skip="1"))
    _submit(client, rate_url, page, choice="first", comment="Gut.")
    page = keep("rating: the next pair", client.get(rate_url))
    revise = found(r"\?revise=(\d+)", page).group(1)
    keep("rating: revising", client.get(rate_url, {"revise": revise}))
    _submit(client, rate_url, page, skip="1", skip_reason="other")
    page = keep("rating: after skipping the item", client.get(rate_url))  # its other pairs go with it
    while 'name="key"' in page:
        _submit(client, rate_url, page, choice="tie")
        page = client.get(rate_url).content.decode()
    keep("completion", client.get(rate_url))
    keep("welcome back", client.get(reverse("rater_home", args=[token])))

    paused = _start(client, enrolment.do_create_rater_link(study, "rater-paused"))
    expired = _start(client, enrolment.do_create_rater_link(study, "rater-expired"))
    Assignment.objects.filter(pk=int(expired.rstrip("/").rsplit("/", 1)[1])).update(status=Assignment.Status.EXPIRED)
    keep("expired", client.get(expired))
    lifecycle.do_set_status(study, Study.Status.PAUSED)
    keep("paused", client.get(paused))
    keep("paused: welcome", client.get(reverse("rater_home", args=[token])))
    keep("paused: start", client.post(reverse("rater_start", args=[token])))
    lifecycle.do_set_status(study, Study.Status.ACTIVE)

    mturk = ExternalLink.objects.create(study=study, platform="mturk")
    generic = ExternalLink.objects.create(study=study, platform="generic")
    keep("crowd preview", client.get(mturk.path(), {"assignmentId": "ASSIGNMENT_ID_NOT_AVAILABLE", "hitId": "H1"}))
    keep("crowd: a placeholder worker id", client.get(generic.path(), {"worker_id": "WORKER_ID"}))
    keep("crowd: no worker id", client.get(generic.path()))
    keep("crowd: consent", client.get(generic.path(), {"worker_id": "G-1"}))
    keep("crowd: declined", client.post(generic.path() + "?worker_id=G-1", {"consent": "decline"}))
    BlockedWorker.objects.create(owner=study.owner, platform="generic", worker_id="G-2")
    keep("crowd: blocked", client.get(generic.path(), {"worker_id": "G-2"}))

    enrolment.do_set_open_link(study, True)
    keep("open link: consent", client.get(study.open_link_path()))
    keep("open link: declined", client.post(study.open_link_path(), {"consent": "decline"}))
    lifecycle.do_update_settings(study, {"consent_text": ""}, None)
    keep("open link", client.get(study.open_link_path()))
    from annotation.ratelimit import allow, client_key

    for _ in range(30):  # the network's joins of the hour, used up
        allow(f"open-link:{client_key('127.0.0.1')}", 30, 3600)
    keep("open link: too many attempts", client.post(study.open_link_path()))
    keep("not found", client.get("/r/no-such-link/", HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9"))  # no study to ask
    return pages


# What each page says in German (a phrase of SepLab's own, beside the researcher's texts).
GERMAN = {
    "welcome": "Mit dem Bewerten beginnen",
    "consent": "Ich stimme zu",
    "declined": "Sie haben nicht zugestimmt",
    "practice": "Übungspaar 1 von 2",
    "practice answer refused": "Wählen Sie vor dem Absenden eine der Optionen.",
    "practice feedback (right)": "Richtig",
    "practice feedback (wrong, last)": "Nicht ganz",
    "practice over": "Übung abgeschlossen",
    "rating": "Paar 1 von 5",
    "rating: no answer": "Wählen Sie vor dem Absenden eine der Optionen.",
    "rating: no skip reason": "Wählen Sie aus, warum Sie diesen Eintrag überspringen.",
    "rating: the next pair": "Meine Antwort zu Paar 1 ändern",
    "rating: revising": "Sie ändern Ihre Antwort zu Paar 1.",
    "rating: after skipping the item": "Auftrag abgeschlossen",
    "completion": "Auftrag abgeschlossen",
    "welcome back": "Sie haben 1 Auftrag erledigt. Vielen Dank!",
    "expired": "Dieser Auftrag ist abgelaufen",
    "paused": "Die Bewertung ist pausiert",
    "paused: welcome": "Die Studienleitung hat die Bewertung pausiert.",
    "paused: start": "Die Studienleitung hat diese Studie pausiert.",
    "crowd preview": "So sieht ein Paar aus",
    "crowd: a placeholder worker id": "Dieser Link enthält noch den Platzhalter",
    "crowd: no worker id": "Dem Link fehlt worker_id",
    "crowd: consent": "Bevor Sie beginnen",
    "crowd: declined": "Bitte geben Sie die Aufgabe auf der Plattform zurück",
    "crowd: blocked": "Diese Aufgabe ist für Ihr Konto nicht verfügbar.",
    "open link": "Teilnehmen und beginnen",
    "open link: consent": "Ich stimme zu",
    "open link: declined": "es wurde nichts über Sie gespeichert",
    "open link: too many attempts": "bitte warten Sie 60 Minuten",
    "not found": "Seite nicht gefunden",
}


@pytest.fixture
def pages(client, german) -> dict[str, tuple[str, int]]:
    return rater_pages(client, german)


def test_every_rater_page_speaks_the_studys_language(pages):
    assert set(pages) == set(GERMAN)
    for name, (page, status) in pages.items():
        assert status < 500 or name.startswith("paused"), name
        assert '<html lang="de">' in page or "<html" not in page, name  # an htmx fragment has no <html>
        assert GERMAN[name] in html.unescape(page), name


def test_the_rating_page_offers_its_options_and_reasons_in_german(pages):
    page = html.unescape(pages["rating"][0])
    for words in (
        "Ausgabe 1",
        "Ausgabe 2",
        "Eingabe",
        "Absenden",
        "Kommentar hinzufügen",
        "Warum?",
        "Ein anderer Grund",
        "Anleitung",
        "noch etwa",
        "Quelltext anzeigen",
        "Eingabetaste",
    ):
        assert words in page, words
    # the researcher's own labels and questions, as written
    for own in ("Welche Antwort ist hilfreicher?", "Kein Unterschied", "Beide sind schlecht", "Welche ist harmloser?"):
        assert own in page
    welcome = html.unescape(pages["welcome"][0])
    assert "Jeder Auftrag:" in welcome and "5 Paare" in welcome and "Tastatur:" in welcome
    # what the page's scripts say, handed to them in German: a wide code block's or table's label, "Copied"
    assert 'data-code-label="Code (seitlich scrollbar)"' in page and 'data-table-label="Tabelle (seitlich' in page
    assert 'data-copied="Kopiert"' in html.unescape(pages["completion"][0])
    assert pages["open link: too many attempts"][1] == 429 and pages["not found"][1] == 404


def test_a_page_that_does_not_exist_speaks_the_browsers_language(client):
    english = client.get("/r/no-such-link/", HTTP_ACCEPT_LANGUAGE="en")
    assert english.status_code == 404 and "Page not found" in english.content.decode()
    assert "Accept-Language" in english["Vary"]
    api = client.get("/api/no-such-thing/", HTTP_ACCEPT_LANGUAGE="de")
    assert api.status_code == 404 and api.json() == {"detail": "Not found."}


def test_the_researchers_preview_shows_the_rating_page_in_the_raters_language(researcher_client, german):
    page = researcher_client.get(reverse("study_preview", args=[german.pk])).content.decode()
    assert '<html lang="de">' in page and "Vorschau aus Sicht der Bewertenden." in html.unescape(page)
    study_page = researcher_client.get(reverse("study_detail", args=[german.pk])).content.decode()
    assert '<html lang="en' in study_page  # the researcher's own pages stay in English


@pytest.mark.slow(seconds=6)
def test_no_rater_string_escapes_the_translation(pages, german):
    escaped = {name: escaped_english(page, german) for name, (page, _) in pages.items()}
    assert {name: words for name, words in escaped.items() if words} == {}


def test_the_escape_check_finds_english(german):
    """The check above is not blind: an English page of the same study fails it."""
    Study.objects.filter(pk=german.pk).update(raters_language="en")
    german.refresh_from_db()
    from django.test import Client

    rater = enrolment.do_create_rater_link(german, "rater-en")
    page = Client().get(reverse("rater_home", args=[rater.token()])).content.decode()
    assert '<html lang="en">' in page
    assert {"start", "rating", "each", "assignment"} <= {w.lower() for w in escaped_english(page, german)}


@pytest.mark.parametrize(
    "mode, options",
    [
        ("response_set", ("Ausgabe 1", "Ausgabe 2")),
        ("paired", ("Ausgabe 1 ist akzeptabel", "Ausgabe 2 ist akzeptabel")),
        (
            "preference_scale",
            (
                "Ausgabe 1 ist viel besser",
                "Ausgabe 1 ist besser",
                "Etwa gleich gut",
                "Ausgabe 2 ist besser",
                "Ausgabe 2 ist viel besser",
            ),
        ),
    ],
)
def test_every_answer_mode_speaks_german(client, study, mode, options):
    lifecycle.do_update_settings(study, {"elicitation": mode, "raters_language": "de"}, None)
    rater = enrolment.do_create_rater_link(study, f"rater-{mode}")
    start = client.post(reverse("rater_start", args=[rater.token()]))
    page = html.unescape(client.get(start["Location"]).content.decode())
    for option in options:
        assert option in page
    refused = client.post(
        start["Location"] + "submit/",
        {
            "pair": found(r'name="pair" value="(\d+)"', page).group(1),
            "key": found(r'name="key" value="([^"]*)"', page).group(1),
        },
    )
    assert refused.status_code == 400
    assert not escaped_english(refused.content.decode(), study)


# --------------------------------------------------------------------------------------------------------------
# The browser's language


@pytest.fixture
def rater_link(study) -> str:
    return reverse("rater_home", args=[enrolment.do_create_rater_link(study, "rater-browser").token()])


def test_by_default_raters_read_the_language_their_browser_asks_for(client, study, rater_link):
    assert study.raters_language == ""  # the rater's browser
    german = client.get(rater_link, HTTP_ACCEPT_LANGUAGE="de-DE,de;q=0.9,en;q=0.8")
    assert '<html lang="de">' in german.content.decode() and "Mit dem Bewerten beginnen" in german.content.decode()
    assert german["Content-Language"] == "de" and "Accept-Language" in german["Vary"]
    english = client.get(rater_link, HTTP_ACCEPT_LANGUAGE="en-GB,en;q=0.9")
    assert '<html lang="en">' in english.content.decode() and "Start rating" in english.content.decode()


def test_a_language_not_shipped_falls_back_to_one_that_is(client, rater_link):
    french_first = client.get(rater_link, HTTP_ACCEPT_LANGUAGE="fr-FR,fr;q=0.9,de;q=0.5").content.decode()
    assert "Mit dem Bewerten beginnen" in french_first  # German is the first the browser accepts that we ship
    japanese = client.get(rater_link, HTTP_ACCEPT_LANGUAGE="ja").content.decode()
    assert "Start rating" in japanese


def test_the_studys_language_wins_over_the_browsers(client, study, rater_link):
    lifecycle.do_update_settings(study, {"raters_language": "en"}, None)
    page = client.get(rater_link, HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert "Start rating" in page and '<html lang="en">' in page
    lifecycle.do_update_settings(study, {"raters_language": "de"}, None)
    response = client.get(rater_link, HTTP_ACCEPT_LANGUAGE="en")
    assert "Mit dem Bewerten beginnen" in response.content.decode()
    assert "Accept-Language" not in response.get("Vary", "")  # the study decides, not the browser


def test_a_rater_page_in_german_leaves_researcher_pages_in_english(client, researcher_client, study, rater_link):
    lifecycle.do_update_settings(study, {"raters_language": "de"}, None)
    assert "Mit dem Bewerten beginnen" in client.get(rater_link).content.decode()
    page = researcher_client.get(reverse("study_detail", args=[study.pk]), HTTP_ACCEPT_LANGUAGE="de").content.decode()
    assert '<html lang="en' in page and "Bewert" not in page


def test_the_researcher_chooses_the_raters_language_on_the_settings_page(researcher_client, study, rater_link):
    from tests.annotation.test_views import settings_form

    page = researcher_client.get(reverse("study_settings", args=[study.pk])).content.decode()
    assert "Raters&#x27; language" in page or "Raters' language" in page
    assert '<option value="de">German</option>' in page
    response = researcher_client.post(reverse("study_settings", args=[study.pk]), settings_form(raters_language="de"))
    assert response.status_code == 302
    study.refresh_from_db()
    assert study.raters_language == "de"
    assert "Mit dem Bewerten beginnen" in researcher_client.get(rater_link).content.decode()


def test_seplabs_default_words_are_the_studys_defaults_and_reach_german_raters(client, study):
    """A study that keeps SepLab's default question, labels and instructions shows them to German raters in German
    (and the box's "continues below"); one whose researcher changed a text shows that text as written."""
    from annotation import rater_words

    fields = ("question", "tie_label", "neither_label", "also_acceptable_question", "response_set_question")
    defaults = {name: Study._meta.get_field(name).default for name in (*fields, "instructions")}
    assert set(defaults.values()) <= rater_words.DEFAULT_WORDS  # one list, the models' own defaults
    Study.objects.filter(pk=study.pk).update(**defaults, raters_language="de", neither_option=True)
    study.refresh_from_db()
    rater = enrolment.do_create_rater_link(study, "rater-defaults")
    welcome = html.unescape(client.get(reverse("rater_home", args=[rater.token()])).content.decode())
    assert "Sie sehen eine Eingabe und zwei Ausgaben" in welcome and "You will see an input" not in welcome
    start = client.post(reverse("rater_start", args=[rater.token()]))
    page = html.unescape(client.get(start["Location"]).content.decode())
    for words in ("Welche Ausgabe ist besser?", "Keine Präferenz", "Beide sind schlecht", "↓ geht unten weiter"):
        assert words in page, words
    for english in ("Which output is better?", "No preference", "Both are bad", "continues below"):
        assert english not in page, english
    # a researcher's own question is shown as written
    Study.objects.filter(pk=study.pk).update(question="Which output is better?!")
    page = html.unescape(client.get(start["Location"]).content.decode())
    assert "Which output is better?!" in page
