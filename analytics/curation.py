"""The data manager: every item of a study with its verdicts, searched and filtered (``Filters``), and the bulk
actions on items (``do_curate``): send to review, exclude from the analysis, re-open.

An item's verdicts are the review's (``analytics.review``): per judged pair, the people's winner, whether raters
disagree, which judges disagree with the people and the ruling. The pair filters (system, winner, agreement, judges,
flagged) hold together on one pair: an item matches when one of its pairs meets them all. What an exclusion means is
defined once, as ``Judgment.objects.analysed`` (``annotation/models/judgments.py``): an excluded item's judgments are
kept and exported, never analysed; it is no longer handed to raters (``annotation/rating/allocation.py``); the
decisions of its system pairs are decided again over the judgments that count (``planning.do_recount_decisions``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping

from django.core.cache import cache
from django.db import transaction
from django.db.models import Count, Max

from analytics import review, stored
from analytics.models import Adjudication
from annotation.access import CHANGE, REVIEW
from annotation.errors import FieldErrors
from annotation.models import Generation, Item, Judgment, Rater, Study
from annotation.plan import planning
from annotation.studies import team
from selection.strategies import is_live

AGREEMENT = {
    "all": "All raters agree",
    "some": "Raters disagree",
    "one": "One rater",
    "none": "No rater yet",
}
JUDGES = {"agree": "Judges agree with the people", "disagree": "A judge disagrees", "none": "No judge verdict"}
FLAGGED = {"yes": "Flagged", "no": "Not flagged"}
STATE = {
    "included": "Analysed",
    "excluded": "Excluded",
    "requested": "Sent to review",
    "ruled": "Ruled on",
}


@dataclasses.dataclass(frozen=True)
class Action:
    """A bulk action: its button, the role it needs (``annotation.access``) and what it did, in words."""

    label: str
    need: str
    done: str


ACTIONS = {
    "review": Action("Send to review", REVIEW, "sent to the review queue"),
    "exclude": Action("Exclude from the analysis", CHANGE, "excluded from the analysis"),
    "reopen": Action("Re-open", CHANGE, "re-opened (analysed again, rulings withdrawn)"),
}
MOST_ITEMS = 10_000  # items one action may change (a whole study's worth for the studies people run)


@dataclasses.dataclass(frozen=True)
class Filters:
    """What the data manager shows: text in an item's id or input (``q``), text in a rater's comment (``comment``),
    the pair filters, and the item's state. An empty value does not filter."""

    q: str = ""
    comment: str = ""
    system: str = ""
    winner: str = ""  # a system's name, "tie" or "none" (no counted human judgment)
    agreement: str = ""  # AGREEMENT's keys
    judges: str = ""  # JUDGES' keys
    flagged: str = ""  # FLAGGED's keys
    state: str = ""  # STATE's keys

    NAMES = ("q", "comment", "system", "winner", "agreement", "judges", "flagged", "state")

    @classmethod
    def check(cls, given: Mapping[str, str], systems: list[str]) -> Filters:
        """The filters in ``given`` (a query string), each refused by name when it is not one of its choices."""
        values = {name: str(given.get(name, "") or "").strip() for name in cls.NAMES}
        choices = {
            "system": systems,
            "winner": [*systems, "tie", "none"],
            "agreement": list(AGREEMENT),
            "judges": list(JUDGES),
            "flagged": list(FLAGGED),
            "state": list(STATE),
        }
        problems = {
            name: [f"Choose one of: {', '.join(allowed)}."]
            for name, allowed in choices.items()
            if values[name] and values[name] not in allowed
        }
        problems.update({name: ["At most 200 characters."] for name in ("q", "comment") if len(values[name]) > 200})
        if problems:
            raise FieldErrors(problems)
        return cls(**values)

    def query(self) -> dict[str, str]:
        """The filters set, as a query string's parameters."""
        return {name: getattr(self, name) for name in self.NAMES if getattr(self, name)}

    def pair_filters(self) -> bool:
        return any((self.system, self.winner, self.agreement, self.judges, self.flagged))


def agreement(pair: review.PairReview) -> str:
    """How the pair's counted raters agree (``AGREEMENT``'s key): no rater, one, all the same preference, or not
    (``winners.raters_disagree``, the review's flag)."""
    n = len(pair.people)
    return "none" if n == 0 else "one" if n == 1 else "some" if pair.raters_disagree else "all"


def judges(pair: review.PairReview) -> str:
    """The pair's judges against its people (``JUDGES``' key; "" when judges answered and there is no people's
    winner to hold them to)."""
    if not any(v.rating is not None for v in pair.judges):
        return "none"
    if pair.people_winner is None:
        return ""
    return "disagree" if pair.judges_disagree else "agree"


def winner(pair: review.PairReview) -> str:
    """The people's winner as a filter names it: the system's name, "tie" or "none"."""
    return {None: "none", "tie": "tie", "a": pair.system_a, "b": pair.system_b}[pair.people_winner]


