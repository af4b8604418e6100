"""A reply another request is asking for is never failed under it: once the other model failed, a second request for
a reply without words yet follows the one asking (a reply failed under its streamer lost its words, tokens and
cost: the streamer's last write found it final), and fails it as not asked only when no request holds it."""

from __future__ import annotations

from django.core.cache import cache

from annotation.arena import battles, streaming
from annotation.models import Battle, BattleReply
from tests.annotation.arena import fixtures

server, arena, rater = fixtures.server, fixtures.arena, fixtures.rater  # the fixtures


def test_a_reply_held_by_another_request_is_followed_not_failed(arena, rater):
    battle = battles.do_start_battle(rater, "Two rivers?")
    BattleReply.objects.filter(battle=battle, side="a").update(status=BattleReply.Status.FAILED, problem="down")
    assert battles.do_settle(battle).status == Battle.Status.FAILED
    reply_b = BattleReply.objects.get(battle=battle, side="b")
    cache.set(streaming.lease_key(reply_b), "another request", timeout=30)  # asking, no word in yet
    events = streaming.do_stream(Battle.objects.get(pk=battle.pk), "b")
    first = next(events)  # the follower's first look: the text so far (none)
    assert (first.kind, first.data) == ("text", "")
    reply_b.refresh_from_db()
    assert reply_b.status == BattleReply.Status.STREAMING  # not failed under the request asking
    # the request asking stores its reply and lets its lease go: the follower ends with it, as stored
    BattleReply.objects.filter(pk=reply_b.pk).update(status=BattleReply.Status.DONE, text="The Nile and the Amazon.")
    cache.delete(streaming.lease_key(reply_b))
    rest = list(events)
    assert [e.kind for e in rest][-1] == "done" and any("Nile" in e.data for e in rest if e.kind in ("text", "delta"))
    assert BattleReply.objects.get(pk=reply_b.pk).text == "The Nile and the Amazon."


def test_a_reply_nobody_asks_for_is_failed_as_not_asked_once_the_other_model_failed(arena, rater):
    battle = battles.do_start_battle(rater, "Two lakes?")
    BattleReply.objects.filter(battle=battle, side="a").update(status=BattleReply.Status.FAILED, problem="down")
    battles.do_settle(battle)
    events = list(streaming.do_stream(Battle.objects.get(pk=battle.pk), "b"))
    assert [e.kind for e in events] == ["failed"]
    reply_b = BattleReply.objects.get(battle=battle, side="b")
    assert reply_b.status == BattleReply.Status.FAILED and "not asked" in reply_b.problem.lower()
    assert cache.get(streaming.lease_key(reply_b)) is None  # the lease taken to fail it is given back
