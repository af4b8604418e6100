"""Where an answer on several outputs at once is written -- a ranking, or the best and the worst of those shown --
with the pairwise judgments it implies (``annotation/implied_pairs.py``), in one transaction and exactly once (the
answer's key is unique in its study, and so is each implied judgment's, derived from it). From then on every reader of
judgments -- the report's leaderboards, decisions and agreement, the exports -- reads the implied pairs like any other
judgments; the intervals over them resample or cluster whole items, which holds the pairs of one answer together
(docs/ratings.md#rankings).

Its callers: a rater's answer on the rating page (``recording.do_record_ranking_answer``, which counts it in the
assignment and reads the screen from ``screen``), a rankings file
(docs/interfaces.md#ranking-format, ``do_import_rankings``: all or nothing, an answer already present skipped)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import random
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from annotation import implied_pairs as breaking
from annotation import jobs, uploads
from annotation.elicitation import AnswerError
from annotation.exchange import ranking_files
from annotation.exchange.rules import FormatError
from annotation.models import (
    Assignment,
    AssignmentPair,
    Comparison,
    Generation,
    Job,
    Judgment,
    Pair,
    Ranking,
    Rater,
    Study,
    Upload,
)
from annotation.rating import imports


@dataclasses.dataclass(frozen=True)
class RankingAnswer:
    """An answer on several outputs of one item, as generation ids: ``shown`` in display order (top first), and a
    ranking's ``order`` best first, or best-worst's ``best`` and ``worst``."""

    kind: str  # Ranking.Kind
    shown: tuple[int, ...]
    order: tuple[int, ...] | None = None
    best: int | None = None
    worst: int | None = None

    def implied(self) -> list[tuple[int, int]]:
        """The (winner, loser) generation pairs the answer implies; ``breaking.RankingError`` when it implies nothing
        consistent."""
        if self.kind == Ranking.Kind.RANK:
            if self.order is None or sorted(self.order) != sorted(self.shown):
                raise breaking.RankingError("a ranking orders exactly the outputs shown")
            return breaking.ranking_pairs(self.order)
        if self.kind == Ranking.Kind.BEST_WORST and self.best is not None and self.worst is not None:
            return breaking.best_worst_pairs(self.shown, self.best, self.worst)
        raise breaking.RankingError("an answer is a ranking, or the best and the worst of the outputs shown")


@dataclasses.dataclass(frozen=True)
class ShownOutput:
    generation: int
    label: str  # "A", "B", ...: how the page and the rater name it
    text: str


@dataclasses.dataclass(frozen=True)
class Screen:
    """What one ranking screen shows (a place of an assignment in a study whose answers cover several outputs): its
    kind and the outputs in display order, top first."""

    kind: str  # Ranking.Kind
    outputs: list[ShownOutput]

    @property
    def shown(self) -> tuple[int, ...]:
        return tuple(o.generation for o in self.outputs)


LABELS = "ABCDEFGHIJKLMNOPQRST"  # MAX_SHOWN outputs at most


def screen(study: Study, screen_id: int | str, item_id: int) -> Screen:
    """The outputs the screen ``screen_id`` (its assignment pair; a preview's own name) shows: one sample of each
    system of the plan (its comparisons, frozen once raters start) that has an output for the item, in an order drawn
    for this screen (so every position is as likely for every system); for best-worst, the first
    ``Study.outputs_shown`` of that order. The draws are seeded by the study and the screen, so a reload or a second
    tab shows the same outputs in the same order, and the answer is read against them (an output generated for the
    item meanwhile changes the draw: the answer is then refused, and the reloaded screen answered). An item with only
    two outputs is ranked (a ranking of two is a pairwise choice: best-worst needs three)."""
    rng = random.Random(f"{study.seed}:{screen_id}")
    compared = Comparison.objects.filter(study=study)
    in_plan = {*compared.values_list("system_a_id", flat=True), *compared.values_list("system_b_id", flat=True)}
    samples: dict[int, list[tuple[int, str]]] = {}
    for pk, system, text in (
        Generation.objects.filter(item_id=item_id, system_id__in=in_plan)
        .order_by("system_id", "sample_index")
        .values_list("id", "system_id", "text")
    ):
        samples.setdefault(system, []).append((pk, text))
    chosen = [rng.choice(outputs) for _, outputs in sorted(samples.items())]
    rng.shuffle(chosen)
    kind = study.answer_unit if len(chosen) >= 3 else Ranking.Kind.RANK
    if kind == Ranking.Kind.BEST_WORST:
        chosen = chosen[: study.outputs_shown]
    chosen = chosen[: len(LABELS)]  # a ranking of more systems than a screen holds is refused by the settings
    return Screen(kind, [ShownOutput(pk, LABELS[i], text) for i, (pk, text) in enumerate(chosen)])


def read_answer(screen: Screen, data) -> RankingAnswer:
    """A submitted ranking form against its screen: a place (1 = best) for every output (``place_<generation>``), or
    the ``best`` and the ``worst``; ``elicitation.AnswerError`` with what to fix, for the rater, otherwise."""
    shown = screen.shown
    if screen.kind == Ranking.Kind.RANK:
        places: dict[int, int] = {}
        for generation in shown:
            value = data.get(f"place_{generation}", "")
            if not str(value).isdigit() or not 1 <= int(value) <= len(shown):
                raise AnswerError(_("Give every output a place, from 1 (the best) to %(n)d.") % {"n": len(shown)})
            places[generation] = int(value)
        shared = sorted(p for p in set(places.values()) if list(places.values()).count(p) > 1)
        if shared:
            raise AnswerError(_("Two outputs share place %(place)d: give each its own place.") % {"place": shared[0]})
        return RankingAnswer(kind=screen.kind, shown=shown, order=tuple(sorted(shown, key=places.__getitem__)))
    by_value = {str(g): g for g in shown}
    best, worst = by_value.get(data.get("best", "")), by_value.get(data.get("worst", ""))
    if best is None or worst is None:
        raise AnswerError(_("Choose the best output and the worst output."))
    if best == worst:
        raise AnswerError(_("The best and the worst are two different outputs."))
    return RankingAnswer(kind=screen.kind, shown=shown, best=best, worst=worst)


def implied_key(key: str, winner: int, loser: int) -> str:
    """The idempotency key of the judgment an answer implies on one pair, from the answer's own and the two outputs'
    places in the list shown: the same in any study the answer is imported into (an exported study imported again
    keeps its judgments' ids)."""
    digest = hashlib.sha256(f"{key}\x00{winner}>{loser}".encode()).hexdigest()
    return f"ranking:{digest[:55]}"


def model_order(study: Study) -> dict[tuple[int, int], bool]:
    """For each compared system pair (system ids), whether its first system is model coordinate A: the study's
    comparison says; a pair the study does not compare has its lower system id as A."""
    order: dict[tuple[int, int], bool] = {}
    for a, b in Comparison.objects.filter(study=study).values_list("system_a_id", "system_b_id"):
        order[(a, b)], order[(b, a)] = True, False
    return order


@dataclasses.dataclass(frozen=True)
class NewRanking:
    """An answer to store: whose, on which item, with its key and what comes with it. ``excluded``: an imported
    line's flag, its judgments stored superseded (kept, not counted), as an imported judgment's."""

    rater: Rater
    item_id: int
    answer: RankingAnswer
    key: str
    created: dt.datetime | None = None
    comment: str = ""
    time_on_task_ms: int | None = None
    client_time_ms: int | None = None
    excluded: bool = False
    extra: dict[str, Any] | None = None
    assignment: Assignment | None = None  # a rater's answer here: its assignment and screen
    assignment_pair: AssignmentPair | None = None


def do_store(study: Study, answers: list[NewRanking]) -> list[Ranking]:
    """The answers (checked, none stored yet) and the judgments they imply, in the caller's transaction: a handful of
    queries whatever their number (the answers, the output pairs missing, the judgments)."""
    rankings = Ranking.objects.bulk_create(
        [
            Ranking(
                study=study,
                rater=new.rater,
                item_id=new.item_id,
                kind=new.answer.kind,
                shown=list(new.answer.shown),
                order=None if new.answer.order is None else list(new.answer.order),
                best_id=new.answer.best,
                worst_id=new.answer.worst,
                comment=new.comment,
                created=new.created or timezone.now(),
                time_on_task_ms=new.time_on_task_ms,
                client_time_ms=new.client_time_ms,
                idempotency_key=new.key,
                extra=new.extra or {},
                assignment=new.assignment,
                assignment_pair=new.assignment_pair,
            )
            for new in answers
        ]
    )
    items = {new.item_id for new in answers}
    systems = dict(Generation.objects.filter(item_id__in=items).values_list("id", "system_id"))
    order = model_order(study)
    wanted = []  # (ranking, generation A, generation B, choice, winner, loser)
    for ranking, new in zip(rankings, answers, strict=True):
        for winner, loser in new.answer.implied():
            if systems[winner] == systems[loser]:  # two samples of one system: the lower generation id is A
                winner_is_a = winner < loser
            else:
                winner_is_a = order.get((systems[winner], systems[loser]), systems[winner] < systems[loser])
            a, b = (winner, loser) if winner_is_a else (loser, winner)
            wanted.append((ranking, new, a, b, "a" if winner_is_a else "b", winner, loser))
    pairs = dict(_pair_ids(items))
    missing = {(r.item_id, a, b) for r, _, a, b, *_ in wanted if (a, b) not in pairs}
    if missing:
        Pair.objects.bulk_create(
            [Pair(item_id=item, generation_a_id=a, generation_b_id=b) for item, a, b in missing], ignore_conflicts=True
        )
        pairs = dict(_pair_ids(items))
    Judgment.objects.bulk_create(
        [
            Judgment(
                study=study,
                rater=new.rater,
                pair_id=pairs[(a, b)],
                ranking=ranking,
                assignment=new.assignment,
                a_shown_first=new.answer.shown.index(a) < new.answer.shown.index(b),
                choice=choice,
                created=ranking.created,
                idempotency_key=implied_key(
                    ranking.idempotency_key, new.answer.shown.index(winner), new.answer.shown.index(loser)
                ),
                superseded=new.excluded,
            )
            for ranking, new, a, b, choice, winner, loser in wanted
        ],
        batch_size=imports.IMPORT_INSERT_BATCH,
    )
    return rankings


def _pair_ids(items: set[int]):
    """((generation A, generation B), pair id) of every output pair of ``items``."""
    for a, b, pk in Pair.objects.filter(item_id__in=items).values_list("generation_a_id", "generation_b_id", "id"):
        yield (a, b), pk


def check_rankings_file(study: Study, data: bytes, filename: str | None) -> list[ranking_files.ParsedRanking]:
    """The file's answers, read against the study (its items, samples and raters' kinds); ``FormatError`` listing
    every problem by line and field otherwise."""
    return ranking_files.parse_rankings(
        data,
        filename,
        imports.study_samples(study),
        rater_kinds=dict(study.raters.values_list("external_id", "kind")),
        max_bytes=settings.SEPLAB_MAX_IMPORT_BYTES,
    )


def do_import_rankings(study: Study, data: bytes, filename: str | None) -> imports.ImportSummary:
    """Import a rankings file (docs/interfaces.md#ranking-format) into ``study`` here and now, in one transaction
    (the command line, scripts): all or nothing, an answer already present (same id, or same content for a line
    without one) skipped. ``FormatError`` naming every problem by line and field, nothing stored, otherwise."""
    return _do_import_parsed(study, check_rankings_file(study, data, filename))


def do_start_rankings_import(
    study: Study, data: bytes, filename: str | None
) -> tuple[imports.ImportSummary | None, Job | None]:
    """The browser's import: the file checked whole in the request (every problem listed, nothing saved), up to
    ``SEPLAB_IMPORT_STEP`` answers imported at once (summary, None), a larger file by a background job (None, the
    job)."""
    parsed = check_rankings_file(study, data, filename)
    return uploads.do_import_or_stage(
        study,
        Upload.Kind.RANKINGS,
        data,
        filename,
        len(parsed),
        lambda: _do_import_parsed(study, parsed),
        rows=sum(implied_count(p) for p in parsed) + len(parsed),
    )


def implied_count(line: ranking_files.ParsedRanking) -> int:
    """How many judgments an answer implies: K (K - 1) / 2 for a ranking of K, 2 K - 3 for best-worst on K."""
    k = len(line.shown)
    return k * (k - 1) // 2 if line.kind == Ranking.Kind.RANK else 2 * k - 3


def do_import_upload(upload: Upload, progress: Callable[[int, int], None]) -> str:
    """A large rankings file's import (``uploads.upload_job``): checked again against the study as it is now, then
    imported in one transaction with the upload removed (a stopped run leaves nothing, and the study page offers to
    resume or discard it)."""
    study = upload.study
    try:
        parsed = check_rankings_file(study, bytes(upload.data), upload.filename or None)
    except FormatError as exc:
        upload.delete()  # nothing to resume: the study changed under the file
        raise jobs.JobFailed(f"Nothing was imported: the file no longer fits the study.\n{exc}") from exc
    progress(0, len(parsed))
    with transaction.atomic():
        summary = _do_import_parsed(study, parsed)
        upload.delete()
    progress(len(parsed), len(parsed))
    return f"Imported {summary.created:,} rankings ({summary.skipped:,} already present)."


@transaction.atomic
def _do_import_parsed(study: Study, parsed: list[ranking_files.ParsedRanking]) -> imports.ImportSummary:
    # two imports of the same study one after the other (PostgreSQL: the study's row; SQLite runs one writer at a
    # time): the second sees the first's answers present and skips them, never colliding with them
    Study.objects.select_for_update().filter(pk=study.pk).first()
    items = dict(study.items.values_list("external_id", "pk"))
    generations = {
        (item, system, sample): pk
        for pk, item, system, sample in Generation.objects.filter(item__study=study).values_list(
            "id", "item_id", "system__name", "sample_index"
        )
    }
    present: set[str] = set()
    keys = [line.key for line in parsed]
    for start in range(0, len(keys), imports.IMPORT_QUERY_CHUNK):
        present.update(
            Ranking.objects.filter(
                study=study, idempotency_key__in=keys[start : start + imports.IMPORT_QUERY_CHUNK]
            ).values_list("idempotency_key", flat=True)
        )
    raters = {r.external_id: r for r in study.raters.all()}
    new = []
    for line in parsed:
        if line.key in present:
            continue
        item = items[line.item]

        def ids(outputs, item=item):
            return tuple(generations[(item, system, sample)] for system, sample in outputs)

        rater = raters.get(line.rater)
        if rater is None:
            rater = raters[line.rater] = Rater.objects.create(
                study=study, external_id=line.rater, kind=line.rater_kind, source=Rater.Source.IMPORT
            )
        answer = RankingAnswer(
            kind=line.kind,
            shown=ids(line.shown),
            order=None if line.order is None else ids(line.order),
            best=None if line.best is None else ids([line.best])[0],
            worst=None if line.worst is None else ids([line.worst])[0],
        )
        new.append(
            NewRanking(
                rater=rater,
                item_id=item,
                answer=answer,
                key=line.key,
                created=line.created,
                comment=line.comment,
                time_on_task_ms=line.time_on_task_ms,
                excluded=line.excluded,
                extra=line.extra,
            )
        )
    do_store(study, new)
    return imports.ImportSummary(created=len(new), skipped=len(parsed) - len(new))
