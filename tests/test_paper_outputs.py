"""The analysis' paper outputs (issue 28): agreement, reliability, letters, clusters, ranks, report sections, LaTeX and
``agreement()``, each checked against the reference-checked library functions it wires up (the statistics
themselves are tested in test_agreement, test_rating_reliability, test_significance_groups, test_rankings)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.agreement import krippendorff_alpha
from humaneval_power.completed_study import (
    agreement,
    analyze,
    latex_text,
    report_text,
    write_latex,
)
from humaneval_power.completed_study.paper import N_BOOT, N_RANK_DRAWS
from humaneval_power.errors import InputError
from humaneval_power.io import json_records
from humaneval_power.rankings import parametric_draws, rank_table
from humaneval_power.rating_reliability import (
    anova_components,
    ratings_needed,
    reliability,
)
from humaneval_power.significance_groups import (
    compact_letters,
    letter_sets,
    wmt_clusters,
)

EXPERT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "dialsummeval_expert" / "ratings.csv"
pytestmark = pytest.mark.skipif(not EXPERT.exists(), reason="DialSummEval expert ratings not available")


SYSTEMS = ["A", "B", "C", "D", "E"]


@pytest.fixture
def relevance(shared_analysis_fits):
    """The expert relevance ratings of five systems, all pairs (holm), no-R backend (fitted once per session)."""
    return analyze(EXPERT, where={"dimension": "relevance"}, backend="statsmodels", systems=SYSTEMS)


def _means_covariance(result) -> np.ndarray:
    """The means' covariance rebuilt from the printed SEs: cov(a, b) = (se_a^2 + se_b^2 - se(b - a)^2) / 2."""
    names = list(result.means.system)
    var = dict(zip(names, result.means.se**2))
    cov = np.diag([var[s] for s in names])
    for s, v, se in zip(result.contrasts.system, result.contrasts.versus, result.contrasts.se):
        i, j = names.index(s), names.index(v)
        cov[i, j] = cov[j, i] = (var[s] + var[v] - se**2) / 2
    return cov


def test_paper_tables_are_the_library_functions_on_the_fit(shared_analysis_fits, monkeypatch):
    from humaneval_power.completed_study import ratings

    captured = {}

    def draws_of(estimate, covariance, n_draws, seed):
        captured.update(estimate=estimate, covariance=covariance, draws=parametric_draws(estimate, covariance,
                                                                                         n_draws, seed))
        return captured["draws"]

    monkeypatch.setattr(ratings, "parametric_draws", draws_of)
    r = analyze(EXPERT, where={"dimension": "relevance"}, backend="statsmodels", systems=SYSTEMS)
    paper = r.paper
    a = krippendorff_alpha(r.data.frame, "interval", unit=["item", "system"], n_boot=N_BOOT, level=r.level,
                           seed=np.random.SeedSequence(r.seed).spawn(1)[0])
    assert paper.agreement.iloc[0][["alpha", "lower", "upper"]].tolist() == pytest.approx([a.alpha, a.lower, a.upper])
    var = dict(zip(r.components.component, r.components.variance))
    sds = (np.sqrt(var["item"] + var["item x system"]), np.sqrt(var["worker"] + var["worker x system"]),
           np.sqrt(var["residual"]))
    rel = reliability(*sds, k=3)
    row = paper.reliability.set_index("kind").loc["agreement"]
    assert (row.icc1, row.icck, row.ratings_needed) == pytest.approx((rel.icc1, rel.icck, ratings_needed(*sds, 0.8)))
    order = list(paper.systems.system)
    assert order == list(r.means.sort_values("emmean", ascending=False).system)
    letters = compact_letters(r.contrasts, systems=order)
    assert letter_sets(dict(zip(order, paper.systems.letters))) == letter_sets(letters)
    clusters = wmt_clusters(r.means.set_index("system").emmean, r.contrasts)
    assert paper.systems.cluster.tolist() == clusters.cluster.tolist()
    assert captured["estimate"] == pytest.approx(r.means.emmean.to_numpy())
    assert captured["covariance"] == pytest.approx(_means_covariance(r), rel=1e-9)
    assert captured["draws"].shape == (N_RANK_DRAWS, len(SYSTEMS))
    ranks = rank_table(captured["draws"], list(r.means.system), estimate=r.means.emmean.to_numpy())
    pd.testing.assert_frame_equal(paper.systems[ranks.columns.drop("estimate")], ranks.drop(columns="estimate"))
    assert paper.systems.p_best.sum() == pytest.approx(1.0)


