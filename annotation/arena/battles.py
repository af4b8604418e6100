"""An arena's battles (docs/arena.md#how-a-battle-is-stored): a rater's prompt starts one -- two systems drawn where
the ranking still needs votes, or every ``Arena.attention_every``-th battle an attention check -- its replies stream
(``streaming.py``), the rater may write a few more turns, and once both first replies are in the battle is settled:
each reply becomes its system's sample 0 of the prompt's item, the two a ``Pair``, and the battle holds the one-pair
assignment (``rating/battles.py``) whose judgment is the vote. The vote is checked (``abuse.py``) and recorded as the
rating page records an answer; only then are the names revealed."""

from __future__ import annotations

import dataclasses
import math
import random
import uuid
from typing import Any

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from annotation import endpoints, extensions, jobs
from annotation.arena import abuse
from annotation.arena.setup import MAX_PROMPT_CHARS
from annotation.compiled import instance, model_columns
from annotation.errors import ServiceError
from annotation.generating import samples
from annotation.models import (
    SIDES,
    Arena,
    Battle,
    BattleReply,
    Comparison,
    CrowdSettings,
    Generation,
    GenerationCall,
    GoldPair,
    Item,
    Job,
    Judgment,
    Pair,
    Rater,
    Study,
    SystemEndpoint,
    text_hash,
    word_count,
)
from annotation.models.arena import replies_off_ledger
from annotation.rating import allocation, recording
from annotation.rating import battles as rating_battles
from annotation.text import UNSTORABLE, newlines

BOARD_JOB = "arena_board"  # analytics' board refresh (analytics/arena.py registers the kind)
_RANDOM = random.SystemRandom()  # the pair, the sides and the attention check drawn: no seed a rater could replay


@dataclasses.dataclass(frozen=True)
class VoteResult:
    """What a vote came to: whether it counts, the systems' names as they were shown (left, right), in words."""

    counted: bool
    left: str
    right: str
    words: str


def check_prompt(prompt: str) -> str:
    """A rater's message as stored (one line ending, stripped); ``ServiceError`` when it is empty, longer than
    ``MAX_PROMPT_CHARS`` or holds a character no database stores."""
    text = newlines(prompt or "").strip()
    if not text:
        raise ServiceError(_("Write a prompt first."))
    if len(text) > MAX_PROMPT_CHARS:
        raise ServiceError(
            _("Your prompt has %(n)s characters; a prompt may have at most %(most)s.")
            % {"n": f"{len(text):,}", "most": f"{MAX_PROMPT_CHARS:,}"}
        )
    if UNSTORABLE.search(text):
        raise ServiceError(_("Your prompt holds a character that cannot be stored (a NUL or a broken character)."))
    return text


# ----------------------------------------------------------------------------------------------------------------
# A new battle


