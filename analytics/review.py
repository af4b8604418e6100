"""Every verdict of a pair, where they disagree, and the researcher's rulings: the item page's verdicts and the
review queue (Label Studio's data manager, for preferences).

Disagreement is read on the main question (the one judges answer too); the answers to further questions
(``annotation/questions.py``) are listed with each verdict. A pair is *flagged* when its people disagree with each
other (``winners.raters_disagree``: two raters whose preferences differ) or a judge's preference differs from the
people's winner (``winners.item_winner``). Raters the attention checks screened out are listed but neither decide
the winner nor raise a flag, as in the report. A ruling (``Adjudication``) is stored apart from the judgments: the
analysis stays what the raters said.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from django.db import transaction
from django.utils import timezone

from analytics.models import Adjudication
from annotation import elicitation, questions
from annotation.models import Item, JudgeCall, Judgment, Pair, Study
from annotation.studies import team
from selection.core import winners

REASONS = {"raters": "raters disagree", "judge": "a judge disagrees with the people"}


@dataclasses.dataclass
class Verdict:
    """One judgment of a pair as the review shows it."""

    judgment_id: int
    rater: str
    source: str
    screened_out: bool
    superseded: bool  # left out of the counted items by a live selection loop, as the report leaves it out
    first_shown: str  # the system shown first
    words: str  # the answer in words, naming the systems
    rating: int | None  # -1 A, 0 none, +1 B (selection.core.winners)
    comment: str
    seconds: float | None
    disagrees: bool = False  # a rater against the majority, a judge against the people's winner
    reply: str | None = None  # a judge's reply as received (judges run by SepLab)
    further: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (question, answer in words)


@dataclasses.dataclass
class PairReview:
    """A pair's verdicts, the people's winner, what disagrees, and the ruling if there is one."""

    pair_id: int
    item_id: int
    item: str
    system_a: str
    system_b: str
    samples: tuple[int, int]
    humans: list[Verdict]
    judges: list[Verdict]
    people_winner: str | None  # a | b | tie, None without a counted human judgment
    raters_disagree: bool
    adjudication: Adjudication | None = None
    requested: bool = False  # its item was sent to review from the data manager (``Item.review_requested``)
    people: dict[str, int] = dataclasses.field(default_factory=dict)  # each counted rater's preference

    against_judges: set = dataclasses.field(default_factory=set)  # judges whose preference is not the people's

    @property
    def judges_disagree(self) -> list[str]:
        return sorted(self.against_judges)

    @property
    def flagged(self) -> bool:
        return self.raters_disagree or bool(self.judges_disagree)

    @property
    def reasons(self) -> list[str]:
        return ([REASONS["raters"]] if self.raters_disagree else []) + (
            [REASONS["judge"] + f" ({', '.join(self.judges_disagree)})"] if self.judges_disagree else []
        )

    @property
    def ruling_choices(self) -> list[tuple[str, str]]:
        """The rulings a researcher can make, naming the pair's systems."""
        return Adjudication.choices_for(self.system_a, self.system_b)

    @property
    def ruling_words(self) -> str:
        return dict(self.ruling_choices)[self.adjudication.ruling].lower() if self.adjudication else ""

    @property
    def people_words(self) -> str:
        """The people's winner in words, with how many raters prefer it."""
        if self.people_winner is None:
            return "no counted human judgment yet"
        prefs = self.people
        n = len(prefs)
        if self.people_winner == "tie":
            if not any(prefs.values()):
                return f"the people see no difference ({_raters(n)})"
            return f"the people are split ({_raters(n)})"
        name = self.system_a if self.people_winner == "a" else self.system_b
        agree = sum(1 for p in prefs.values() if p == winners.RATING[self.people_winner])
        return f"the people prefer {name} ({agree} of {_raters(n)})"


def _raters(n: int) -> str:
    return f"{n} rater" + ("" if n == 1 else "s")


def preferences(verdicts: list[Verdict]) -> dict[str, int]:
    """Each counted rater's preference on the pair (the sign over their ratings of it): screened-out raters and
    superseded judgments are left out, as the report leaves them out."""
    sets: dict[str, list[int]] = defaultdict(list)
    for v in verdicts:
        if v.rating is not None and not v.screened_out and not v.superseded:
            sets[v.rater].append(v.rating)
    return {rater: winners.rater_preference(r) for rater, r in sets.items()}