def test_records_unchanged_by_default_and_new_kinds_behind_paper(relevance):
    plain = relevance.records()
    assert all("record" not in rec for rec in plain) and len(plain) == len(relevance.contrasts)
    full = relevance.records(paper=True)
    kinds = pd.Series([rec["record"] for rec in full]).value_counts().to_dict()
    assert kinds == {"contrast": 10, "system": 5, "reliability": 2, "agreement": 1}
    assert [{k: v for k, v in rec.items() if k != "record"} for rec in full[:10]] == plain
    table = pd.DataFrame(full)  # as the CLI's --json and --out tabulate records
    assert json.loads(json.dumps(json_records(table)))[-1]["letters"] == full[-1]["letters"]


def test_summary_and_report_show_agreement_letters_and_ranks(relevance, tmp_path):
    text = str(relevance)
    assert "Krippendorff's alpha (interval)" in text and "holm-adjusted p-values" in text and "p_best" in text
    reports = {suffix: report_text(relevance, tmp_path / f"r{suffix}") for suffix in (".md", ".html")}
    for report in reports.values():
        assert "Agreement and reliability" in report and "Ranking and significance groups" in report
        assert "letters" in report and "p_best" in report and "ratings_needed" in report
    md = reports[".md"]
    means = md.split("## Estimated marginal means")[1].split("\n## ")[0]
    header = next(line for line in means.splitlines() if line.startswith("|"))
    assert header.rstrip(" |").endswith("letters")


def _balanced(tex: str) -> None:
    assert re.findall(r"\\begin\{(\w+)\}", tex) == ["tabular"] * len(re.findall(r"\\end\{tabular\}", tex))
    depth = 0
    for ch in re.sub(r"\\[{}]", "", tex):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0
    assert depth == 0
    for block in tex.split("\\begin{tabular}")[1:]:
        body = block.split("\\end{tabular}")[0]
        spec = re.match(r"\{([lcr]+)\}", body).group(1)
        rows = [line for line in body.splitlines() if line.endswith("\\\\")]
        assert rows and all(line.count(" & ") == len(spec) - 1 for line in rows)


def test_latex_tables_parse_and_hold_letters_ranks_agreement(relevance, tmp_path):
    tex = latex_text(relevance, digits=2)
    _balanced(tex)
    assert tex.count("\\toprule") == 5 and "letters" in tex and "P(best)" in tex and "alpha" in tex
    best = relevance.paper.systems.iloc[0]
    assert f"{best.system} & {best['mean']:.2f} & " in tex
    assert "\\texttt{score \\textasciitilde{} system" in tex and "95\\%" in tex
    path = tmp_path / "t.tex"
    write_latex(relevance, path)
    assert path.read_text() == latex_text(relevance)


def test_latex_compiles(relevance, tmp_path):
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex is not installed (Debian texlive-latex-base and texlive-latex-recommended)")
    write_latex(relevance, tmp_path / "tables.tex")
    (tmp_path / "doc.tex").write_text("\\documentclass{article}\\usepackage{booktabs}\\begin{document}\n"
                                      "\\input{tables.tex}\n\\end{document}\n")
    run = subprocess.run(["pdflatex", "-interaction=nonstopmode", "doc.tex"], cwd=tmp_path, capture_output=True,
                         check=False)
    assert run.returncode == 0, run.stdout[-2000:]


def test_write_latex_refuses_without_touching_the_file(relevance, tmp_path):
    kept = tmp_path / "kept.tex"
    kept.write_text("old")
    with pytest.raises(InputError, match="decimals"):
        write_latex(relevance, kept, digits=-1)
    with pytest.raises(InputError, match=r"\.tex"):
        write_latex(relevance, tmp_path / "t.md")
    assert kept.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["kept.tex"]


def test_contrasts_with_a_baseline_have_ranks_but_no_letters(shared_analysis_fits):
    r = analyze(EXPERT, where={"dimension": "relevance"}, backend="statsmodels", contrasts="baseline",
                systems=SYSTEMS)
    assert "letters" not in r.paper.systems and r.paper.letters_text == ""
    assert r.paper.systems["rank"].tolist() == list(range(1, 6))


@pytest.mark.parametrize("options, message", [({"agreement_metric": "nominal"}, "interval or ordinal"),
                                              ({"reliability_target": 1.0}, "target reliability")])
def test_analyze_refuses_bad_paper_options(options, message):
    with pytest.raises(InputError, match=message):
        analyze(EXPERT, where={"dimension": "relevance"}, backend="statsmodels", **options)