def do_start_battle(rater: Rater, prompt: str, *, category: str = "", client: str = "") -> Battle:
    """A new battle of the rater on ``prompt``: its ``Item`` (external id ``battle-<id>``, the prompt as input, the
    category and automatic tags in its metadata), the ``Battle`` and both sides' first replies, streaming. Its two
    systems are drawn with the arena's pair weights (``extensions.item_chooser().pair_weights``: open pairs weigh
    more), leaving out pairs with a system whose request budget is used up and, unless it is the only one, the
    rater's previous pair; every ``Arena.attention_every``-th battle of the rater is one of the study's attention
    checks instead (its input is the prompt shown, its good and bad outputs the replies, done at once; the rater's
    own prompt is kept in the item's metadata as ``typed``). ``ServiceError`` when the study is no arena or is
    paused, the rater may take no more work or has started as many battles this hour as the arena takes
    (``abuse.check_start_limits``), the prompt or category is not accepted, or no pair is left."""
    study = rater.study
    if not study.is_arena:
        raise ServiceError(_("This study is not an arena."))
    if not study.accepts_raters:
        raise ServiceError(_("This arena is paused; please come back later."))
    if rater.revoked:
        raise ServiceError(_("This rater link is no longer valid."))
    text = check_prompt(prompt)
    arena = study.arena
    category = (category or "").strip()
    if category and category not in arena.categories:
        raise ServiceError(_("Choose one of the arena's categories, or none."))
    # Before the write transaction (SQLite's one writer waits for none of it): the tags (the language model's first
    # read takes ~1 s), the crowd settings, and the pairs open to battles with their weights -- study-wide reads no
    # lock would make exact (the replies streaming now are not in the budgets' ledger yet).
    typed_tags = abuse.tags(text)
    study.crowd_settings  # noqa: B018 - read now, not under the lock (check_may_start reads it)
    open_pairs = _open_pairs(study)
    with transaction.atomic():
        # one rater's starts one at a time (and never across a hold of their earlier battle: rating/battles.py)
        fresh = Rater.objects.select_for_update().filter(pk=rater.pk).values("screened_out", "revoked").get()
        rater.screened_out, rater.revoked = fresh["screened_out"], fresh["revoked"]
        allocation.check_may_start(rater)  # screened out by the attention checks, or at the most battles
        abuse.check_start_limits(study, rater.pk, client[:64], timezone.now())  # a start costs two replies
        n = Battle.objects.filter(study=study, rater=rater).count()
        gold = _gold(study, rater) if arena.attention_every and (n + 1) % arena.attention_every == 0 else None
        comparison = None if gold is not None else _draw_pair(study, rater, open_pairs)
        shown = text if gold is None else gold.input
        tags = typed_tags if gold is None else abuse.tags(shown)
        metadata: dict[str, Any] = {"arena": True, "category": category, "tags": tags}
        if gold is not None:
            metadata.update(gold=gold.pk, typed=text)
        item = Item.objects.create(
            study=study, external_id=f"battle-new-{uuid.uuid4().hex}", input=shown, metadata=metadata, position=0
        )
        battle = Battle.objects.create(
            study=study,
            rater=rater,
            item=item,
            comparison=comparison,
            gold=gold,
            a_shown_first=_RANDOM.random() < 0.5,
            prompts=[shown],
            category=category,
            tags=tags,
            client=client[:64],
        )
        Item.objects.filter(pk=item.pk).update(external_id=f"battle-{battle.pk}", position=battle.pk)
        item.external_id, item.position = f"battle-{battle.pk}", battle.pk
        now = timezone.now()
        if gold is None:
            BattleReply.objects.bulk_create(
                BattleReply(battle=battle, side=side, turn=0, started=now) for side in SIDES
            )
        else:
            BattleReply.objects.bulk_create(
                BattleReply(
                    battle=battle,
                    side=side,
                    turn=0,
                    status=BattleReply.Status.DONE,
                    text=output,
                    started=now,
                    first_token=now,
                    finished=now,
                )
                for side, output in zip(SIDES, (gold.good_output, gold.bad_output), strict=True)
            )
    if gold is not None:
        return do_settle(battle)
    return battle


def _gold(study: Study, rater: Rater) -> GoldPair | None:
    """An attention check the rater has not met in a battle yet (any, once they met every one); None without any."""
    golds = list(study.gold_pairs.values_list("pk", flat=True))
    if not golds:
        return None
    seen = set(Battle.objects.filter(rater=rater, gold__isnull=False).values_list("gold_id", flat=True))
    chosen = _RANDOM.choice([pk for pk in golds if pk not in seen] or golds)
    return GoldPair.objects.get(pk=chosen)


def _open_pairs(study: Study) -> tuple[dict[int, Comparison], dict[int, float]]:
    """The system pairs open to a new battle (by comparison id) and their chance weights: the arena's pair weights
    (``extensions.item_chooser().pair_weights``), without the pairs of a system out of budget."""
    weights = {
        pk: float(w)
        for pk, w in extensions.item_chooser().pair_weights(study).items()
        if isinstance(w, int | float) and math.isfinite(w) and w > 0
    }
    spent = out_of_budget(study)
    pairs = {
        c.pk: c
        for c in Comparison.objects.filter(pk__in=list(weights), study=study).select_related("system_a", "system_b")
        if c.system_a_id not in spent and c.system_b_id not in spent
    }
    return pairs, weights


