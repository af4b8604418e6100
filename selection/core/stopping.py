"""The hypergeometric stopping rule of DiffUse (Appendix A.2 of the DiffUse paper;
docs/diffuse.md#hypergeometric-stopping-rule). Whether it decides a
pair is read in the one home of "is this pair decided", ``selection.core.decisions.from_hypergeometric``.

Null hypothesis: the two systems are equally good on the pool, i.e. half of the N_pool candidate
items prefer each. Having decided n items of which k vote for the leading system, the risk is the
chance of a lead at least this large under the null: ``hypergeom.sf(k - 1, N_pool, N_pool // 2, n)``.
"""

from __future__ import annotations

import dataclasses


def hypergeometric_risk(n_pool: int, n_decided: int, k_leading: int) -> float:
    """P(X >= k) for X ~ Hypergeometric(N_pool, N_pool // 2, n). 1.0 when nothing is decided."""
    if n_pool < 1 or not 0 <= k_leading <= n_decided <= n_pool:
        raise ValueError(f"need 0 <= k <= n <= N_pool, got k={k_leading}, n={n_decided}, N_pool={n_pool}")
    if n_decided == 0:
        return 1.0
    from scipy.stats import hypergeom  # imported when used: scipy.stats takes 0.6 s, and every command loads this app

    return float(hypergeom.sf(k_leading - 1, n_pool, n_pool // 2, n_decided))


def binomial_risk(n_decided: int, k_leading: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2): the hypergeometric risk's limit as the pool grows without bound.
    It speaks of the systems beyond the pool: when every pool item is decided the hypergeometric risk is 0
    (the pool's winner is known), but this one is not. 1.0 when nothing is decided."""
    if not 0 <= k_leading <= n_decided:
        raise ValueError(f"need 0 <= k <= n, got k={k_leading}, n={n_decided}")
    from scipy.stats import binom

    return float(binom.sf(k_leading - 1, n_decided, 0.5)) if n_decided else 1.0


@dataclasses.dataclass(frozen=True)
class StoppingStatus:
    leader: str | None  # "a", "b", or None on a level score
    wins_a: int
    wins_b: int
    ties: int
    n: int
    k: int
    risk: float
    threshold: float
    n_pool: int

    @property
    def risk_beyond_pool(self) -> float:
        return binomial_risk(self.n, self.k)


def stopping_status(
    wins_a: int, wins_b: int, ties: int, n_pool: int, threshold: float, ties_count_in_n: bool = True
) -> StoppingStatus:
    """Leader, k of n and risk for a vote count. Ties count in n but not in k by default (the
    conservative choice of docs/diffuse.md#hypergeometric-stopping-rule); ``ties_count_in_n=False`` leaves them out of
    n as well."""
    k = max(wins_a, wins_b)
    n = wins_a + wins_b + (ties if ties_count_in_n else 0)
    leader = None if wins_a == wins_b else ("a" if wins_a > wins_b else "b")
    return StoppingStatus(leader, wins_a, wins_b, ties, n, k, hypergeometric_risk(n_pool, n, k), threshold, n_pool)
