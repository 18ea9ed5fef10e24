"""The board's one comparison test (suite/site/stats.py) against textbook values, and the ranking
rules built on it (suite/site/rules.py) as properties: random cells never give an inconsistent
ordering (a cell above a tied one is tied, never behind; solved cells are always among the best)."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from suite.site import stats
from suite.site.rules import fastest, leaders


@pytest.mark.parametrize(("t", "df"), [(12.7062, 1), (4.302653, 2), (2.776445, 4), (2.228139, 10),
                                       (1.959964, math.inf)])
def test_the_t_distribution_matches_the_table_at_five_percent(t, df):
    assert stats.t_two_sided_p(t, df) == pytest.approx(0.05, abs=1e-6)


def test_welch_uses_the_satterthwaite_degrees_of_freedom():
    a, b = stats.Estimate((1.0, 2.0, 3.0, 4.0)), stats.Estimate((2.0, 4.0, 6.0, 8.0, 10.0))
    t, df = stats.welch(a, b)
    va, vb = statistics.variance(a.values) / 4, statistics.variance(b.values) / 5  # 5/12 and 2
    assert df == pytest.approx((va + vb) ** 2 / (va ** 2 / 3 + vb ** 2 / 4))  # 5.52, not 7 (pooled)
    assert t == pytest.approx((2.5 - 6.0) / math.sqrt(va + vb))
    # A known variance adds to the error, not to df's denominator: df grows.
    known = stats.Estimate(a.values, 1.0)
    assert stats.welch(known, b)[1] > df
    # A seed variance too small to square (1e-200) leaves df infinite rather than dividing by zero.
    assert stats.welch(stats.Estimate((0.0, 3e-100)), stats.Estimate((0.0, 0.0)))[1] == math.inf


def test_the_test_sets_sampling_error_is_added_to_the_seeds():
    # Two cells whose seeds agree to 0.1 point, 3 points apart: clear from the seeds alone, not on a
    # 1,000-example test set (binomial error about 1.6 points each), clear again on 100,000.
    a, b = [0.429, 0.430, 0.431], [0.399, 0.400, 0.401]
    assert stats.clearly_ahead(stats.Estimate(tuple(a)), stats.Estimate(tuple(b)))
    assert not stats.clearly_ahead(stats.accuracy_estimate(a, 1000), stats.accuracy_estimate(b, 1000))
    assert stats.clearly_ahead(stats.accuracy_estimate(a, 100_000), stats.accuracy_estimate(b, 100_000))
    assert stats.accuracy_estimate(a, 1000).known_var == pytest.approx(0.43 * 0.57 / 1000)
    assert not stats.clearly_ahead(stats.Estimate((0.5, 0.5)), stats.Estimate((0.5, 0.5)))  # no error, no gap


def test_steps_are_compared_lower_is_better():
    quick, slow = stats.Estimate((800.0, 900.0, 1000.0)), stats.Estimate((1200.0, 1300.0, 1400.0))
    assert stats.clearly_ahead(quick, slow, higher=False) and not stats.clearly_ahead(slow, quick, higher=False)
    assert not stats.clearly_ahead(quick, slow)  # higher is not better here


@dataclass
class FakeCell:
    """What the ranking rules read of a cell: its accuracy and steps to target as the test sees them."""

    accuracies: tuple[float, ...]
    examples: int
    is_solved: bool
    steps: tuple[float, ...]

    def mean(self) -> float:
        return statistics.fmean(self.accuracies)

    def estimate(self) -> stats.Estimate:
        return stats.accuracy_estimate(list(self.accuracies), self.examples)

    def solved(self) -> bool:
        return self.is_solved

    def steps_estimate(self) -> stats.Estimate:
        return stats.Estimate(self.steps, 100 ** 2 / 12 / len(self.steps))


fractions = st.floats(0.0, 1.0, allow_nan=False)
steps = st.lists(st.integers(1, 60).map(lambda k: 100.0 * k), min_size=2, max_size=5).map(tuple)
cells = st.builds(FakeCell, st.lists(fractions, min_size=2, max_size=5).map(tuple), st.sampled_from([100, 1000, 10**5]),
                  st.booleans(), steps)


@settings(max_examples=300, deadline=None)
@given(st.lists(cells, min_size=1, max_size=8))
def test_random_cells_never_give_an_inconsistent_ordering(found):
    best = leaders(found)
    behind = [c for c in found if not any(c is b for b in best)]
    assert best and best[0].mean() == max(c.mean() for c in found)
    # A cell above (or level with) one tied for best is tied too: never behind.
    assert all(c.mean() < min(b.mean() for b in best) for c in behind)
    # Solved cells are tied on accuracy: every one is among the best.
    assert all(any(c is b for b in best) for c in found if c.solved())
    # Every cell behind is one the test places behind the top cell.
    assert all(stats.clearly_ahead(best[0].estimate(), c.estimate()) for c in behind)
    quick = fastest(found)
    solved = [c for c in found if c.solved()]
    assert bool(quick) == bool(solved) and all(c.solved() for c in quick)
    slower = [c for c in solved if not any(c is q for q in quick)]
    # Fewer mean steps than a cell tied for the fewest is tied too.
    assert all(c.steps_estimate().mean > max(q.steps_estimate().mean for q in quick) for c in slower)


@settings(max_examples=300, deadline=None)
@given(cells, cells)
def test_no_two_cells_each_lead_the_other(a, b):
    assert not (stats.clearly_ahead(a.estimate(), b.estimate()) and stats.clearly_ahead(b.estimate(), a.estimate()))
    assert stats.p_value(a.estimate(), b.estimate()) == pytest.approx(stats.p_value(b.estimate(), a.estimate()))