def _draw_pair(study: Study, rater: Rater, open_pairs: tuple[dict[int, Comparison], dict[int, float]]) -> Comparison:
    """The battle's system pair: drawn with chance proportional to its weight among ``open_pairs``
    (``_open_pairs``), never the rater's previous pair unless it is the only one (the item chooser's ``draw_pair``:
    the rule the replayed arena runs). Under the rater's lock."""
    pairs, weights = open_pairs
    if not pairs:
        raise ServiceError(
            _(
                "No two of this arena's systems can answer now (their request budgets are used up); "
                "please come back later."
            )
        )
    previous = (
        Battle.objects.filter(study=study, rater=rater, comparison__isnull=False)
        .order_by("-pk")
        .values_list("comparison_id", flat=True)
        .first()
    )
    drawn = extensions.item_chooser().draw_pair({k: weights[k] for k in sorted(pairs)}, previous)
    return pairs[drawn]


def out_of_budget(study: Study) -> set[int]:
    """The study's systems that can answer no more battles: no endpoint, or an endpoint that has received its request
    budget's replies: its ledger's (battle replies and background samples) and the battle replies off it
    (``models.arena.replies_off_ledger``: follow-up turns, failed battles)."""
    budgets = dict(SystemEndpoint.objects.filter(system__study=study).values_list("system_id", "request_budget"))
    used = dict(
        GenerationCall.objects.filter(endpoint__system__study=study)
        .values("endpoint__system_id")
        .annotate(n=Sum("replies"))
        .values_list("endpoint__system_id", "n")
    )
    for system, n in replies_off_ledger(study.pk).items():
        used[system] = (used.get(system) or 0) + n
    systems = set(study.systems.values_list("pk", flat=True))
    return {pk for pk in systems if pk not in budgets or (used.get(pk) or 0) >= budgets[pk]}


# ----------------------------------------------------------------------------------------------------------------
# Turns and the conversation


def do_add_turn(battle: Battle, prompt: str) -> int:
    """A follow-up message before the vote: the next turn's two replies (streaming). Refused after the vote, past
    ``Arena.max_turns`` messages, while the last turn is still answering or when a reply of it failed, and in an
    attention check. Returns the new turn's number."""
    text = check_prompt(prompt)
    with transaction.atomic():
        battle = Battle.objects.select_for_update(of=("self",)).select_related("study__arena").get(pk=battle.pk)
        if battle.gold_id is not None:
            raise ServiceError(_("This battle takes no follow-up: vote on the replies you see."))
        if battle.status == Battle.Status.ANSWERING:
            raise ServiceError(_("Wait for both replies before you write again."))
        if battle.status != Battle.Status.READY:
            raise ServiceError(_("This battle is over; start a new battle to go on."))
        turns = len(battle.prompts)
        last = set(BattleReply.objects.filter(battle=battle, turn=turns - 1).values_list("status", flat=True))
        if BattleReply.Status.STREAMING in last:
            raise ServiceError(_("Wait for both replies before you write again."))
        if BattleReply.Status.FAILED in last:
            raise ServiceError(_("A reply to your last message failed: vote on what you saw, or start a new battle."))
        most = battle.study.arena.max_turns
        if turns >= most:
            raise ServiceError(
                _("This battle has its %(most)d messages, the most an arena battle takes: vote now.") % {"most": most}
            )
        prompts = [*battle.prompts, text]
        Battle.objects.filter(pk=battle.pk).update(prompts=prompts)
        now = timezone.now()
        BattleReply.objects.bulk_create(
            BattleReply(battle=battle, side=side, turn=turns, started=now) for side in SIDES
        )
    return turns


def endpoint_of(battle: Battle, side: str) -> SystemEndpoint | None:
    """The endpoint of the system on ``side`` (model coordinates); None in an attention check."""
    if battle.comparison_id is None:
        return None
    comparison = Comparison.objects.get(pk=battle.comparison_id)
    system = comparison.system_a_id if side == "a" else comparison.system_b_id
    return SystemEndpoint.objects.filter(system_id=system).first()


def conversation(battle: Battle, side: str, turn: int | None = None) -> list[dict[str, str]]:
    """The side's conversation as OpenAI chat messages: its endpoint's system prompt first (when it has one), then
    the rater's messages and the side's replies alternating. With ``turn``: what is sent to ask that turn's reply
    (every earlier turn with its reply, then the turn's message); without: the whole conversation, each turn with
    the reply as stored (what the export writes)."""
    if side not in SIDES:
        raise ServiceError("A side is 'a' or 'b'.")
    prompts = list(battle.prompts) or [battle.item.input]
    last = len(prompts) - 1 if turn is None else turn
    if not 0 <= last < len(prompts):
        raise ServiceError(f"The battle has no turn {turn}.")
    replies = dict(BattleReply.objects.filter(battle_id=battle.pk, side=side).values_list("turn", "text"))
    endpoint = endpoint_of(battle, side)
    return messages(prompts[: last + 1], replies, endpoint.system_prompt if endpoint else "", asking=turn is not None)


