"""What selection does for an arena study (docs/arena.md): which system pair the next battle gets, the separability
of every battle's prompt as soon as both systems' samples are in, and the prompts that repeat an earlier battle's.

- **Which two systems** (docs/arena.md#which-two-systems): each pair's chance weight, read from the stored decisions
  (``PairDecision``, the one home of "is this pair decided"; ``selection/hooks.py`` brings it up to date after every
  vote), so that the open pairs the ranking still needs get more of the battles, as Chatbot Arena's active sampling
  gives them to the pairs whose ratings are least certain.
  The weights' rule is pure (``selection/core/arena.py``), so the replay bench (``bench/replay_arena.py``) draws with
  the very same one.
- **Live separability** (docs/arena.md#live-separability-and-sep-elo): the "arena_separability" job computes each
  new prompt's alignments (``services.item_alignments``, the study's metric) once both systems have all their K + 1
  samples, and stores them in the pair's ``SeparabilityRun`` (``services.do_add_item_separability``: every delta of
  the pair normalised again), where the report's and the board's sep-ELO read them.
- **Repeated prompts** (docs/arena.md#abuse): a battle whose prompt repeats an earlier battle's, exactly or nearly
  (the study encoder's cosine at least ``REPEAT_COSINE``), has its vote kept but not counted
  (``annotation.rating.battles.do_flag_votes``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
import secrets
import unicodedata

import numpy as np
from django.db import transaction
from django.db.models import BooleanField, Case, When

from annotation.generating.runner import ARENA_SAMPLED
from annotation.models import Battle, Comparison, Generation, Job, Judgment, Rater, Study
from annotation.models.arena import in_play
from annotation.rating import battles as rating_battles
from selection import embedding, rating_sets, services
from selection.core import arena as core
from selection.core import decisions, winners
from selection.models import ItemSeparability, PairDecision, SelectionSettings

# a prompt whose embedding's cosine with an earlier battle's is at least this is a near repeat: above every pair of
# distinct real prompts measured (Vicuna-80 and AlpacaEval's 805, all-MiniLM-L6-v2), below the edits a rater makes to
# send a prompt again (bench/arena_repeats.py; bench/README.md, "Repeated arena prompts")
REPEAT_COSINE = 0.9
REPEAT_WORDS = "the prompt repeats battle {battle}'s ({how})"
BLOCK = 1024  # prompts compared against all earlier ones at once (a block's matrix: BLOCK x battles floats)
STEP = "arena_separability"  # the job kind of the arena's background step (selection/jobs.py)
# battles that became ready this long before the last step began are looked at again: a battle's hold commits a moment
# after its assignment is created, so the last step may not have seen it
RECHECK = dt.timedelta(minutes=5)


def draw_pair(weights: dict[int, float], avoid: int | None = None) -> int | None:
    """The live battle's pair: ``core.draw`` (the rule the replayed arena runs) with a generator seeded from the
    operating system's randomness each time (no seed a rater could replay)."""
    return core.draw(weights, np.random.default_rng(secrets.randbits(128)), avoid)


def pair_weights(study: Study) -> dict[int, float]:
    """Comparison id -> chance weight of each of the study's system pairs still open to battles (not closed): the
    pairs the ranking still needs weigh more (``core.pair_weights``, the ranking read from every pair's stored
    decision and estimated win rate, closed ones too; a pair without one: undecided, 1/2)."""
    comparisons = list(study.comparisons.values_list("pk", "system_a_id", "system_b_id", "closed"))
    stored = {
        pk: (decision, mean)
        for pk, decision, mean in PairDecision.objects.filter(
            comparison_id__in=[pk for pk, *_ in comparisons]
        ).values_list("comparison_id", "decision", "mean")
    }
    states = {
        (a, b): decisions.PairState(*stored.get(pk, (decisions.UNDECIDED, 0.5)))
        for pk, a, b, _ in comparisons  # the core reads the systems as keys only
    }
    weights = core.pair_weights(states)  # the ranking over every pair, a closed one's decision included
    return {pk: weights[(a, b)] for pk, a, b, closed in comparisons if not closed}


# ----------------------------------------------------------------------------------------------------------
# Each pair's decision, vote by vote


def _counted(comparison: Comparison):
    """The votes of the pair's battles that count: not revised, not superseded (a flagged battle's), by people not
    screened out (a failed attention check)."""
    return Judgment.objects.counted().filter(
        assignment__battle__comparison=comparison,
        rater__kind=Rater.Kind.HUMAN,
        rater__screened_out=False,
    )


def _locked(comparison_id: int) -> PairDecision:
    stored, _ = PairDecision.objects.select_for_update().get_or_create(
        comparison_id=comparison_id,
        defaults={"decision": decisions.UNDECIDED, "low": 0.0, "high": 1.0, "items": 0, "judgments": 0},
    )
    return stored


