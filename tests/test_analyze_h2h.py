"""`hepower analyze --family binomial`: per-pair GLMMs against glmer typed in R, Bradley-Terry against
independent fits (statsmodels' GLM; R's glm), and the CLI's bad input."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from humaneval_power.cli import main
from humaneval_power.completed_study import (
    analyze_judgments,
    bradley_terry,
    read_pairwise,
)

WMT_SYSTEMS = ["uedin-wmt13.2838", "online-B", "JHU.2684"]
ORDER = WMT_SYSTEMS[:1] + sorted(WMT_SYSTEMS[1:])  # the baseline (first given), then the others sorted

# glmer and glm on the raw judgments, each pair's win coded in R from the outcome column (not from the
# tool's reader); split ties as lme4 fits a weighted likelihood: cbind(2s, 2 - 2s) at prior weight 1/2.
R_REFERENCE = r"""
function(judge, segment, a, b, outcome, systems, split) {
  suppressPackageStartupMessages(library(lme4))
  rows <- list(); k <- length(systems); bt_y <- c(); bt_x <- NULL
  for (i in 1:(k - 1)) for (j in (i + 1):k) {
    si <- systems[i]; sj <- systems[j]
    keep <- (a == si & b == sj) | (a == sj & b == si)
    o <- outcome[keep]
    won <- ifelse(o == "tie", 0.5, as.numeric((o == "a" & a[keep] == sj) | (o == "b" & b[keep] == sj)))
    use <- if (split) rep(TRUE, length(won)) else won != 0.5
    jd <- judge[keep][use]; sg <- segment[keep][use]
    # levels in order of first appearance, as the tool codes them, so that glmer takes the same path
    d <- data.frame(judge = factor(jd, levels = unique(jd)), segment = factor(sg, levels = unique(sg)),
                    won = won[use])
    m <- if (split) glmer(cbind(2 * won, 2 - 2 * won) ~ 1 + (1 | judge) + (1 | segment), data = d,
                          family = binomial, weights = rep(0.5, nrow(d)))
         else glmer(won ~ 1 + (1 | judge) + (1 | segment), data = d, family = binomial)
    co <- summary(m)$coefficients
    rows[[length(rows) + 1]] <- data.frame(system = sj, versus = si, est = co[1, 1], se = co[1, 2], p = co[1, 4])
    x <- matrix(0, nrow(d), k); x[, j] <- 1; x[, i] <- -1
    bt_x <- rbind(bt_x, x); bt_y <- c(bt_y, d$won)
  }
  out <- do.call(rbind, rows)
  out$holm <- p.adjust(out$p, "holm")
  g <- glm(cbind(2 * bt_y, 2 - 2 * bt_y) ~ 0 + bt_x[, -1], family = binomial, weights = rep(0.5, length(bt_y)),
           control = glm.control(epsilon = 1e-14, maxit = 100))
  list(pairs = out, bt = summary(g)$coefficients[, 1:2])
}
"""


@pytest.fixture(scope="module")
def wmt(data_dir):
    path = data_dir / "wmt13_fren_rankings" / "pairs.csv"
    if not path.exists():
        pytest.skip(f"{path} not found")
    frame = pd.read_csv(path)
    frame = frame[frame.split == "train"]
    return frame[frame.system_a.isin(WMT_SYSTEMS) & frame.system_b.isin(WMT_SYSTEMS)].reset_index(drop=True)


def _judgments(seed: int = 0, k: int = 4, n: int = 600, tie: float = 0.2) -> pd.DataFrame:
    """Synthetic judgments from a Bradley-Terry model with ties, 20 workers, 50 items."""
    rng = np.random.default_rng(seed)
    ability = np.linspace(0, 1.2, k)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    p_b = 1 / (1 + np.exp(-(ability[b] - ability[a])))
    u = rng.random(n)
    outcome = np.where(u < tie, "tie", np.where(rng.random(n) < p_b, "b", "a"))
    return pd.DataFrame({"worker": [f"w{w}" for w in rng.integers(0, 20, n)],
                         "item": [f"i{i}" for i in rng.integers(0, 50, n)],
                         "system_a": [f"S{s}" for s in a], "system_b": [f"S{s}" for s in b], "outcome": outcome})


@pytest.mark.parametrize("split", [False, True])
def test_bradley_terry_equals_statsmodels_glm(split):
    """The Newton fit equals statsmodels' binomial GLM with the BT design matrix (fractional response = split
    ties, the same weighted likelihood): abilities and SEs."""
    import statsmodels.api as sm

    order, frames, _ = read_pairwise(_judgments(1))
    if not split:
        frames = {key: f[f.score != 0.5] for key, f in frames.items()}
    k = len(order)
    bt = bradley_terry(frames, k)
    rows, y = [], []
    for (i, j), f in frames.items():
        x = np.zeros((len(f), k))
        x[:, j], x[:, i] = 1.0, -1.0
        rows.append(x)
        y.append(f.score.to_numpy())
    ref = sm.GLM(np.concatenate(y), np.vstack(rows)[:, 1:], family=sm.families.Binomial()).fit(tol=1e-12)
    np.testing.assert_allclose(bt.ability[1:], ref.params, atol=1e-9)
    np.testing.assert_allclose(bt.se[1:], ref.bse, rtol=1e-7)
    assert bt.ability[0] == 0 and bt.se[0] == 0


def test_bradley_terry_refuses_disconnected_comparisons():
    from humaneval_power.errors import InputError

    frame = pd.DataFrame({"worker": ["w1", "w2"] * 4, "item": ["i1", "i2", "i3", "i4"] * 2,
                          "system_a": ["A", "A", "C", "C"] * 2, "system_b": ["B", "B", "D", "D"] * 2,
                          "outcome": ["a", "b"] * 4})
    order, frames, _ = read_pairwise(frame)
    with pytest.raises(InputError, match="disconnected"):
        bradley_terry(frames, len(order))


@pytest.mark.r
@pytest.mark.slow
@pytest.mark.parametrize("ties", ["drop", "split"])
def test_pairs_and_ranking_against_glmer_and_glm(lme4_backend, wmt, ties):
    """Per pair: log-odds, SE, p and Holm-adjusted p against glmer in R; Bradley-Terry against R's glm."""
    from rpy2.robjects import pandas2ri
    from rpy2.robjects.conversion import localconverter

    res = analyze_judgments(wmt, worker="judge", item="segment", systems=WMT_SYSTEMS, ties=ties)
    ro = lme4_backend.r_session()
    out = ro.r(R_REFERENCE)(*(ro.StrVector(wmt[c].astype(str).tolist())
                              for c in ("judge", "segment", "system_a", "system_b", "outcome")),
                            ro.StrVector(ORDER), ties == "split")
    with localconverter(ro.default_converter + pandas2ri.converter):
        ref = out.rx2("pairs")
    bt_ref = np.asarray(out.rx2("bt"))
    p = res.pairs
    assert list(zip(p.system, p.versus)) == list(zip(ref.system, ref.versus))
    # both fits are glmer's; only the coding of the factor levels differs (the optimiser's path)
    np.testing.assert_allclose(p.log_odds, ref.est, atol=2e-5)
    np.testing.assert_allclose(p.se, ref.se, atol=2e-5)
    np.testing.assert_allclose(p.p_value, ref.p, atol=2e-5)
    np.testing.assert_allclose(p.p_adjusted, ref.holm, atol=2e-5)
    bt = res.ranking.set_index("system").loc[ORDER[1:]]
    np.testing.assert_allclose(bt.ability, bt_ref[:, 0], atol=1e-7)
    np.testing.assert_allclose(bt.se, bt_ref[:, 1], rtol=1e-6)
    wins = wmt.assign(w=np.where(wmt.outcome == "a", wmt.system_a, np.where(wmt.outcome == "b", wmt.system_b, "")))
    assert int(res.ranking.set_index("system").loc["online-B", "wins"]) == int((wins.w == "online-B").sum())


