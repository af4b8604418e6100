"""The study page's decisions table in words: a pair the live plan has not looked at yet says when its first planned
look comes (``group_sequential.look_sizes``) instead of the trivial interval 0.00 – 1.00; without planned looks the
interval stays, kept on one line; a pair behind in the race is tagged."""

from __future__ import annotations

import math

import pytest

from annotation.models import Task
from annotation.studies import lifecycle
from tests.selection.test_planned_looks import ITEMS, looked  # noqa: F401 (a fixture)


def decisions_table(client, study) -> str:
    page = client.get(study.get_absolute_url()).content.decode()
    return page.split('data-testid="decisions"')[1].split("</table>")[0]


@pytest.mark.django_db
def test_a_pair_without_a_look_says_when_its_first_look_comes(looked, researcher_client):  # noqa: F811
    settings = looked.selection_settings
    assert settings.looks() == 5 and Task.objects.filter(study=looked).count() == 3 * ITEMS
    table = decisions_table(researcher_client, looked)
    first = math.ceil(ITEMS / 5)  # the first of five equally spaced looks at the pair's pool of ITEMS items
    assert table.count(f'<td class="no-look" data-testid="no-look-yet">no look yet (the first at {first} items)') == 3
    assert "0.00 – 1.00" not in table


@pytest.mark.django_db
def test_without_planned_looks_the_interval_stays_on_one_line(looked, researcher_client):  # noqa: F811
    lifecycle.do_update_settings(looked, {"decision_looks": 0}, None)
    table = decisions_table(researcher_client, looked)
    assert "no look yet" not in table
    assert table.count('<td class="interval">0.00 – 1.00</td>') == 3
