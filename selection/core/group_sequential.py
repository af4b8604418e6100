"""Group-sequential looks at a pair's items: Lan--DeMets alpha spending with the O'Brien--Fleming-type function, the
boundaries over planned looks, and the decision a look's repeated confidence interval settles
(docs/decisions.md#group-sequential-looks).

A pair's pool holds N items; the study looks after n_1 < n_2 < ... < n_K = N of them (information fraction
t_k = n_k / N). Each side spends alpha / 2 by the O'Brien--Fleming-type function of Lan & DeMets (1983),

    alpha(t) = 2 (2 - 2 Phi( z_{1 - alpha/4} / sqrt(t) ))      (both sides together; alpha at t = 1),

the symmetric two-sided design as gsDesign (``sfLDOF``) and ldbounds compute it. With Z_k the standardised mean
after look k (corr(Z_j, Z_k) = sqrt(t_j / t_k): independent increments), the boundaries c_k solve

    P( |Z_j| < c_j for j < k, |Z_k| >= c_k ) = alpha(t_k) - alpha(t_{k-1}),

one look at a time, by the standard recursive integration (Armitage, McPherson & Rowe 1969; Jennison & Turnbull,
*Group Sequential Methods*, 2000, ch. 19): the sub-density of the score process on the continuation region carried
from look to look by the normal increment (Simpson's rule), and a root search on the exit probability. For K = 5
equal looks at alpha = 0.05 that gives 4.877, 3.357, 2.680, 2.290, 2.031; the tests check the total crossing
probability against scipy's multivariate normal. No maintained Python package was used: ``gsdesign`` 0.1.5 on the
package index is a young one-author release (2026-11), and the computation is thirty lines of numpy and scipy.

At look k the repeated confidence interval is every win rate mu the look's statistic does not reject,

    |mean - mu| <= c_k * sqrt( mean((x - mu)^2) / n_k ),   i.e.   mean +- c_k * s / sqrt(n_k - c_k^2),

s^2 = mean((x - mean)^2) (the second moment about mu is s^2 + (mean - mu)^2; no interval while n_k <= c_k^2). It is
the score (Wilson-type) form of the look: the sum of x - mu over its own root sum of squares, the self-normalised
sum, whose variance is exactly one when the items are symmetric about mu -- A/A, whatever their spread or ties -- and
whose tails are then sub-Gaussian (Efron 1969, "Student's t-test under symmetry conditions"; Hoeffding's bound
conditional on |x - mu|), its increments independent given their sizes; the normal boundaries c_k are applied to
it. That is an approximation, not a theorem: the sub-Gaussian bound alone is weaker than the normal tail, and given
the sizes a look's information share is its part of the sum of squares, not n_k / N. Its size is checked exactly on
PRD's single-vote pairs and by simulation on the rest (below); the betting sequence (``decisions``) is the exact
option. The Student-t reading used before (c_k as a t quantile with n_k - 1 degrees of freedom, mean +-
c'_k sd / sqrt(n_k)) is the same statistic at a lower bar -- t = sqrt((n - 1) / n) W / sqrt(1 - W^2 / n) for W the
self-normalised sum, so t >= c' is W >= c' sqrt(n / (n - 1 + c'^2)), below c_k -- and at a split alpha far in the
tail it let PRD's bounded item scores through more often than it spent (0.54 % of 50,000 A/A replays a pair at
0.005, SE 0.03; exactly 0.61 % on three of the four single-vote pairs; at its first look of 16 items, where 3e-11
was spent, an order whose 16 items all leaned one way by as much decided, a chance of 2^-15 with single votes).
The variance is the items' own, without a finite-population correction: the items stand for items like them (the
target of a t-test on all of a pair's items and of an A/A null), and the pool enters through the information
fraction. A pool seen whole is the last look. With prediction-powered observations, where the labelled items carry
the variance, n_k - c_k^2 is read as n_k (1 - c_k^2 / m_k) for m_k labels seen: not derived (the same algebra gives
n_k - c_k^2 for any observations) but a heuristic on the cautious side, as m_k <= n_k makes it no smaller a width.

Item scores are coarse -- a single vote is 0, 1/2 or 1, three votes move in sixths -- so the sum of n_k of them
moves on a lattice of the scores' smallest step delta, and the half-width adds Yates' continuity correction
delta / (2 n_k). Without it the normal boundary counts the lattice's atoms at full weight (PRD's single-vote pairs
crossed in 0.48-0.66 % of A/A orders at 0.005 with the score form alone). With both, exactly (every order, every
mirroring; tests/selection/core/test_group_sequential_size.py) the single-vote pairs cross in 0.30-0.44 % at 0.005,
0.08-0.12 % at 0.0015 and 3.97-4.73 % at 0.05, and ``simulate --replay --null`` on all ten PRD pairs (3,000 orders
a pair) calls 0.35 % of pairs at 0.005 (SE 0.03; study-wide 3.5 % of studies against 5 %; bench/README.md).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from scipy import optimize, stats

from selection.core.decisions import UNDECIDED, decide


def obf_spending(t: npt.ArrayLike, alpha: float) -> npt.NDArray[np.float64]:
    """Alpha spent by information fraction t, both sides together: O'Brien--Fleming-type spending of Lan & DeMets
    for each side at alpha / 2, ``2 (2 - 2 Phi(z_{1 - alpha/4} / sqrt(t)))`` (the symmetric two-sided design of
    gsDesign and ldbounds; alpha at t = 1)."""
    t = np.asarray(t, dtype=np.float64)
    z = stats.norm.isf(alpha / 4) / np.sqrt(np.maximum(t, 1e-300))
    return np.asarray(np.where(t > 0, 4 * stats.norm.sf(z), 0.0), dtype=np.float64)


def boundaries(fractions: Sequence[float], alpha: float = 0.05) -> npt.NDArray[np.float64]:
    """The two-sided boundaries c_1..c_K on the standardised statistic for looks at increasing information
    fractions ``fractions`` (the last normally 1) under O'Brien--Fleming-type spending at ``alpha``."""
    return np.array(_boundaries(tuple(float(f) for f in np.ravel(fractions)), float(alpha)))