def messages(prompts: list[str], replies: dict[int, str], system_prompt: str = "", *, asking: bool = False) -> list:
    """OpenAI chat messages of a conversation: the system prompt (when not empty), then each turn's message and its
    reply (``replies`` by turn; a turn without one has none). ``asking``: the last turn's reply is the one being
    asked, so it is left out."""
    out = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for t, prompt in enumerate(prompts):
        out.append({"role": "user", "content": prompt})
        if t in replies and not (asking and t == len(prompts) - 1):
            out.append({"role": "assistant", "content": replies[t]})
    return out


# ----------------------------------------------------------------------------------------------------------------
# Settling


def do_settle(battle: Battle) -> Battle:
    """After a first reply finished: both done -> READY (each reply its system's ``Generation`` sample 0 of the item
    with a ``GenerationCall`` in its endpoint's ledger -- the budget counts it --, the two a ``Pair``, the one-pair
    assignment held: ``rating_battles.do_hold_battle``), then the background samples start
    (``generating.samples.do_start_battle_samples``); either failed -> FAILED (no vote; the prompt stays with the
    item). Idempotent, under the battle's row lock: the two streams finishing at once settle it once."""
    ready = False
    with transaction.atomic():
        battle = Battle.objects.select_for_update(of=("self",)).select_related("study", "comparison").get(pk=battle.pk)
        if battle.status != Battle.Status.ANSWERING:
            return battle
        first = {r.side: r for r in BattleReply.objects.filter(battle=battle, turn=0)}
        statuses = {r.status for r in first.values()}
        if BattleReply.Status.FAILED in statuses:
            battle.status = Battle.Status.FAILED
        elif len(first) == len(SIDES) and statuses == {BattleReply.Status.DONE}:
            pair = None if battle.gold_id is not None else _do_store_replies(battle, first)
            battle.status = Battle.Status.READY
            ready = True
        else:
            return battle
        Battle.objects.filter(pk=battle.pk).update(status=battle.status)
        if ready:
            rating_battles.do_hold_battle(battle, pair, locked=True)
    if ready and battle.gold_id is None:
        samples.do_start_battle_samples(battle)
    return battle


def _do_store_replies(battle: Battle, first: dict[str, BattleReply]) -> Pair:
    """Each first reply as its system's sample 0 of the battle's item, with its ledger row, and the two as a pair."""
    comparison = battle.comparison
    assert comparison is not None  # a battle without a comparison is an attention check
    systems = {"a": comparison.system_a_id, "b": comparison.system_b_id}
    found = {e.system_id: e for e in SystemEndpoint.objects.filter(system_id__in=systems.values())}
    generations = dict(
        zip(
            systems,
            Generation.objects.bulk_create(
                Generation(
                    item_id=battle.item_id,
                    system_id=system_id,
                    sample_index=0,
                    text=first[side].text,
                    text_hash=text_hash(first[side].text),
                    n_words=word_count(first[side].text),
                    provenance=endpoints.storable(_provenance(battle, first[side], found.get(system_id))),
                )
                for side, system_id in systems.items()
            ),
            strict=True,
        )
    )
    GenerationCall.objects.bulk_create(  # each reply in its endpoint's ledger: the request budget counts it
        GenerationCall(
            endpoint=found[system_id],
            item_id=battle.item_id,
            sample_index=0,
            status=GenerationCall.Status.GENERATED,
            replies=1,
            prompt_tokens=first[side].prompt_tokens,
            completion_tokens=first[side].completion_tokens,
            generation=generations[side],
            created=first[side].finished or timezone.now(),
        )
        for side, system_id in systems.items()
        if system_id in found
    )
    return Pair.objects.create(item_id=battle.item_id, generation_a=generations["a"], generation_b=generations["b"])