_FIELDS = (
    "id",
    "pair_id",
    "pair__item_id",
    "pair__item__external_id",
    "pair__item__review_requested",
    "pair__generation_a__system__name",
    "pair__generation_b__system__name",
    "pair__generation_a__sample_index",
    "pair__generation_b__sample_index",
    "rater__external_id",
    "rater__kind",
    "rater__source",
    "rater__screened_out",
    "superseded",
    "a_shown_first",
    "choice",
    "response_set",
    "strength",
    "probability_a",
    "comment",
    "time_on_task_ms",
    "answers",
)


def _further_words(asked: list[questions.Question], answers: dict, a: str, b: str) -> list[tuple[str, str]]:
    """A judgment's answers to the study's further questions, each in words (a rationale as written)."""
    out = []
    for q in asked:
        stored = questions.stored_fields(answers, q.key)
        if stored is None:
            continue
        out.append(
            (
                q.text,
                stored["text"]
                if "text" in stored
                else elicitation.stored_in_words(
                    stored.get("choice"), stored.get("response_set"), stored.get("strength"), None, a, b
                ),
            )
        )
    return out


def _reviews(judgments, asked: list[questions.Question], *, replies: bool) -> list[PairReview]:
    """The pairs of ``judgments`` with their verdicts; the further questions' answers read only when some are
    ``asked`` (their JSON is most of a row's reading)."""
    fields = _FIELDS if asked else tuple(f for f in _FIELDS if f != "answers")
    rows = list(
        judgments.filter(revised=False).order_by("pair__item__position", "pair_id", "created", "id").values(*fields)
    )
    by_pair: dict[int, PairReview] = {}
    for r in rows:
        a, b = r["pair__generation_a__system__name"], r["pair__generation_b__system__name"]
        review = by_pair.get(r["pair_id"])
        if review is None:
            review = by_pair[r["pair_id"]] = PairReview(
                r["pair_id"],
                r["pair__item_id"],
                r["pair__item__external_id"],
                a,
                b,
                (r["pair__generation_a__sample_index"], r["pair__generation_b__sample_index"]),
                [],
                [],
                None,
                False,
                requested=r["pair__item__review_requested"],
            )
        choice = elicitation.effective_choice(r["choice"], r["response_set"], r["probability_a"])
        verdict = Verdict(
            r["id"],
            r["rater__external_id"],
            r["rater__source"],
            r["rater__screened_out"],
            r["superseded"],
            a if r["a_shown_first"] else b,
            elicitation.stored_in_words(r["choice"], r["response_set"], r["strength"], r["probability_a"], a, b),
            None if choice is None else winners.rating_for(choice),
            r["comment"],
            None if r["time_on_task_ms"] is None else r["time_on_task_ms"] / 1000,
            further=_further_words(asked, r["answers"], a, b) if asked else [],
        )
        (review.judges if r["rater__kind"] == "judge" else review.humans).append(verdict)
    for review in by_pair.values():
        people = review.people = preferences(review.humans)
        if people:
            review.people_winner = winners.item_winner([[p] for p in people.values()])
        review.raters_disagree = winners.raters_disagree([[p] for p in people.values()])
        # the raters against the majority (both sides when the people are split); raters who disagree are people, so
        # there is a winner
        if review.raters_disagree and review.people_winner is not None:
            for v in review.humans:
                v.disagrees = (
                    not v.superseded and v.rater in people and people[v.rater] != winners.RATING[review.people_winner]
                )
        if review.people_winner is not None:
            against = {
                judge
                for judge, preference in preferences(review.judges).items()
                if preference != winners.RATING[review.people_winner]
            }
            review.against_judges = against
            for v in review.judges:  # the pair is flagged by the judge's preference, a row by its own verdict
                v.disagrees = (
                    v.rater in against
                    and not v.superseded
                    and v.rating is not None
                    and v.rating != winners.RATING[review.people_winner]
                )
    if replies:
        ids = [v.judgment_id for review in by_pair.values() for v in review.judges]
        calls = {
            c["judgment_id"]: c for c in JudgeCall.objects.filter(judgment_id__in=ids).values("judgment_id", "reply")
        }
        for review in by_pair.values():
            for v in review.judges:
                if v.judgment_id in calls:
                    v.reply = calls[v.judgment_id]["reply"]
    rulings = {a.pair_id: a for a in Adjudication.objects.filter(pair_id__in=by_pair).select_related("decided_by")}
    for pair_id, review in by_pair.items():
        review.adjudication = rulings.get(pair_id)
    return list(by_pair.values())