MOST_LOOKS = 20  # the most planned looks a study may choose (0: continuous monitoring instead)
GRID = 801  # points of the continuation region in the recursive integration (Simpson's rule)


@functools.lru_cache(maxsize=256)
def _boundaries(fractions: tuple[float, ...], alpha: float) -> tuple[float, ...]:
    t = np.asarray(fractions, dtype=np.float64)
    if t.ndim != 1 or len(t) == 0 or np.any(np.diff(t) <= 0) or t[0] <= 0 or t[-1] > 1:
        raise ValueError("information fractions must increase within (0, 1]")
    if not 0 < alpha < 1:
        raise ValueError("need 0 < alpha < 1")
    spent = np.diff(np.concatenate([[0.0], obf_spending(t, alpha)]))
    out = [float(stats.norm.isf(spent[0] / 2))]
    # the score process B(t) = Z(t) sqrt(t) is Brownian motion: its sub-density on the continuation region is carried
    # from look to look by the normal increment (Armitage, McPherson & Rowe 1969; Jennison & Turnbull, ch. 19)
    edge = out[0] * np.sqrt(t[0])
    x = np.linspace(-edge, edge, GRID)
    density = stats.norm.pdf(x, scale=np.sqrt(t[0]))
    weights = _simpson(x)
    for k in range(1, len(t)):
        step = float(np.sqrt(t[k] - t[k - 1]))
        mass = density * weights

        def excess(
            b: float,
            mass: npt.NDArray[np.float64] = mass,
            step: float = step,
            x: npt.NDArray[np.float64] = x,
            target: float = float(spent[k]),
        ) -> float:
            return float(np.sum(mass * (stats.norm.cdf((-b - x) / step) + stats.norm.sf((b - x) / step)))) - target

        b = optimize.brentq(excess, 1e-6, 40.0, xtol=1e-10)
        out.append(b / np.sqrt(t[k]))
        y = np.linspace(-b, b, GRID)
        density = (mass[None, :] * stats.norm.pdf((y[:, None] - x[None, :]) / step) / step).sum(axis=1)
        x, weights = y, _simpson(y)
    return tuple(out)