def _provenance(battle: Battle, reply: BattleReply, endpoint: SystemEndpoint | None) -> dict[str, Any]:
    """Where a battle's reply came from, as a generated output's provenance says it (``runner.provenance``)."""
    return {
        "endpoint": endpoint.base_url if endpoint else None,
        "model": endpoint.model if endpoint else None,
        "parameters": {
            "temperature": endpoint.temperature,
            "max_tokens": endpoint.max_tokens,
            "system_prompt": endpoint.system_prompt,
            "seed": endpoint.seed,
        }
        if endpoint
        else None,
        "time": (reply.finished or timezone.now()).isoformat(),
        "finish_reason": reply.finish_reason,
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "arena_battle": battle.pk,
        "streamed": True,
    }


# ----------------------------------------------------------------------------------------------------------------
# The vote


def do_vote(battle: Battle, submission: recording.Submission) -> VoteResult:
    """The rater's vote on a READY battle, recorded as the rating page records an answer (``recording.do_submit``
    through ``rating_battles.do_record_vote``: exactly once by ``submission.key``; a repeat returns what the first
    stored). Refused with ``ServiceError`` -- no judgment stored -- while a reply is still being written, when an
    answer named its own model (the battle is then REFUSED, the names shown, the reason in its flag for the
    researcher), or past the rater's or the network's votes per hour (the battle stays READY: the rater may vote
    later). An attention check is scored as the rating page scores one (a wrong answer may screen the rater out).
    Then the board's refresh is queued (coalesced).

    What a vote cannot change is read before its transaction (SQLite's writers wait for one another only while the
    vote writes): the arena's settings, the systems' names and the replies the names rule reads -- their turns are
    checked again under the battle's lock, so a reply that arrived meanwhile is never voted on unread. Under the
    lock, one statement reads the battle, its held pair and the vote limits' counts (``locked_for_vote``)."""
    study = battle.study
    names = _do_read_vote_context(battle)
    replies = list(BattleReply.objects.filter(battle_id=battle.pk).values_list("side", "turn", "status", "text"))
    refused = failed = False
    now = timezone.now()
    with transaction.atomic():
        abuse.lock_votes(battle)
        held = rating_battles.locked_for_vote(battle, **abuse.vote_counts(battle, now))
        if battle.status == Battle.Status.ANSWERING:
            raise ServiceError(_("Wait for both replies before you vote."))
        if battle.status == Battle.Status.FAILED:
            raise ServiceError(str(FAILED_WORDS))
        if battle.status == Battle.Status.REFUSED:
            raise ServiceError(str(NAMED_WORDS))
        recorded = None
        if battle.status == Battle.Status.READY:
            turns = {turn for _side, turn, _status, _text in replies}
            if BattleReply.Status.STREAMING in {r[2] for r in replies} or len(turns) != len(battle.prompts or [0]):
                raise ServiceError(_("Wait for both replies before you vote."))
            named = _named_own_model(names, replies)
            if BattleReply.Status.FAILED in {r[2] for r in replies}:  # a follow-up turn's reply failed: no vote
                battle.status = Battle.Status.FAILED
                Battle.objects.filter(pk=battle.pk).update(status=battle.status)
                failed = True
            elif named:
                battle.status, battle.flag = Battle.Status.REFUSED, NAMED_FLAG.format(name=named)[:300]
                Battle.objects.filter(pk=battle.pk).update(status=battle.status, flag=battle.flag)
                refused = True
            else:
                held = rating_battles.checked_pair(held)  # a battle left for a newer one says so before the limits
                abuse.check_vote_limits(battle, now)
                recorded = rating_battles.do_record_vote(battle, submission, held)
        else:  # voted: a repeat of the vote (or the back button's second one) returns the stored one
            recorded = rating_battles.do_record_vote(battle, submission, held)
    if refused:
        raise ServiceError(str(NAMED_WORDS))
    if failed:
        raise ServiceError(str(FAILED_WORDS))
    if recorded is not None and recorded.created and battle.gold_id is None:
        _do_queue_board(study)
    return _result(battle, recorded)


FAILED_WORDS = gettext_lazy(
    "A system failed in this battle, so it takes no vote; start a new battle (your prompt is kept)."
)
NAMED_FLAG = "names its own model ({name})"  # the researcher's words (the board, the exports), not the rater's
NAMED_WORDS = gettext_lazy(
    "This vote cannot count: a reply said which model wrote it, so the two were no longer anonymous. "
    "Your battle is kept, and the names are shown."
)