def test_agreement_per_dimension_and_system_wires_the_library():
    res = agreement(EXPERT, metric="ordinal", n_boot=20, seed=3)
    table = pd.read_csv(EXPERT)
    flu = table[table.dimension == "fluency"]
    a = krippendorff_alpha(flu, "ordinal", unit=["item", "system"])
    assert res.alpha.set_index("dimension").loc["fluency", "alpha"] == pytest.approx(a.alpha, abs=1e-12)
    b = krippendorff_alpha(flu[flu.system == "D"], "ordinal", unit="item")
    assert res.alpha_system.set_index(["dimension", "system"]).loc[("fluency", "D"), "alpha"] == pytest.approx(b.alpha)
    wide = flu.pivot_table(index=["item", "system"], columns="worker", values="score")
    rel = reliability(*anova_components(wide.to_numpy()).two_way, k=3)
    row = res.icc.set_index(["dimension", "kind"]).loc[("fluency", "agreement")]
    assert (row.icc1, row.icck) == pytest.approx((rel.icc1, rel.icck))
    kinds = {rec["record"] for rec in res.records()}
    assert kinds == {"alpha", "alpha_system", "icc"} and "fluency" in str(res)


def test_agreement_refusals(tmp_path):
    table = pd.read_csv(EXPERT)
    with pytest.raises(InputError, match="unknown metric"):
        agreement(table, metric="cosine")
    with pytest.raises(InputError, match="complete table"):
        agreement(table.iloc[1:], n_boot=0)
    with pytest.raises(InputError, match="outside the declared scale"):
        agreement(table, metric="ordinal", levels=[1, 2, 3, 4], n_boot=0)
    single = table[table.worker == table.worker.iloc[0]]
    with pytest.raises(InputError, match="two raters"):
        agreement(single, n_boot=0)
    with pytest.raises(InputError, match="no column 'judge'"):
        agreement(table, worker="judge")


def test_analysis_without_pairable_ratings_says_why_alpha_is_missing(shared_analysis_fits):
    table = pd.read_csv(EXPERT)
    small = table[(table.dimension == "relevance") & table.system.isin(["A", "B", "C"])]
    small = small[small.item.isin(small.item.unique()[:30])]
    repeated = pd.concat([small, small[small.worker == small.worker.iloc[0]]])
    r = analyze(repeated, backend="statsmodels", duplicates="keep")
    assert r.paper.agreement.empty and "rated unit" in r.paper.agreement_text
    assert "not computed" in str(r) and "% agreement" not in latex_text(r)
    assert [rec["record"] for rec in r.records(paper=True)].count("agreement") == 0


def test_by_groups_each_have_their_paper_tables(shared_analysis_fits):
    table = pd.read_csv(EXPERT)
    two = table[table.dimension.isin(["coherence", "fluency"]) & table.system.isin(["A", "B", "C"])]
    g = analyze(two, backend="statsmodels", by="dimension")
    for name, res in g.results.items():
        a = krippendorff_alpha(two[two.dimension == name], "interval", unit=["item", "system"])
        assert res.paper.agreement.alpha.iloc[0] == pytest.approx(a.alpha)
    records = g.records(paper=True)
    assert {(rec["group"], rec["record"]) for rec in records if rec["record"] == "agreement"} == {
        ("coherence", "agreement"), ("fluency", "agreement")}
    tex = latex_text(g)
    _balanced(tex)
    assert tex.count("% ===== dimension = ") == 2


@pytest.mark.slow
def test_bambi_ranks_come_from_the_posterior_draws(monkeypatch):
    """With bambi the ranks are rank_table of the posterior draws of the means (no letters: no p-values)."""
    pytest.importorskip("bambi")
    from humaneval_power.completed_study import paper as paper_module

    captured = {}
    tables = paper_module.paper_tables

    def capture(*args, **kwargs):
        captured["draws"] = args[9]
        return tables(*args, **kwargs)

    monkeypatch.setattr("humaneval_power.completed_study.bayesian.paper_tables", capture)
    rng = np.random.default_rng(3)
    frame = pd.DataFrame([(f"w{w}", f"i{i}", s, 2.5 + 0.8 * k + rng.normal(0, 0.5)) for w in range(4)
                          for i in range(6) for k, s in enumerate("ABC")], columns=["worker", "item", "system", "score"])
    r = analyze(frame, backend="bambi", draws=60, chains=2, seed=5)
    draws = captured["draws"]
    assert draws.shape == (120, 3)
    assert draws.mean(axis=0) == pytest.approx(r.means["mean"].to_numpy())
    expected = rank_table(draws, ["A", "B", "C"], estimate=r.means["mean"].to_numpy())
    pd.testing.assert_frame_equal(r.paper.systems[expected.columns.drop("estimate")], expected.drop(columns="estimate"))
    assert "letters" not in r.paper.systems and "Ranking" in report_text(r, "r.md")


@settings(max_examples=25, deadline=None)
@given(st.text(max_size=12).filter(lambda t: t not in ("interval", "ordinal")))
def test_analyze_refuses_any_other_agreement_metric(metric):
    with pytest.raises(InputError, match="agreement metric"):
        analyze(EXPERT, agreement_metric=metric)


def test_latex_refuses_an_analysis_without_the_frequentist_tables():
    with pytest.raises(InputError, match="frequentist"):
        latex_text(SimpleNamespace(means=None))