def _simpson(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Simpson's weights on an odd number of equally spaced points."""
    w = np.ones(len(x))
    w[1:-1:2], w[2:-1:2] = 4, 2
    return np.asarray(w * (x[1] - x[0]) / 3, dtype=np.float64)


def look_sizes(pool: int, looks: int) -> list[int]:
    """Items seen at each of ``looks`` equally spaced looks at a pool of ``pool`` items (the last: the whole pool;
    sizes that round to the same number merged)."""
    if pool < 1 or looks < 1:
        raise ValueError("need a pool of at least one item and at least one look")
    return sorted({max(1, int(np.ceil(pool * k / looks))) for k in range(1, looks + 1)})


@dataclasses.dataclass(frozen=True)
class Look:
    """What one look saw and settled: items seen, the repeated confidence interval, the decision, and whether the
    look stopped the pair for futility (undecided, the pool too small for a decision it is heading to)."""

    n: int
    low: float
    high: float
    decision: str
    futile: bool = False


def looks_at(
    scores: npt.ArrayLike,
    looks: int,
    alpha: float = 0.05,
    margin: float = 0.05,
    pool: int | None = None,
    labelled: npt.ArrayLike | None = None,
    futility: float = 0.0,
) -> list[Look]:
    """Every planned look at item scores in arrival order (``pool``: the items the looks are planned over, default
    all of them), up to and including the first that decides or stops for futility; each look's interval is its
    score form (module docstring). ``labelled``: which observations carry a person's label (prediction-powered
    observations): the interval's small-sample term counts the labels seen, as the labelled items carry the
    variance. ``futility``: stop undecided at a look
    before the last once neither a direction nor (with a margin) equivalence is within reach -- the chance of
    crossing the last boundary if the trend seen so far continues (``conditional_power``) and the chance of the last
    look's interval falling inside the margin (``equivalence_chance``) both below it; 0: never. A futility stop only
    withholds decisions, so it cannot raise the error rate (a non-binding rule)."""
    x = np.asarray(scores, dtype=np.float64)
    if len(x) == 0:
        return []  # nothing seen: no look yet
    counts = np.cumsum(np.ones(len(x), dtype=bool) if labelled is None else np.asarray(labelled, dtype=bool))
    total = len(x) if pool is None else pool
    sizes = [n for n in look_sizes(total, looks) if n <= len(x)]
    if not sizes:
        return []
    every = boundaries([n / total for n in look_sizes(total, looks)], alpha)
    crit = every[: len(sizes)]
    out = []
    for n, c in zip(sizes, crit.tolist(), strict=True):
        seen = x[:n]
        mean = float(seen.mean())
        labels = int(counts[n - 1])
        # fewer than two labels (or one item): no variance to read, so nothing is settled yet
        se = float(seen.std(ddof=1)) / np.sqrt(n) if labels >= 2 and n > 1 else np.inf
        low, high = look_interval(seen, labels, c)
        call = decide(low, high, margin)
        futile = (
            call == UNDECIDED
            and futility > 0
            and n < total
            and bool(np.isfinite(se))
            and max(
                conditional_power(mean, se, n / total, float(every[-1])),
                equivalence_chance(mean, se, n / total, float(every[-1]), margin),
            )
            < futility
        )
        out.append(Look(n, low, high, call, futile))
        if call != UNDECIDED or futile:
            break
    return out


def look_interval(seen: npt.NDArray[np.float64], labels: int, bound: float) -> tuple[float, float]:
    """A look's repeated confidence interval for the win rate from the scores ``seen`` (``labels`` of them carry a
    person's label) at the look's boundary ``bound``: the score form's half-width (``score_width``) and the
    lattice's continuity correction (``lattice_step``) about the mean, within [0, 1]; [0, 1] before two labels."""
    n = len(seen)
    if labels < 2 or n < 2:
        return 0.0, 1.0  # no variance to read: nothing is settled yet
    mean = float(seen.mean())
    width = score_width(float(seen.std(ddof=0)), n, labels, bound) + lattice_step(seen) / (2 * n)
    return max(0.0, mean - width), min(1.0, mean + width)


def score_width(spread: float, n: int, labels: int, bound: float) -> float:
    """Half the width of a look's interval in its score form: ``bound * spread / sqrt(n (1 - bound^2 / labels))``,
    ``spread`` the items' root mean square about their mean (n in the denominator), ``labels`` the observations
    carrying the variance (n for people alone: ``bound * spread / sqrt(n - bound^2)``); infinite while
    ``labels <= bound^2`` (no mean is that far out: nothing can be settled yet)."""
    room = 1 - bound * bound / labels
    return float(bound * spread / np.sqrt(n * room)) if room > 0 else np.inf


def lattice_step(scores: npt.NDArray[np.float64]) -> float:
    """The smallest gap between distinct item scores seen (0 with fewer than two values): the sum of such scores moves
    in steps of it, and half a step over n items is the mean's continuity correction (Yates), which the look's
    interval adds to its half-width -- single votes (0, 1/2, 1) make a coarse lattice whose atoms the normal
    boundary otherwise counts at full weight. Read off the scores seen, not the design: where only 0 and 1 have been
    seen though ties are possible the step is overstated (a wider interval: cautious), and a run of one value gives
    no correction, where the interval needs n > c^2 items all alike, a chance of at most 2^(1 - n) under an A/A null:
    below what five looks spend up to that look at alpha 0.005 and 0.0015 at every look and at 0.05 at the first two,
    about equal to it (0.0078 against 0.0076) at 0.05 from the third look of a pool of a dozen items."""
    values = np.unique(np.round(scores, 9))
    return float(np.min(np.diff(values))) if len(values) > 1 else 0.0


def conditional_power(mean: float, se: float, t: float, last: float) -> float:
    """The chance that the last look's |Z| crosses ``last`` if the drift seen at information fraction t continues
    (the B-value of Lan & Wittes 1988: B(t) = Z_t sqrt(t), drift theta = Z_t / sqrt(t), B(1) - B(t) ~
    N(theta (1 - t), 1 - t)); the looks in between are ignored, which only understates the chance of a decision."""
    if se <= 0:
        return 1.0
    z = abs(mean - 0.5) / se
    b, drift = z * np.sqrt(t), z / np.sqrt(t)
    return float(stats.norm.sf((last - b - drift * (1 - t)) / np.sqrt(1 - t)))


def equivalence_chance(mean: float, se: float, t: float, last: float, margin: float) -> float:
    """The chance that the last look's interval lies inside (1/2 - margin, 1/2 + margin) -- an "equivalent" call --
    if the mean seen at information fraction t is the truth: with N = n / t items in all and sigma = se sqrt(n) the
    spread of an item's score, the last look's mean is M = (n mean + (N - n) m') / N with m' ~ N(mean, sigma^2 /
    (N - n)), so M ~ N(mean, se^2 t (1 - t)), and its half-width about ``last`` sigma / sqrt(N) = last se sqrt(t)
    (the normal's critical value for the t's: enough to steer a stop). 0 without a margin, once the last look is
    read, or when that half-width alone fills the margin."""
    if margin <= 0 or t >= 1:
        return 0.0
    if se <= 0:
        return 1.0 if abs(mean - 0.5) < margin else 0.0
    room = margin - last * se * np.sqrt(t)
    if room <= 0:
        return 0.0
    spread = se * np.sqrt(t * (1 - t))
    shift = mean - 0.5
    return float(stats.norm.cdf((room - shift) / spread) - stats.norm.cdf((-room - shift) / spread))


def first_decision(
    scores: npt.ArrayLike,
    looks: int,
    alpha: float = 0.05,
    margin: float = 0.05,
    labelled: npt.ArrayLike | None = None,
    futility: float = 0.0,
) -> tuple[str, int | None]:
    """The first decision over the planned looks at ``scores`` (the whole pool, in arrival order), and after how
    many items: (decision, n) once decided, ("undecided", n) when a look stopped for futility, ("undecided", None)
    when the pool ran out; ``labelled`` and ``futility`` as in ``looks_at``."""
    now = standing(scores, looks, alpha, margin, labelled=labelled, futility=futility)
    if now.decision != UNDECIDED or now.futile:
        return now.decision, now.n
    return UNDECIDED, None


def standing(
    scores: npt.ArrayLike,
    looks: int,
    alpha: float = 0.05,
    margin: float = 0.05,
    pool: int | None = None,
    labelled: npt.ArrayLike | None = None,
    futility: float = 0.0,
) -> Look:
    """Where a pair stands after the scores seen so far, in arrival order: its latest planned look (the deciding or
    futile one once there is one: scores arriving after it change nothing), or no look yet (n = 0, the interval
    [0, 1], undecided). The one decision of the live plan (``selection/hooks.py``, on the scores it stores) and of
    ``simulate --replay`` (``first_decision``); arguments as ``looks_at``."""
    seen = looks_at(scores, looks, alpha, margin, pool, labelled, futility)
    return seen[-1] if seen else Look(0, 0.0, 1.0, UNDECIDED)
