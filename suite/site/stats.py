"""The one comparison test of the board (rule TEST in suite/site/lead.py): Welch's t over seeds, with
the test set's binomial sampling error added as a variance known without seeds. Every comparison the
board states (a cell against another, a cell against its baseline, steps to target) asks
:func:`clearly_ahead`. No scipy: the site builds from the records alone, so Student's t is computed
here from the regularized incomplete beta function."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

LEVEL = 0.05  # two-sided: a lead is stated when a difference this large would arise by chance less often


@dataclass(frozen=True)
class Estimate:
    """A cell's mean of a quantity over seeds, with what makes it uncertain: the spread of its seeds
    and ``known_var``, a variance of the mean known without seeds (the test set's sampling error:
    every seed is scored on the same test examples, so seeds do not average it away)."""

    values: tuple[float, ...]  # one per seed
    known_var: float = 0.0

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values)

    @property
    def seed_var(self) -> float:
        """The variance of the mean from the seeds' spread, s² / n (0 with one seed)."""
        n = len(self.values)
        return statistics.variance(self.values) / n if n >= 2 else 0.0


def z_critical() -> float:
    """The normal quantile a two-sided test at LEVEL rejects beyond (1.96 at 0.05)."""
    return statistics.NormalDist().inv_cdf(1 - LEVEL / 2)


def binomial_var(p: float, examples: int | None) -> float:
    """The sampling variance of an accuracy ``p`` measured on ``examples`` test examples (0 without a size)."""
    return p * (1 - p) / examples if examples else 0.0


def accuracy_estimate(values: list[float], examples: int | None) -> Estimate:
    """Accuracies over seeds on one test set of ``examples``: seed spread plus the set's binomial error."""
    return Estimate(tuple(values), binomial_var(statistics.fmean(values), examples))


def welch(a: Estimate, b: Estimate) -> tuple[float, float]:
    """(t, df) of ``a``'s mean minus ``b``'s: the difference over its standard error, with the
    Welch-Satterthwaite degrees of freedom. A known variance has infinite degrees of freedom, so it
    adds to the error without adding to the denominator of df; with no seed spread at all df is
    infinite (a z-test). A difference with no error at all is infinitely sure, or none (t = 0)."""
    parts = [(e.seed_var, len(e.values) - 1) for e in (a, b) if e.seed_var > 0]
    variance = a.seed_var + b.seed_var + a.known_var + b.known_var
    diff = a.mean - b.mean
    if variance == 0:
        return (math.copysign(math.inf, diff) if diff else 0.0), math.inf
    spread = sum(v ** 2 / d for v, d in parts)  # 0 also where a tiny seed variance underflows when squared
    df = variance ** 2 / spread if spread > 0 else math.inf
    return diff / math.sqrt(variance), df


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom (normal for infinite df)."""
    if math.isinf(t):
        return 0.0
    if math.isinf(df):
        return math.erfc(abs(t) / math.sqrt(2))
    return incomplete_beta(df / (df + t * t), df / 2, 0.5)


def p_value(a: Estimate, b: Estimate) -> float:
    """The two-sided p-value of the difference between ``a``'s and ``b``'s means."""
    return t_two_sided_p(*welch(a, b))


def clearly_ahead(a: Estimate, b: Estimate, higher: bool = True) -> bool:
    """Whether ``a`` is better than ``b`` (higher, or with ``higher`` false lower) at LEVEL."""
    diff = a.mean - b.mean
    return (diff > 0 if higher else diff < 0) and p_value(a, b) < LEVEL


def incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz's
    method, as in Numerical Recipes' betacf), on the side where it converges fast."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * beta_fraction(x, a, b) / a
    return 1.0 - front * beta_fraction(1 - x, b, a) / b


def beta_fraction(x: float, a: float, b: float) -> float:
    tiny, c, d = 1e-300, 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h