def _do_observe(settings: SelectionSettings, stored: PairDecision, comparison: Comparison, votes) -> None:
    """``votes`` observed by the pair's betting confidence sequence, each one item's score for the pair's first
    system (1 a win, 1/2 a tie or both bad, 0 a loss), in the order they came; a pair without a sequence starts one
    over every vote that counts so far (``votes`` is then not read)."""
    if stored.state:
        sequence = decisions.BettingSequence.from_bytes(bytes(stored.state))
    else:
        sequence = decisions.BettingSequence(settings.pair_alpha())
        votes = _counted(comparison)
        stored.judgments, stored.pool = 0, 0
    by_item, judged = rating_sets.ratings_from_rows(
        comparison, votes.order_by("created", "id").values_list(*rating_sets.JUDGMENT_ROW)
    )
    for by_rater in by_item.values():
        sequence.update(winners.item_score(list(by_rater.values())))
    stored.judgments += judged
    low, high = sequence.interval
    stored.decision = decisions.decide(low, high, settings.decision_margin) if sequence.n else decisions.UNDECIDED
    if sequence.n:
        stored.mean = sequence.total / sequence.n
    stored.low, stored.high, stored.items, stored.state = low, high, sequence.n, sequence.to_bytes()
    stored.save()


def do_observe_vote(settings: SelectionSettings, assignment) -> None:
    """An arena's decision step after a vote (the assignment's one judgment; ``selection/hooks.do_decide``): one
    observation of its pair's sequence. Nothing for a vote kept but not counted (its battle flagged before it came:
    ``rating.battles.do_record_vote``) or an attention check."""
    battle = Battle.objects.filter(assignment=assignment).values("comparison_id", "flag").first()
    if battle is None or battle["comparison_id"] is None or battle["flag"]:
        return
    comparison = Comparison.objects.get(pk=battle["comparison_id"])
    _do_observe(settings, _locked(comparison.pk), comparison, _counted(comparison).filter(assignment=assignment))


def do_recount_decisions(study: Study) -> int:
    """Each pair whose stored decision rests on votes that no longer count (flagged after they were observed: a
    repeated prompt, an unlikely rater; a rater screened out) decided again over the votes that count: a betting
    sequence takes no observation back, so it is started over. The arena's background step runs it, so the pair
    choice reads decisions over the votes the board counts. Returns how many pairs were decided again."""
    settings = study.selection_settings
    again = 0
    for comparison in study.comparisons.order_by("pk"):
        with transaction.atomic():
            stored = _locked(comparison.pk)
            if not stored.state or stored.judgments == _counted(comparison).count():
                continue
            stored.state = b""
            _do_observe(settings, stored, comparison, _counted(comparison))
            again += 1
    return again


# ----------------------------------------------------------------------------------------------------------
# Live separability


def do_live_separability(study: Study) -> int:
    """Store the separability (the study's metric) of every battle prompt of the study whose two systems have all
    their samples and that has none yet; returns how many prompts were added. Attention-check battles and battles
    that failed or were refused before they were ready have no samples, and no separability."""
    metric = study.selection_settings.separability_metric
    needed = services.samples_needed(study)
    stored = set(
        ItemSeparability.objects.filter(run__study=study, run__metric=metric).values_list(
            "run__comparison_id", "item_id"
        )
    )
    todo: dict[int, list[int]] = {}  # comparison -> its battle items still without a separability
    for comparison_id, item_id in Battle.objects.filter(
        study=study, status__in=ARENA_SAMPLED, gold__isnull=True, comparison__isnull=False
    ).values_list("comparison_id", "item_id"):
        if (comparison_id, item_id) not in stored:
            todo.setdefault(comparison_id, []).append(item_id)
    if not todo:
        return 0
    samples: dict[tuple[int, int], list[Generation]] = {}
    for g in Generation.objects.filter(item_id__in={i for items in todo.values() for i in items}).order_by(
        "item_id", "system_id", "sample_index"
    ):
        samples.setdefault((g.item_id, g.system_id), []).append(g)
    comparisons = {c.pk: c for c in study.comparisons.filter(pk__in=todo)}
    complete: dict[int, list[int]] = {}
    for comparison_id, items in todo.items():
        c = comparisons[comparison_id]
        complete[comparison_id] = [
            i
            for i in items
            if len(samples.get((i, c.system_a_id), ())) >= needed.get(c.system_a_id, 1)
            and len(samples.get((i, c.system_b_id), ())) >= needed.get(c.system_b_id, 1)
        ]
    used = [g for key, group in samples.items() if any(key[0] in items for items in complete.values()) for g in group]
    if not used:
        return 0
    matrix = services.do_similarity(metric, used)
    added = 0
    for comparison_id, items in complete.items():
        if not items:
            continue
        c = comparisons[comparison_id]
        aligned = {
            i: services.item_alignments(samples[(i, c.system_a_id)], samples[(i, c.system_b_id)], matrix) for i in items
        }
        services.do_add_item_separability(study, c, metric, aligned)
        added += len(aligned)
    return added