@dataclasses.dataclass(frozen=True)
class PairLine:
    """One judged pair as the data manager shows and filters it, read once off its review (``review.PairReview``):
    what is kept between page views (``item_rows``), without the verdicts themselves."""

    pair_id: int
    system_a: str
    system_b: str
    samples: tuple[int, int]
    people_words: str
    winner: str  # ``winner``
    agreement: str  # ``agreement``
    judges: str  # ``judges``
    flagged: bool
    judges_disagree: tuple[str, ...]
    ruling: str | None  # the ruling's value (``Adjudication.Ruling``), None without one
    ruling_words: str

    @classmethod
    def of(cls, pair: review.PairReview) -> PairLine:
        return cls(
            pair.pair_id,
            pair.system_a,
            pair.system_b,
            pair.samples,
            pair.people_words,
            winner(pair),
            agreement(pair),
            judges(pair),
            pair.flagged,
            tuple(pair.judges_disagree),
            pair.adjudication.ruling if pair.adjudication else None,
            pair.ruling_words,
        )


@dataclasses.dataclass
class ItemRow:
    """One item of the data manager: its state, its judged pairs (``PairLine``) and its raters' comments."""

    item_id: int
    external_id: str
    input: str
    excluded: bool
    review_requested: bool
    systems: set[str]
    pairs: list[PairLine]
    comments: list[str]

    @property
    def flagged(self) -> bool:
        return any(p.flagged for p in self.pairs)

    @property
    def ruled(self) -> bool:
        return any(p.ruling is not None for p in self.pairs)

    def state_matches(self, state: str) -> bool:
        return {
            "": True,
            "included": not self.excluded,
            "excluded": self.excluded,
            "requested": self.review_requested,
            "ruled": self.ruled,
        }[state]

    def pair_matches(self, f: Filters) -> bool:
        """Whether one of the item's pairs meets every pair filter (an item without a judged pair meets those that
        mean "nothing yet", and a system filter when it has that system's outputs)."""
        if not self.pairs:
            return (
                (not f.system or f.system in self.systems)
                and f.winner in ("", "none")
                and f.agreement in ("", "none")
                and f.judges in ("", "none")
                and f.flagged in ("", "no")
            )
        return any(
            (not f.system or f.system in (p.system_a, p.system_b))
            and (not f.winner or p.winner == f.winner)
            and (not f.agreement or p.agreement == f.agreement)
            and (not f.judges or p.judges == f.judges)
            and (not f.flagged or p.flagged == (f.flagged == "yes"))
            for p in self.pairs
        )

    def matches(self, f: Filters) -> bool:
        q, comment = f.q.casefold(), f.comment.casefold()
        return (
            (not q or q in self.external_id.casefold() or q in self.input.casefold())
            and (not comment or any(comment in c.casefold() for c in self.comments))
            and self.state_matches(f.state)
            and self.pair_matches(f)
        )


@dataclasses.dataclass(frozen=True)
class Counts:
    """The study's items in a line: all, flagged, excluded, sent to review, ruled on."""

    items: int
    flagged: int
    excluded: int
    requested: int
    ruled: int


CACHE_SECONDS = 600  # rows kept per fingerprint of what they are read from (``fingerprint``)


def fingerprint(study: Study) -> str:
    """What the data manager's rows are read from, in a few aggregates: the judgments (how many, the newest, the
    revised and superseded ones: a comment is written with its judgment, never after), the raters screened out, the
    items excluded and sent to review, the rulings, and the outputs (a generated system's arrive later)."""
    parts = [
        stored.judgments_seen(study),
        list(Rater.objects.filter(study=study, screened_out=True).order_by("pk").values_list("pk", flat=True)),
        list(Item.objects.filter(study=study, excluded=True).order_by("pk").values_list("pk", flat=True)),
        list(Item.objects.filter(study=study, review_requested=True).order_by("pk").values_list("pk", flat=True)),
        Adjudication.objects.filter(study=study).aggregate(n=Count("pk"), newest=Max("decided")),
        Generation.objects.filter(item__study=study).aggregate(n=Count("id"), newest=Max("id")),
        Item.objects.filter(study=study).aggregate(n=Count("id"), newest=Max("id")),
    ]
    return hashlib.sha256(json.dumps(parts, default=str, sort_keys=True).encode()).hexdigest()


def item_rows(study: Study) -> list[ItemRow]:
    """Every item of ``study`` in file order, with its judged pairs' lines (excluded items' included: the data manager
    is where they are seen and re-opened), read from the verdicts once per ``fingerprint`` and kept in the cache for
    ``CACHE_SECONDS``: the filters, the pages and the API's pages read them again without reading a verdict."""
    key = f"seplab:data-manager:{study.pk}:{study.created.timestamp()}:{fingerprint(study)}"
    rows = cache.get(key)
    if rows is None:
        rows = _item_rows(study)
        cache.set(key, rows, CACHE_SECONDS)
    return rows