@pytest.mark.r
def test_cli_binomial_report_and_json(lme4_backend, tmp_path, capsys):
    """Two systems: one pair, no ranking; --json records, the report and the plot written; the win rate is the
    share of decisive judgments won."""
    data = tmp_path / "j.csv"
    _judgments(2, k=2, n=300).to_csv(data, index=False)
    report, plot = tmp_path / "h.html", tmp_path / "h.svg"
    assert main(["analyze", str(data), "--family", "binomial", "--json", "--report", str(report),
                 "--plot", str(plot)]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert len(rec) == 1 and rec[0]["system"] == "S1" and rec[0]["versus"] == "S0"
    frame = pd.read_csv(data)
    won = ((frame.outcome == "a") & (frame.system_a == "S1")) | ((frame.outcome == "b") & (frame.system_b == "S1"))
    lost = (frame.outcome != "tie") & ~won
    assert rec[0]["win_rate"] == pytest.approx(won.sum() / (won.sum() + lost.sum()))
    assert rec[0]["p_adjusted"] == rec[0]["p_value"]
    text = report.read_text()
    assert "Pairwise comparisons" in text and "Bradley-Terry" not in text and "data:image/png;base64," in text
    assert plot.read_text().startswith("<?xml")


@pytest.mark.parametrize("args, message", [
    (["--adjust", "tukey"], "adjustment"),
    (["--outcome", "nocolumn"], "nocolumn"),
    (["--backend", "statsmodels"], "--backend statsmodels"),
    (["--scale", "1", "5"], "--scale"),
    (["--report", "r.txt"], "--report"),
])
def test_cli_binomial_bad_input(tmp_path, capsys, args, message):
    data = tmp_path / "j.csv"
    _judgments(3, k=3, n=60).to_csv(data, index=False)
    out = tmp_path / "o.csv"
    assert main(["analyze", str(data), "--family", "binomial", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and not out.exists()


def test_malformed_judgments_file(tmp_path, capsys):
    """An outcome that is not a, b, a tie or a system's name: one line, exit 2, nothing written."""
    frame = _judgments(4, k=3, n=60)
    frame.loc[5, "outcome"] = "both"
    data = tmp_path / "j.csv"
    frame.to_csv(data, index=False)
    report = tmp_path / "r.md"
    assert main(["analyze", str(data), "--family", "binomial", "--report", str(report)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tie-values" in err[0] and not report.exists()
