"""`--random maximal --keep-singular`: lme4's own singular maximal fit, R's `(system | worker)` numbers (issue 23, item 9)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from humaneval_power.errors import InputError

# lmerTest + emmeans on the maximal model, kept singular as lme4 keeps it (R's default optimizer and start)
R_MAXIMAL = """
function(d) {
  suppressPackageStartupMessages({library(lmerTest); library(emmeans)})
  d$system <- factor(d$system)
  m <- suppressMessages(lmer(score ~ system + (system | worker) + (system | item), d))
  p <- as.data.frame(pairs(emmeans(m, "system", lmer.df = "satterthwaite"), adjust = "none", reverse = TRUE))
  c(isSingular(m), p$estimate, p$SE, p$df, p$p.value)
}
"""


@pytest.fixture(scope="module")
def relevance_abc(data_dir) -> pd.DataFrame:
    ratings = pd.read_csv(data_dir / "dialsummeval_expert" / "ratings.csv", dtype={"item": str, "score": float})
    return ratings[(ratings.dimension == "relevance") & ratings.system.isin(list("ABC"))].reset_index(drop=True)


@pytest.mark.r
@pytest.mark.slow
def test_keep_singular_equals_lmertest_emmeans_maximal(relevance_abc, lme4_backend) -> None:
    """DialSummEval expert relevance, A B C: the maximal fit is singular (docs/analyze.md: the ladder steps down
    twice); kept, its pairs are lmerTest + emmeans' on `(system | worker) + (system | item)`."""
    from humaneval_power.completed_study import analyze

    kept = analyze(relevance_abc, systems=list("ABC"), random="maximal", keep_singular=True, adjust="none")
    assert kept.steps == () and kept.fitted_structure == "maximal" and kept.singular
    assert any("singular fit" in n for n in kept.notes)
    ro = lme4_backend.r_session()
    coded = relevance_abc.assign(worker=relevance_abc.worker.astype("category").cat.codes,
                                 item=relevance_abc.item.astype("category").cat.codes,
                                 system=relevance_abc.system.map({"A": 0, "B": 1, "C": 2}))
    r = np.asarray(list(ro.r(R_MAXIMAL)(lme4_backend.r_data_frame(
        {c: coded[c].to_numpy() for c in ("worker", "item", "system", "score")}))), float)
    assert r[0] == 1  # R calls it singular too
    con = kept.contrasts
    np.testing.assert_allclose(con["estimate"], r[1:4], atol=1e-6)
    np.testing.assert_allclose(con["se"], r[4:7], rtol=1e-4)
    np.testing.assert_allclose(con["df"], r[7:10], rtol=1e-3)
    np.testing.assert_allclose(con["p_value"], r[10:13], rtol=1e-3)
    stepped = analyze(relevance_abc, systems=list("ABC"), random="maximal", adjust="none")
    assert len(stepped.steps) == 2 and stepped.fitted_structure == "invariant"


@pytest.mark.parametrize("random", ["invariant", "slopes"])
def test_keep_singular_needs_maximal(random: str) -> None:
    from humaneval_power.completed_study import analyze

    with pytest.raises(InputError, match="--keep-singular applies to --random maximal"):
        analyze(pd.DataFrame({"worker": [1], "item": [1], "system": ["A"], "score": [1.0]}), random=random,
                keep_singular=True)
