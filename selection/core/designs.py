"""The designs a pair's human judgments can be bought by, replayed on a study's own judgments: items first (one
rater per item, the others only where the pair stays open), continuous or group-sequential looks, with or without
the judges' verdicts inside the decision (docs/decisions.md#replays).

With the judges, the decision is prediction-powered (Zrnic & Candes, "Active, anytime-valid prediction-powered
inference", 2024): every item's judge prediction f_i in [0, 1] is known, an item's human label y_i is bought with
probability pi (xi_i ~ Bernoulli(pi), independent of everything), and the sequence observes

    Delta_i = f_i + (y_i - f_i) * xi_i / pi,        E[Delta_i] = E[y_i] = the pair's win rate, whatever f is.

Delta_i lies in [1 - 1/pi, 1/pi], so the betting sequence (``decisions.betting_confidence_sequence``) runs on
Delta rescaled to [0, 1] (a half stays a half) and its interval is mapped back; group-sequential looks read Delta's
mean and variance as they read item scores. f_i is the judges' item score passed through a line fitted by least
squares on the items labelled *before* i (predictable, so validity does not depend on it; the raw judges' score
until five labels exist): a judge that agrees with the people makes Delta nearly y at a fraction of the labels, one
that does not costs at most the variance of inverse-probability weighting. pi = 1 is people alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from selection.core import decisions, group_sequential
from selection.core.decisions import UNDECIDED

CONTINUOUS = "continuous"
MIN_FIT = 5  # labelled items before f is fitted to them


def first_share(looks: int) -> float:
    """The share of a pair's alpha that one rater per item first spends on its first phase (the rest on whole items):
    one half looking after every item, 0.3 with planned looks (chosen on PRD: borderline pairs are decided by whole
    items, clear ones by single votes at any alpha; bench/README.md). The live plan's and the replay's."""
    return 0.3 if looks else 0.5


@dataclasses.dataclass(frozen=True)
class Design:
    """How a replay buys a pair's judgments: ``one_first`` (one rater per item while items remain, the other raters
    only where the pair stays undecided, each phase at alpha / 2), ``looks`` (0: continuous monitoring with the
    betting sequence; K: group-sequential over K equally spaced looks at the pool), ``judges`` with ``label_rate``
    (prediction-powered with the judges' verdicts, humans on a share pi of the items); ``futility`` (with looks: a phase
    stops undecided at a look whose conditional power is below it, ``group_sequential.looks_at``: the pair's items
    go to pairs that can still be decided, and items first moves on to whole items); ``first_share``: the share of
    alpha items first spends on its phase 1 (the rest on phase 2; the live plan's is one half)."""

    one_first: bool = True
    looks: int = 0
    judges: bool = False
    label_rate: float = 0.5
    futility: float = 0.0
    first_share: float = 0.5

    @property
    def name(self) -> str:
        looking = f"group-sequential ({self.looks} looks)" if self.looks else CONTINUOUS
        buying = (
            (
                "one rater per item first"
                + (f" (phase 1 at {self.first_share:g} alpha)" if self.first_share != 0.5 else "")
            )
            if self.one_first
            else "whole items"
        )
        judged = f", judges inside (humans on {self.label_rate:g} of items)" if self.judges else ""
        futile = f", futility stop below {self.futility:g} conditional power" if self.looks and self.futility else ""
        return f"{looking}{futile}, {buying}{judged}"


@dataclasses.dataclass(frozen=True)
class DesignReplay:
    """One replay: what was decided, after how many items, the human judgments and judge verdicts it used, and the
    fixed design's human judgments (every judgment of every item)."""

    decision: str
    items_used: int
    judgments_used: int
    judgments_fixed: int
    judge_verdicts_used: int


def ppi_observations(
    labels: npt.ArrayLike, predictions: npt.ArrayLike, labelled: npt.ArrayLike, rate: float
) -> npt.NDArray[np.float64]:
    """Delta_i = f_i + (y_i - f_i) xi_i / pi, with f_i the judges' score ``predictions`` passed through the line
    fitted on the labelled items before i (predictable). ``labels`` may hold anything where not ``labelled``."""
    y = np.asarray(labels, dtype=np.float64)
    g = np.asarray(predictions, dtype=np.float64)
    xi = np.asarray(labelled, dtype=bool)
    if not 0 < rate <= 1:
        raise ValueError("the labelling rate must be in (0, 1]")
    f = np.empty(len(g))
    sx = sy = sxx = sxy = 0.0
    count = 0
    for i in range(len(g)):
        if count >= MIN_FIT and count * sxx - sx * sx > 1e-12:
            slope = (count * sxy - sx * sy) / (count * sxx - sx * sx)
            f[i] = min(1.0, max(0.0, (sy - slope * sx) / count + slope * g[i]))
        else:
            f[i] = g[i]
        if xi[i]:
            sx, sy, sxx, sxy, count = sx + g[i], sy + y[i], sxx + g[i] ** 2, sxy + g[i] * y[i], count + 1
    return f + np.where(xi, (np.where(xi, y, 0.0) - f) / rate, 0.0)


def first_decision(
    x: npt.NDArray[np.float64],
    design: Design,
    alpha: float,
    margin: float,
    low: float = 0.0,
    high: float = 1.0,
    grid: int = decisions.GRID,
    labelled: npt.NDArray[np.bool_] | None = None,
) -> tuple[str, int | None]:
    """The design's first decision over observations ``x`` of the win rate (in [low, high]) in arrival order, and
    after how many (None: none); ``grid``: the betting sequence's candidate means; ``labelled``: which observations
    carry a person's label (group-sequential looks take their degrees of freedom from them)."""
    if design.looks:
        return group_sequential.first_decision(x, design.looks, alpha, margin, labelled, design.futility)
    if len(x) == 0:
        return UNDECIDED, None
    span = high - low
    lower, upper = decisions.betting_confidence_sequence((x - low) / span, alpha, grid=grid)
    for t, (lo, hi) in enumerate(zip((low + span * lower).tolist(), (low + span * upper).tolist(), strict=True)):
        call = decisions.decide(lo, hi, margin)
        if call != UNDECIDED:
            return call, t + 1
    return UNDECIDED, None


class PairStream:
    """One pair's replay under a design, an item at a time: the one home of the per-pair design (``replay`` runs it to
    the end; ``racing.race_replay`` gives items to several pairs under one budget). Per phase the items are drawn in a
    fresh random order (and, items first, one random rater each; with the judges, which items get a person) when the
    phase starts, in ``replay``'s order of draws; each ``buy`` observes the phase's next item. A phase's decision is
    read once over its whole order when it starts and revealed at the item it falls on: every design's decision after
    t items reads only the first t (the betting sequence and the fitted f_i are predictable, a look reads the items
    up to it and the pool's size), so revealing it item by item is the same as checking after every item."""

    def __init__(
        self,
        raters: Sequence[npt.ArrayLike],
        rng: np.random.Generator,
        design: Design,
        alpha: float = 0.05,
        margin: float = 0.05,
        null: bool = False,
        costs: Sequence[npt.ArrayLike] | None = None,
        predictions: npt.ArrayLike | None = None,
        verdicts: npt.ArrayLike | None = None,
        grid: int = decisions.GRID,
    ) -> None:
        items = [np.asarray(r, dtype=np.float64) for r in raters]
        n = len(items)
        self._paid = (
            [np.ones(len(r), dtype=np.int64) for r in items]
            if costs is None
            else [np.asarray(c, np.int64) for c in costs]
        )
        judged = np.full(n, 0.5) if predictions is None else np.asarray(predictions, dtype=np.float64)
        self._counted = np.zeros(n, dtype=np.int64) if verdicts is None else np.asarray(verdicts, dtype=np.int64)
        if design.judges and predictions is None:
            raise ValueError("a design with the judges needs their predictions")
        if null:
            flip = rng.random(n) < 0.5
            items = [1 - r if f else r for r, f in zip(items, flip, strict=True)]
            judged = np.where(flip, 1 - judged, judged)
        self._items, self._judged, self._rng, self.design = items, judged, rng, design
        self._margin, self._grid = margin, grid
        self.fixed = int(sum(int(c.sum()) for c in self._paid))
        self._bought = [np.zeros(len(r), dtype=bool) for r in items]
        one_first = design.one_first and max((len(r) for r in items), default=0) > 1
        if not 0 < design.first_share < 1:
            raise ValueError("the first phase's share of alpha must be in (0, 1)")
        share = design.first_share
        self._phases = [(True, alpha * share), (False, alpha * (1 - share))] if one_first else [(False, alpha)]
        self.pool = n  # the pair's items: what each phase can observe
        self.decision = UNDECIDED
        self.open = True
        self.steps = 0  # items observed over all phases
        self._number = -1
        self._reached = self._verdicts_used = self._seen = self._stop = 0
        self._settle()

    def _start_phase(self) -> None:
        """Draw the next phase's order (and raters, and labels), and read its decision over the whole order."""
        n, rng, design = self.pool, self._rng, self.design
        single, level = self._phases[self._number]
        order = rng.permutation(n)
        if single:
            chosen = np.array([int(rng.integers(len(self._items[i]))) for i in order], dtype=np.int64)
            y = np.array([self._items[i][k] for i, k in zip(order, chosen, strict=True)])
        else:
            chosen = np.full(n, -1, dtype=np.int64)
            y = np.array([self._items[i].mean() for i in order])
        self._with_judges = design.judges and self._number == 0
        if self._with_judges:
            labelled = rng.random(n) < design.label_rate
            rate = design.label_rate
            x = ppi_observations(y, self._judged[order], labelled, rate)
            call, at = first_decision(x, design, level, self._margin, 1 - 1 / rate, 1 / rate, self._grid, labelled)
        else:
            labelled = np.ones(n, dtype=bool)
            x = y
            call, at = first_decision(y, design, level, self._margin, grid=self._grid)
        self._order, self._chosen, self._labelled, self._x = order, chosen, labelled, np.asarray(x, np.float64)
        self._call, self._stop, self._seen = call, n if at is None else at, 0

    def _settle(self) -> None:
        """Close the phase whose decision or end has been reached: decided, on to the next phase, or out of phases."""
        while self.open and self._seen >= self._stop:
            if self._number >= 0 and self._call != UNDECIDED:
                self.decision, self.open = self._call, False
            elif self._number + 1 < len(self._phases):
                self._number += 1
                self._start_phase()
            else:
                self.open = False

    def next_cost(self) -> int:
        """The human judgments the next item costs (0 where the judges stand in for a person, or already bought)."""
        if not self.open:
            raise ValueError("the pair's replay is over")
        t = self._seen
        if not self._labelled[t]:
            return 0
        i, k = int(self._order[t]), int(self._chosen[t])
        if k >= 0:
            return 0 if self._bought[i][k] else int(self._paid[i][k])
        return int(self._paid[i][~self._bought[i]].sum())

    def buy(self) -> None:
        """Observe the phase's next item (buying its human judgments where it has a person)."""
        if not self.open:
            raise ValueError("the pair's replay is over")
        t = self._seen
        i, k = int(self._order[t]), int(self._chosen[t])
        if self._labelled[t]:
            if k >= 0:
                self._bought[i][k] = True
            else:
                self._bought[i][:] = True
        if self._with_judges:
            self._verdicts_used += int(self._counted[i])
        self._seen += 1
        self.steps += 1
        self._reached = max(self._reached, self._seen)  # items any phase has looked at
        self._settle()

    @property
    def looks(self) -> bool:
        """Whether the design reads planned looks (which read the observations' spread) rather than the betting
        sequence (which does not)."""
        return bool(self.design.looks)

    @property
    def scores(self) -> npt.NDArray[np.float64]:
        """The current phase's observations so far (item scores, or the prediction-powered Delta_i)."""
        return self._x[: self._seen] if self._number >= 0 else np.zeros(0)

    @property
    def n(self) -> int:
        """Items the current phase has observed."""
        return len(self.scores)

    @property
    def mean(self) -> float:
        """The current phase's mean observation (a half before its first item)."""
        return float(self.scores.mean()) if self.n else 0.5

    @property
    def spent(self) -> int:
        """Human judgments bought so far."""
        return _cost(self._paid, self._bought)

    def result(self) -> DesignReplay:
        """The replay so far: its decision (undecided while open, e.g. where a budget cut it off), the items any
        phase has looked at, the human judgments and judge verdicts used, and the fixed design's judgments."""
        return DesignReplay(self.decision, self._reached, self.spent, self.fixed, self._verdicts_used)


def replay(
    raters: Sequence[npt.ArrayLike],
    rng: np.random.Generator,
    design: Design,
    alpha: float = 0.05,
    margin: float = 0.05,
    null: bool = False,
    costs: Sequence[npt.ArrayLike] | None = None,
    predictions: npt.ArrayLike | None = None,
    verdicts: npt.ArrayLike | None = None,
    grid: int = decisions.GRID,
) -> DesignReplay:
    """One replay of a pair under ``design``: per phase, the items in a fresh random order, observed until the
    design decides or the pool runs out. Items first: phase 1 observes one random rater of each item at alpha / 2,
    phase 2 (only if phase 1 ends undecided) whole items at alpha / 2 (union bound, as
    ``decisions.replay_one_rater_first``); whole items: one phase at alpha. With the judges, phase 1 (or the one
    phase) is prediction-powered: each item's human label bought with probability ``design.label_rate``; phase 2
    buys people on every item it observes. Items first splits alpha ``first_share`` : 1 - ``first_share``.

    ``raters``: per item, each rater's score for the pair's first system; ``costs``: per item, each rater's
    judgments (default one); ``predictions``: per item, the judges' score (needed with judges); ``verdicts``: per
    item, the judges' verdicts (what ``judge_verdicts_used`` counts); ``null`` mirrors each item, its judges' score
    too, with probability 1/2 (A/A); ``grid``: the betting sequence's candidate means (any grid keeps its
    guarantee: its ends reach outwards)."""
    stream = PairStream(raters, rng, design, alpha, margin, null, costs, predictions, verdicts, grid)
    while stream.open:
        stream.buy()
    return stream.result()


def _cost(paid: list[npt.NDArray[np.int64]], bought: list[npt.NDArray[np.bool_]]) -> int:
    return int(sum(int(c[b].sum()) for c, b in zip(paid, bought, strict=True)))
