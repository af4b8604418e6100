"""A pair's stored decision in an arena rests on the votes that count: votes flagged after they were observed (a
repeated prompt, an unlikely rater) are taken out by deciding the pair again (a betting sequence takes no observation
back), so the pair choice reads what the board counts."""

from __future__ import annotations

from annotation import elicitation
from annotation.arena import battles
from annotation.models import Battle, Comparison
from annotation.rating import battles as rating_battles
from annotation.rating.recording import Submission
from annotation.studies import enrolment
from selection import arena
from selection.core import decisions
from selection.models import PairDecision
from tests.annotation.arena import fixtures
from tests.annotation.arena.fixtures import answered, make_arena

server = fixtures.server  # the fixture


def voted(rater, prompt: str, shown: str) -> Battle:
    battle = answered(battles.do_start_battle(rater, prompt))
    battles.do_vote(battle, Submission(key=f"vote-{battle.pk}", answer=elicitation.Answer(choice=shown)))
    return Battle.objects.get(pk=battle.pk)


def test_votes_flagged_after_they_counted_are_taken_out_of_the_pairs_decision(researcher, server):
    study = make_arena(researcher, server, labels=("red", "green"))  # one pair: every battle is red vs green
    comparison = Comparison.objects.get(study=study)
    scores = []
    kept = []
    for n in range(4):
        rater = enrolment.do_create_rater_link(study, f"rater-{n}")
        battle = voted(rater, f"Prompt number {n} about rivers?", "first")
        a_won = battle.a_shown_first  # "first" is system A's reply when A was on the left
        scores.append(1.0 if a_won else 0.0)
        kept.append(battle)
    stored = PairDecision.objects.get(comparison=comparison)
    assert (stored.judgments, stored.items) == (4, 4)

    rating_battles.do_flag_votes([kept[0].pk, kept[2].pk], "an unlikely rater")
    assert arena.do_recount_decisions(study) == 1
    stored.refresh_from_db()
    # the same as a sequence over the two votes that count, in the order they came
    sequence = decisions.BettingSequence(study.selection_settings.pair_alpha())
    for score in (scores[1], scores[3]):
        sequence.update(score)
    assert (stored.judgments, stored.items) == (2, 2)
    assert (stored.low, stored.high) == sequence.interval
    assert stored.mean == (scores[1] + scores[3]) / 2
    # nothing changed since: nothing decided again
    assert arena.do_recount_decisions(study) == 0
