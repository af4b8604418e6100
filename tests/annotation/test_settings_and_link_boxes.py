"""Words and boxes from a visual check of the pages: a setting's default that is a sentence keeps its own full stop
(no "better?." or "pair.."), and every link to copy sits whole in a box that wraps it, with its copy button."""

from __future__ import annotations

import html
import re

from django.urls import reverse

from annotation.crowd import sites
from annotation.models import ExternalLink, Study


def defaults(page: str) -> list[str]:
    return [html.unescape(d) for d in re.findall(r'<span class="default">Default: (.*?)</span>', page, re.S)]


def test_a_default_that_ends_a_sentence_is_not_given_a_second_full_stop(researcher_client, study):
    page = researcher_client.get(reverse("study_settings", args=[study.pk])).content.decode()
    shown = defaults(page)
    question = Study._meta.get_field("question").default
    instructions = Study._meta.get_field("instructions").default
    assert question.endswith("?") and instructions.endswith(".")  # the two the visual check saw doubled
    assert question in shown and instructions in shown
    assert "4.0." in shown  # a number or a word still ends its sentence with one
    for text in shown:
        assert text.endswith((".", "?", "!")) and not text.endswith(("?.", "..", "!.")), text


def test_every_link_to_copy_is_shown_whole_in_a_wrapping_box_with_its_button(researcher_client, study, rater):
    link = sites.do_create_external_link(study, ExternalLink.Platform.PROLIFIC)
    pages = {
        "study": researcher_client.get(study.get_absolute_url()).content.decode(),
        "crowd": researcher_client.get(reverse("external_links", args=[study.pk])).content.decode(),
    }
    expected = {
        "study": [f"http://testserver{rater.link_path()}"],
        "crowd": [f"http://testserver{link.path()}"],
    }
    for name, page in pages.items():
        boxes = re.findall(
            r'<span class="copy-link"><textarea class="copy" id="([^"]+)" readonly rows="2" spellcheck="false" '
            r'aria-label="([^"]+)">([^<]+)</textarea><button type="button" class="copy-button" data-copy="([^"]+)" '
            r'aria-label="Copy: ([^"]+)">Copy</button></span>',
            page,
        )
        assert boxes, name
        for box_id, label, _url, target, button_label in boxes:
            assert target == box_id and button_label == label  # the button copies its own box, named alike
        urls = [html.unescape(url) for *_, url, _, _ in boxes]
        for url in expected[name]:
            assert any(u.startswith(url) for u in urls), (name, url, urls)
        assert 'class="copy" ' not in page.replace('<textarea class="copy" ', "")  # no one-line input box is left
