"""The fully crossed Likert cell: two systems, every worker rates every item under both.

W * I * 2 ratings from Card et al.'s slope model (eq. 5, x = -1/2, +1/2; see
:mod:`humaneval_power.params`), analysed by the closed-form crossed analysis
:class:`~humaneval_power.analyses.crossed.CrossedSlopes` with its four tiers
(``analytic``, ``fast`` on sufficient statistics, ``lme4``, ``statsmodels``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..analyses.crossed import CrossedSlopes
from ..designs import Layout
from ..engine import PowerResult, StudyOutcomes
from ..errors import InputError
from ..fitting.balanced import draw_stats, expected_lambdas
from ..params import LikertParams
from ..processes import long_design, simulate_ratings
from ..validation import check_count, check_number


@dataclass(frozen=True)
class CrossedLikertScenario:
    """One fully crossed cell: parameters, W workers x I items, the true effect, method (tier) and test.

    >>> from humaneval_power.params import get_preset
    >>> cell = CrossedLikertScenario(get_preset("card2020-high"), 3, 100, 0.4, method="analytic")
    >>> round(cell.exact().power, 3)
    0.428
    """

    params: LikertParams
    workers: int
    items: int
    effect: float
    method: str = "fast"
    test: str = "satterthwaite"
    alpha: float = 0.05

    def __post_init__(self) -> None:
        check_count("workers", self.workers, 2)
        check_count("items", self.items, 2)
        check_number("effect", self.effect)
        self.analysis.check(2, self.effect)

    @classmethod
    def of(cls, params: LikertParams, workers: int, items: int, effect: float,
           analysis: CrossedSlopes) -> CrossedLikertScenario:
        """The cell analysed by ``analysis``."""
        cell = cls(params, workers, items, effect, analysis.tier, analysis.test, analysis.alpha)
        if cell.analysis != analysis:
            raise InputError(f"{analysis} is not the crossed cell's analysis")
        return cell

    @cached_property
    def analysis(self) -> CrossedSlopes:
        return CrossedSlopes(self.method, self.test, self.alpha)

    @property
    def chunk_size(self) -> int:
        return self.analysis.chunk_size

    def study_bytes(self) -> int:
        """Memory one simulated study needs: none to speak of for the fast tiers; the
        refitting tiers hold each data set (W x I x 2 ratings) in several copies."""
        return 0 if self.method in ("fast", "analytic") else 2 * self.workers * self.items * 8 * 20

    def cell(self) -> dict[str, Any]:
        return {"workers": self.workers, "items": self.items, "effect": self.effect, **self.analysis.record()}

    def stream_key(self) -> str:
        source = "statistics" if self.analysis.statistics else "ratings"
        p = self.params
        return json.dumps(
            ["likert-crossed", source, self.workers, self.items, p.intercept, sorted(p.sds.items())]
        )

    def exact(self) -> PowerResult | None:
        r = self.analysis.exact(self.params.sds, self.workers, self.items, self.effect)
        if r is None:
            return None
        power, type_s, type_m, df, extra = r
        return PowerResult.closed_form(self.cell(), power, type_s, type_m, df=df, extra=extra)

    def simulate(self, n: int, rng: np.random.Generator) -> StudyOutcomes:
        if self.analysis.statistics:
            lam = expected_lambdas(self.workers, self.items, **self.params.sds)
            fit = self.analysis.fit_statistics(draw_stats(lam, self.workers, self.items, self.effect, n, rng))
        else:
            ratings = simulate_ratings(self.params, self.workers, self.items, self.effect, n, rng)
            cols = long_design(self.workers, self.items)
            layout = Layout(cols["worker"] - 1, cols["item"] - 1, (cols["x"] > 0).astype(int), self.workers,
                            self.items, 2)
            fit = self.analysis.fit(layout, ratings.reshape(n, -1).T)
        return self.analysis.decide(fit)