# ----------------------------------------------------------------------------------------------------------
# Repeated prompts


def prompt_key(prompt: str) -> str:
    """What makes two prompts the same one: the text in Unicode's compatibility form, case folded, with its runs of
    white space made one space and none at either end."""
    text = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", prompt).casefold()).strip()
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclasses.dataclass(frozen=True)
class Repeat:
    battle: int
    earlier: int
    how: str  # "the same text" | "cosine 0.93"


def repeats(
    ids: list[int], prompts: list[str], counted: list[bool], vectors: np.ndarray, start: int = 0
) -> list[Repeat]:
    """Which battles (in the order given: the order they became ready) repeat an earlier one whose vote still counts:
    the same ``prompt_key``, else the highest cosine of the prompts' embeddings (rows of ``vectors``) at least
    ``REPEAT_COSINE``. A battle found a repeat, or not counted already (``counted`` False), is no earlier battle for
    the ones after it: a prompt is counted once, by the first battle that counts. Only the battles from ``start`` on
    are looked at (the ones before were, by an earlier job: they stand as ``counted`` says)."""
    out: list[Repeat] = []
    keys = [prompt_key(p) for p in prompts]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True) if len(vectors) else np.zeros((0, 1))
    unit = vectors / np.where(norms > 0, norms, 1.0) if len(vectors) else vectors
    alive = np.array(counted, dtype=bool)
    first: dict[str, int] = {}
    for n in range(min(start, len(ids))):
        if alive[n]:
            first.setdefault(keys[n], n)
    for begin in range(start, len(ids), BLOCK):
        end = min(begin + BLOCK, len(ids))
        block = unit[begin:end] @ unit[:end].T
        for row, n in enumerate(range(begin, end)):
            if not alive[n]:
                continue
            earlier = first.get(keys[n])
            if earlier is not None:
                out.append(Repeat(ids[n], ids[earlier], "the same text"))
                alive[n] = False
                continue
            cosines = np.where(alive[:n], block[row, :n], -np.inf)
            best = int(np.argmax(cosines)) if n else -1
            if n and cosines[best] >= REPEAT_COSINE:
                out.append(Repeat(ids[n], ids[best], f"cosine {cosines[best]:.2f}"))
                alive[n] = False
                continue
            first.setdefault(keys[n], n)
    return out


def do_flag_repeats(study: Study) -> int:
    """Flag the votes of the study's battles whose prompt repeats an earlier battle's (``repeats``): kept, exported,
    not counted. The battles are those that reached their vote (ready or voted, holding their vote's assignment; not
    attention checks), in the order they became ready (their assignment's creation); a battle flagged for any reason
    already, or out of play (``arena.in_play``: a ready battle its rater left without a vote, e.g. one refused by the
    names rule, whose prompt the rater then sends again), is no earlier battle. Only the battles that became ready
    since the last arena step began (less ``RECHECK``) are looked at: a battle looked at once keeps its standing, as
    earlier battles only ever stop counting.
    Returns how many battles were flagged now."""
    rows = list(
        Battle.objects.filter(study=study, status__in=ARENA_SAMPLED, gold__isnull=True, assignment__isnull=False)
        .order_by("assignment__created", "pk")
        .annotate(playing=Case(When(in_play(), then=True), default=False, output_field=BooleanField()))
        .values_list("pk", "item__input", "flag", "assignment__created", "playing")
    )
    last = (
        Job.objects.filter(study=study, kind=STEP, status=Job.Status.DONE)
        .order_by("-created")
        .values("created")
        .first()
    )
    since = None if last is None else last["created"] - RECHECK
    start = next((n for n, row in enumerate(rows) if since is None or row[3] >= since), len(rows))
    if len(rows) < 2 or start == len(rows):
        return 0
    ids, prompts, flags, _, playing = zip(*rows, strict=True)
    vectors = embedding.do_embed_texts(list(prompts))
    alive = [not flag and play for flag, play in zip(flags, playing, strict=True)]
    found = repeats(list(ids), list(prompts), alive, vectors, start)
    for repeat in found:
        rating_battles.do_flag_votes([repeat.battle], REPEAT_WORDS.format(battle=repeat.earlier, how=repeat.how))
    return len(found)
