"""SepLab's own words among a study's texts: the defaults a study starts with (its question, option labels and
instructions; an arena's), shown to raters in their language while the researcher keeps them. A text the researcher
wrote or changed is the study's own and is shown as written (README.md, "Raters in their language")."""

from __future__ import annotations

from django.utils.translation import gettext as _


def gettext_noop(message: str) -> str:
    """A string marked for the catalogue (makemessages reads the name), as Django's, without reading the settings:
    this module is imported with the models."""
    return message


PAIR_INSTRUCTIONS = gettext_noop(
    "You will see an input and two outputs written by different systems. Read both outputs carefully and answer the "
    "question for each pair."
)
# a study whose answers cover several outputs (Study.answer_unit): lifecycle.do_update_settings puts it in place of
# the pairs' default while the researcher has not changed that, and back
RANKING_INSTRUCTIONS = gettext_noop(
    "You will see an input and several outputs written by different systems. Read them carefully, then put them in "
    "order or pick the best and the worst, as each screen asks."
)

# Each is a model field's default (annotation/models/studies.py) or an arena's (annotation/arena/setup.py);
# tests/annotation/test_rater_language.py holds them equal, and the German catalogue translates each.
DEFAULT_WORDS = frozenset(
    {
        gettext_noop("Which output is better?"),
        gettext_noop("No preference"),
        gettext_noop("Both are bad"),
        gettext_noop("Which other outputs are also acceptable?"),
        gettext_noop("Select every output you find acceptable."),
        PAIR_INSTRUCTIONS,
        RANKING_INSTRUCTIONS,
        # an arena's (setup.do_create_arena)
        gettext_noop("Which reply is better?"),
        gettext_noop("Tie"),
        gettext_noop(
            "Write a prompt of your own (or take a starter). Two anonymous models answer it side by side; you may go "
            "on with the conversation for a few turns. Then vote for the better one -- or a tie, or both bad. The "
            "models' names are shown after your vote."
        ),
    }
)


def shown(text: str) -> str:
    """``text`` in the raters' language when it is one of SepLab's defaults (``DEFAULT_WORDS``), else as is."""
    return _(text) if text in DEFAULT_WORDS else text