def _do_read_vote_context(battle: Battle) -> dict[str, list[str]]:
    """What a vote reads of its study and systems, in one query before its transaction: the arena's settings and
    the study's crowd settings (set on ``battle.study``), and each side's names the names rule looks for (its label
    and its endpoint's model) -- also the names revealed."""
    a, b = "comparison__system_a__", "comparison__system_b__"
    arena_columns = model_columns(Arena, "study__arena__")
    crowd_columns = model_columns(CrowdSettings, "study__crowd_settings__")
    row = (
        Battle.objects.filter(pk=battle.pk)
        .order_by()
        .values(
            *arena_columns,
            *crowd_columns,
            f"{a}name",
            f"{b}name",
            f"{a}endpoint__model",
            f"{b}endpoint__model",
        )
        .get()
    )
    study = battle.study
    study.arena = instance(Arena, row, "study__arena__")
    study.crowd_settings = instance(CrowdSettings, row, "study__crowd_settings__")
    names = {
        side: [row[f"{prefix}name"] or "", row[f"{prefix}endpoint__model"] or ""]
        for side, prefix in (("a", a), ("b", b))
    }
    battle.names = names  # type: ignore[attr-defined]
    return names


def _named_own_model(names: dict[str, list[str]], replies) -> str:
    """The name a reply of the battle gave its own system by (its label or its model's), or "" (none, or an
    attention check: no system)."""
    if not any(n for side in names.values() for n in side):
        return ""
    for side, _turn, _status, text in replies:
        named = abuse.names_own_model(text, names[side])
        if named:
            return named
    return ""


def _do_queue_board(study: Study) -> None:
    """The board's refresh after a vote: nothing when one is queued already (it has not read the votes yet, so it
    reads this one too), otherwise a start, which coalesces with a refresh queued meanwhile; a refresh refused by a
    job limit is left to the next vote."""
    if Job.objects.filter(study=study, kind=BOARD_JOB, status=Job.Status.QUEUED).exists():
        return
    try:
        jobs.start(study, BOARD_JOB)
    except jobs.JobLimit:
        pass


def _result(battle: Battle, recorded: recording.Recorded | None) -> VoteResult:
    left, right = revealed(battle) or ("", "")
    counted = recorded is not None and recorded.judgment is not None and not recorded.judgment.superseded
    return VoteResult(counted, left, right, vote_words(battle, counted))


def vote_words(battle: Battle, counted: bool) -> str:
    """What the rater is told after their vote, in their language: whether it counts, and why not only for the
    names rule (what made the vote of an unlikely rater or a repeated prompt stop counting is the researcher's to
    read, on the board: it would tell an abuser what is looked for, and name battles the rater never saw)."""
    if battle.status == Battle.Status.REFUSED:
        return str(NAMED_WORDS)
    if battle.gold_id is not None:
        return _("This battle was an attention check: its two replies were written in advance.")
    if counted:
        return _("Your vote is counted.")
    return _("Your vote is stored, but it does not count in the ratings.")


def outcome(battle: Battle) -> VoteResult | None:
    """What a voted or refused battle's page says after the vote (as ``do_vote`` returned it): the names shown
    left and right, whether the vote counts, and the rater's words; None before the vote."""
    names = revealed(battle)
    if names is None:
        return None
    counted = (
        battle.status == Battle.Status.VOTED
        and battle.gold_id is None
        and Judgment.objects.filter(assignment_pair__assignment__battle=battle, superseded=False).exists()
    )
    return VoteResult(counted, names[0], names[1], vote_words(battle, counted))


def revealed(battle: Battle) -> tuple[str, str] | None:
    """The names of the systems shown left and right, once the battle is voted or its vote refused; else None."""
    if battle.status not in (Battle.Status.VOTED, Battle.Status.REFUSED):
        return None
    if battle.gold_id is not None:
        names = (_("An attention check's better reply"), _("An attention check's worse reply"))
    else:
        read = getattr(battle, "names", None)  # read by the vote with its context
        if read is not None:
            names = (read["a"][0], read["b"][0])
        else:
            comparison = battle.comparison
            assert comparison is not None
            names = (comparison.system_a.name, comparison.system_b.name)
    return names if battle.a_shown_first else (names[1], names[0])
