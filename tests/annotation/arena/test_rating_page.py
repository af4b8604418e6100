"""An arena's vote is cast on its battle page only: the rating page's routes refuse a battle's held assignment (a
POST there once stored a judgment past the names rule and the hourly limits, the battle left waiting)."""

from __future__ import annotations

import uuid

from django.urls import reverse

from annotation.arena import battles
from annotation.models import Battle, Judgment
from tests.annotation.arena import fixtures
from tests.annotation.arena.fixtures import answered

server, arena, rater = fixtures.server, fixtures.arena, fixtures.rater  # the fixtures


def test_the_rating_page_and_its_submit_refuse_a_battles_assignment(client, arena, rater):
    battle = answered(battles.do_start_battle(rater, "Which is the tallest mountain?"))
    assert battle.status == Battle.Status.READY and battle.assignment_id is not None
    held = battle.assignment.pairs.get()
    token = rater.token()

    page = client.get(reverse("rate", args=[token, battle.assignment_id]))
    submit = client.post(
        reverse("rate_submit", args=[token, battle.assignment_id]),
        {"pair": held.pk, "key": uuid.uuid4().hex, "choice": "first"},
    )

    assert page.status_code == 404 and submit.status_code == 404
    assert not Judgment.objects.filter(study=arena).exists()  # nothing stored past the arena's rules
    battle.refresh_from_db()
    assert battle.status == Battle.Status.READY  # still the battle page's to vote on