def reviews(judgments, study: Study) -> list[PairReview]:
    """Every judged pair of ``judgments`` (a study's) with its verdicts, in item order (judges' replies left out)."""
    return _reviews(judgments, questions.further(study), replies=False)


def item_review(item: Item) -> list[PairReview]:
    """Every judged pair of ``item`` with all its verdicts, judges' replies included, in item order."""
    return _reviews(
        Judgment.objects.filter(study_id=item.study_id, pair__item=item), questions.further(item.study), replies=True
    )


SHOW = {"open": "Not yet ruled on", "ruled": "Ruled on", "all": "Every flagged, sent or ruled pair"}
WHY = {
    "any": "Any reason",
    "raters": "Raters disagree",
    "judge": "A judge disagrees with the people",
    "requested": "Sent to review",
}


def review_queue(study: Study, show: str = "open", why: str = "any") -> tuple[list[PairReview], dict]:
    """The pairs of ``study`` to review -- of the items analysed (``Judgment.objects.analysed``: an excluded item is
    out of the queue) -- (``show``: flagged or sent to review and not yet ruled on / ruled on, flagged or not -- a
    ruling can be made from any item's page / all of them; ``why``: any, raters disagreeing, a judge against the
    people, or sent from the data manager), the most contested first -- both kinds of disagreement, then the most
    verdicts -- and the counts: flagged pairs, of each kind, pairs sent to review, and rulings."""
    found = [
        r
        for r in reviews(Judgment.objects.analysed().filter(study=study), study)
        if r.flagged or r.requested or r.adjudication is not None
    ]
    flagged = [r for r in found if r.flagged]
    counts = {
        "flagged": len(flagged),
        "raters": sum(r.raters_disagree for r in flagged),
        "judge": sum(bool(r.judges_disagree) for r in flagged),
        "requested": sum(r.requested for r in found),
        "ruled": sum(r.adjudication is not None for r in found),
    }
    shown = {
        "open": lambda r: (r.flagged or r.requested) and r.adjudication is None,
        "ruled": lambda r: r.adjudication is not None,
        "all": lambda r: True,
    }[show]
    reason = {
        "any": lambda r: True,
        "raters": lambda r: r.raters_disagree,
        "judge": lambda r: bool(r.judges_disagree),
        "requested": lambda r: r.requested,
    }[why]
    chosen = [r for r in found if shown(r) and reason(r)]
    chosen.sort(key=lambda r: (-(r.raters_disagree and bool(r.judges_disagree)), -(len(r.humans) + len(r.judges))))
    return chosen, counts


class RulingError(ValueError):
    """A ruling the server does not accept; the message is for the researcher."""


def do_adjudicate(study: Study, pair_id: int, ruling: str, note: str, user) -> Adjudication:
    """Record (or change) the researcher's ruling on a pair of ``study``. Only a pair with at least one verdict can
    be ruled on, and not one of an item excluded in the data manager (out of the analysis, and of the queue). The
    judgments are not touched."""
    if ruling not in Adjudication.Ruling.values:
        raise RulingError("Choose a ruling.")
    with transaction.atomic():
        pair = Pair.objects.filter(pk=pair_id, item__study=study).first()
        if pair is None or not Judgment.objects.filter(study=study, pair=pair, revised=False).exists():
            raise RulingError("That pair has no verdicts in this study.")
        if pair.item.excluded:
            raise RulingError(f"Item {pair.item.external_id} is excluded from the analysis: re-open it to rule on it.")
        adjudication, _ = Adjudication.objects.update_or_create(
            pair=pair,
            defaults={
                "study": study,
                "ruling": ruling,
                "note": note.strip(),
                "decided_by": user,
                "decided": timezone.now(),
            },
        )
        team.do_audit(
            study,
            user,
            "ruling",
            f"ruled {adjudication.get_ruling_display()} on item {pair.item.external_id}",
            {"pair": pair.pk, "item": pair.item.external_id, "ruling": ruling, "note": note.strip()},
        )
    return adjudication


def do_clear_adjudication(study: Study, pair_id: int, user=None) -> bool:
    """Withdraw the ruling on a pair; whether there was one."""
    with transaction.atomic():
        deleted, _ = Adjudication.objects.filter(study=study, pair_id=pair_id).delete()
        if deleted:
            team.do_audit(study, user, "ruling_withdrawn", f"withdrew the ruling on pair {pair_id}", {"pair": pair_id})
    return bool(deleted)
