"""`hepower analyze --report FILE.md|FILE.html --plot FILE`: contents, the design check's wiring to the crowd
planner, self-containment, and bad input (one line, exit 2, nothing written)."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from humaneval_power.cli import main
from humaneval_power.completed_study import analyze, design_check, report_text
from humaneval_power.designs import CrowdDesign
from humaneval_power.processes import InvariantProcess


def _study(seed: int = 0, workers: int = 5, items: int = 16) -> pd.DataFrame:
    """A small crossed study of 3 systems (C better by 0.8) from the invariant process."""
    proc = InvariantProcess(0.4, 0.2, 0.3, 0.2, 0.6, systems=3, intercept=3.0)
    design = CrowdDesign(items=items, workers=workers, ratings_per_item=workers, systems=3, assignment="crossed")
    rng = np.random.default_rng(seed)
    lay = design.draw(rng, 1)
    y = proc.simulate(lay, np.array([0.0, 0.1, 0.8]), 1, rng)[:, 0]
    return pd.DataFrame({"worker": [f"w{w}" for w in np.asarray(lay.worker).ravel()],
                         "item": [f"i{i}" for i in lay.item], "system": [chr(65 + s) for s in lay.system],
                         "score": y})


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    path = tmp_path_factory.mktemp("study") / "ratings.csv"
    _study().to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def result(study):
    return analyze(study, backend="statsmodels")


def test_design_check_is_the_planner_on_the_studys_layout(result):
    """Type-I error and MDE equal likert_power / likert_mde run by hand with the fitted SDs on the study's own
    layout (same seed): the check is wired to the right components, layout, alpha and family."""
    from humaneval_power.designs import PilotDesign
    from humaneval_power.scenarios.likert import likert_mde, likert_power

    check = design_check(result, n_sims=40, seed=3)
    c = result.components.set_index("component")["sd"]
    proc = InvariantProcess(c["worker"], c["worker x system"], c["item"], c["item x system"], c["residual"], 3,
                            float(result.means.emmean.mean()))
    frame = result.data.frame
    design = PilotDesign.from_ratings(frame, systems=["A", "B", "C"])
    assert design.items == 16 and len(design.worker) == len(frame) == 240
    null = likert_power(proc, 0, 16, 0.0, design_from=design, n_sims=40, seed=3, jobs=1)
    assert (check.type1, check.type1_low, check.type1_high) == (null.power[0], null.ci_low[0], null.ci_high[0])
    mde = likert_mde(proc, 0, 16, design_from=design, n_sims=40, seed=3, compare="pairs", adjust="holm")
    assert check.mde == pytest.approx(mde.value, rel=1e-12) and check.pair == ("A", "C")
    assert check.rating_sd == pytest.approx(np.sqrt((c ** 2).sum()))


@pytest.mark.parametrize("suffix", [".md", ".html"])
def test_report_contents(result, tmp_path, suffix):
    check = design_check(result, n_sims=30, seed=1)
    text = report_text(result, tmp_path / f"r{suffix}", check)
    for section in ("Methods (for the paper)", "Design", "Model and why", "ANOVA: all systems equal",
                    "Estimated marginal means", "Contrasts", "Variance components",
                    "Design check: Type-I error and sensitivity", "Warnings"):
        assert section in text, section
    o = result.omnibus.iloc[0]
    assert f"F({o.num_df:.0f}, {o.den_df:.1f}) = {o.F:.2f}" in text  # the methods paragraph's numbers
    assert f"{check.type1:.3f}" in text and f"{check.mde:.3g}" in text
    assert "Few workers (5)" in text  # 5 < FEW_WORKERS: the warning, with the measured Type-I error
    for row in result.contrasts.itertuples():
        assert f"{row.p_adjusted:.4g}" in text
    images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", text)
    assert len(images) == 1
    import base64

    assert base64.b64decode(images[0])[:8] == b"\x89PNG\r\n\x1a\n"
    if suffix == ".html":
        assert text.startswith("<!DOCTYPE html>") and "<table" in text
        # self-contained: no external stylesheet, script or image
        assert not re.search(r"""(src|href)=["'](?!data:)""", text)
    else:
        assert text.startswith("# Analysis of ratings.csv") and "| system | versus |" in text


def test_cli_report_html_plot_and_json(study, tmp_path, capsys):
    report, plot, out = tmp_path / "a.html", tmp_path / "a.png", tmp_path / "a.json"
    assert main(["analyze", str(study), "--backend", "statsmodels", "--report", str(report), "--plot", str(plot),
                 "--out", str(out), "--sims", "20", "--json"]) == 0
    capsys.readouterr()
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Design check" in report.read_text() and len(pd.read_json(out)) == 3
    assert main(["analyze", str(study), "--backend", "statsmodels", "--report", str(tmp_path / "b.md"),
                 "--sims", "0"]) == 0
    text = (tmp_path / "b.md").read_text()
    assert "Design check" not in text and "Run the report's design check" in text


@pytest.mark.parametrize("args, message", [
    (["--report", "r.txt"], "--report must end in .md, .html"),
    (["--plot", "p.gif"], "--plot must end in"),
    (["--sims", "5"], "--sims must be 0"),
    (["--ties", "split"], "--family binomial"),
    (["--family", "poisson"], "invalid choice: 'poisson'"),
])
def test_bad_input_writes_nothing(study, tmp_path, capsys, args, message):
    out, report = tmp_path / "o.csv", tmp_path / "r.md"
    argv = ["analyze", str(study), "--backend", "statsmodels", "--out", str(out)]
    if "--report" not in args:
        argv += ["--report", str(report)]
    assert main(argv + args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists() and not report.exists()


def test_design_check_skipped_on_a_costly_layout(result, tmp_path):
    """More worker and worker x system effects than MAX_WORKER_EFFECTS: no check, and the report says why."""
    from dataclasses import replace

    from humaneval_power.completed_study.report import MAX_WORKER_EFFECTS, check_skipped

    assert check_skipped(result) == ""
    frame = pd.concat([result.data.frame] * 3, ignore_index=True)
    many = frame.assign(worker=[f"x{j}" for j in range(len(frame))])  # every rating by its own worker
    big = replace(result, data=replace(result.data, frame=many))
    assert len(many) * 2 > MAX_WORKER_EFFECTS
    reason = check_skipped(big)
    assert f"{len(many) * 2:,} worker and worker x system effects" in reason
    with pytest.raises(Exception, match="design check skipped"):
        design_check(big, 20)
    assert "Design check skipped" in report_text(big, tmp_path / "r.md", None, reason)