def _item_rows(study: Study) -> list[ItemRow]:
    by_item: dict[int, list[review.PairReview]] = {}
    for pair in review.reviews(Judgment.objects.filter(study=study), study):
        by_item.setdefault(pair.item_id, []).append(pair)
    systems: dict[int, set[str]] = {}
    for item_id, name in (
        Generation.objects.filter(item__study=study).values_list("item_id", "system__name").distinct().order_by()
    ):
        systems.setdefault(item_id, set()).add(name)
    return [
        ItemRow(
            pk,
            external_id,
            text,
            excluded,
            requested,
            systems.get(pk, set()),
            [PairLine.of(p) for p in by_item.get(pk, [])],
            [v.comment for p in by_item.get(pk, []) for v in p.humans if v.comment],
        )
        for pk, external_id, text, excluded, requested in Item.objects.filter(study=study)
        .order_by("position")
        .values_list("pk", "external_id", "input", "excluded", "review_requested")
    ]


def data_manager(study: Study, filters: Filters) -> tuple[list[ItemRow], Counts]:
    """The items ``filters`` match, in file order, and the study's counts."""
    rows = item_rows(study)
    counts = Counts(
        items=len(rows),
        flagged=sum(r.flagged for r in rows),
        excluded=sum(r.excluded for r in rows),
        requested=sum(r.review_requested for r in rows),
        ruled=sum(r.ruled for r in rows),
    )
    return [r for r in rows if r.matches(filters)], counts


def check_items(study: Study, ids: list) -> list[int]:
    """The items an action names, by primary key, each of ``study``: refused by name (``items``) when there are none,
    too many, or one is not an item of the study -- nothing is changed then."""
    if not ids:
        raise FieldErrors({"items": ["Choose at least one item."]})
    if len(ids) > MOST_ITEMS:
        raise FieldErrors({"items": [f"At most {MOST_ITEMS:,} items at a time."]})
    try:
        wanted = sorted({int(i) for i in ids})
    except (TypeError, ValueError):
        raise FieldErrors({"items": ["Items are named by their numbers."]}) from None
    found = set(Item.objects.filter(study=study, pk__in=wanted).values_list("pk", flat=True))
    missing = [i for i in wanted if i not in found]
    if missing:
        shown = ", ".join(str(i) for i in missing[:10]) + (" …" if len(missing) > 10 else "")
        raise FieldErrors({"items": [f"Not items of this study: {shown}."]})
    return wanted


@transaction.atomic
def do_curate(study: Study, action: str, ids: list, user) -> int:
    """Apply ``action`` (``ACTIONS``' key) to the items ``ids`` of ``study``, all or none, with one line in the audit
    trail naming them; returns how many items it changed.

    - review: the items' pairs join the review queue (flagged or not); an excluded item is refused by name (re-open
      it first: the review queue is of what is analysed);
    - exclude: the items' judgments are left out of every analysis (kept and exported), the items are no longer
      handed to raters, and their pairs' decisions are decided again without them;
    - reopen: the items as their raters left them -- analysed again (decisions likewise), no longer sent to review,
      the rulings on their pairs withdrawn (listed in the audit line)."""
    if action not in ACTIONS:
        raise FieldErrors({"action": [f"Choose one of: {', '.join(ACTIONS)}."]})
    wanted = check_items(study, ids)
    recount: list[int] = []  # the items whose exclusion changed: their pairs' decisions are decided again
    items = list(Item.objects.select_for_update().filter(study=study, pk__in=wanted).order_by("pk"))
    if action == "review":
        excluded = [i.external_id for i in items if i.excluded]
        if excluded:
            shown = ", ".join(excluded[:10]) + (" …" if len(excluded) > 10 else "")
            raise FieldErrors({"items": [f"Excluded items cannot be reviewed; re-open them first: {shown}."]})
        changed = [i for i in items if not i.review_requested]
        Item.objects.filter(pk__in=[i.pk for i in changed]).update(review_requested=True)
        detail: dict = {}
    elif action == "exclude":
        if is_live(study.selection_settings.selection_method):
            raise FieldErrors(
                {
                    "action": [
                        "This study's items are chosen by the live DiffUse loop, whose stopping rule reads the label "
                        "of every item it released: none can be excluded (docs/decisions.md#excluded-items)."
                    ]
                }
            )
        changed = [i for i in items if not i.excluded]
        Item.objects.filter(pk__in=[i.pk for i in changed]).update(excluded=True)
        recount = [i.pk for i in changed]
        detail = {}
    else:
        rulings = Adjudication.objects.filter(study=study, pair__item__in=items)
        withdrawn = list(rulings.values("pair_id", "pair__item__external_id", "ruling", "note"))
        changed = [
            i
            for i in items
            if i.excluded or i.review_requested or any(r["pair__item__external_id"] == i.external_id for r in withdrawn)
        ]
        recount = [i.pk for i in items if i.excluded]
        rulings.delete()
        Item.objects.filter(pk__in=[i.pk for i in items]).update(excluded=False, review_requested=False)
        detail = {"rulings_withdrawn": withdrawn}
    if recount:
        planning.do_recount_decisions(study, recount)
    if changed:
        names = [i.external_id for i in changed]
        shown = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
        team.do_audit(
            study,
            user,
            f"items_{action}",
            f"{len(names)} item{'' if len(names) == 1 else 's'} {ACTIONS[action].done}: {shown}",
            {"items": names, **detail},
        )
    return len(changed)
