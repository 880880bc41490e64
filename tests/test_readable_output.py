"""Output a reader can trust: empty unreported intervals, plain progress lines in logs, honest crossing and
interval-adjustment labels, the repeats policy explained (issue 23, item 10)."""
from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import pytest

from humaneval_power.cli import main


def _crossed(workers: int = 4, items: int = 20, systems: str = "AB", seed: int = 0, sd_worker_system: float = 0.0,
             repeats: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [(f"w{w}", f"i{i}", s) for w in range(workers) for i in range(items) for s in systems]
    f = pd.DataFrame(rows, columns=["worker", "item", "system"])
    ws = rng.normal(0, sd_worker_system, (workers, len(systems)))
    f["score"] = (rng.normal(0, 0.5, workers)[f.worker.str[1:].astype(int)] + rng.normal(0, 0.4, items)[
        f.item.str[1:].astype(int)] + ws[f.worker.str[1:].astype(int), f.system.map(systems.index)]
        + 0.2 * (f.system == systems[-1]) + rng.normal(0, 0.7, len(f)))
    if repeats:
        f = pd.concat([f, f.iloc[:repeats].assign(score=lambda d: d.score + 0.1)], ignore_index=True)
    return f


def test_fit_summary_leaves_unreported_intervals_empty(tmp_path, capsys) -> None:
    """An SD at or near zero has no Wald interval: the summary leaves it empty (never "0 NaN" / "NaN NaN")."""
    path = tmp_path / "r.csv"
    _crossed(seed=3).to_csv(path, index=False)
    assert main(["fit", str(path), "--backend", "statsmodels"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("variance components"):]
    assert "nan" not in table.lower()
    assert "not reported" in out or "singular" in out  # the fit does have an unreported interval


def test_progress_is_plain_lines_off_a_terminal(monkeypatch, capsys) -> None:
    """stderr not a terminal (a log file): one short line per update, no carriage returns."""
    from humaneval_power.cli import common

    monkeypatch.setattr(common, "BAR_DELAY", 0.0)
    monkeypatch.setattr(common, "LOG_SECONDS", 0.0)
    with common.ProgressBar(unit="sim") as bar:
        for done in range(1, 41):
            bar(done * 25, 1000, "cell 3/8: 20 workers x 200 items")
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = err.splitlines()
    assert len(lines) == 40 and max(map(len, lines)) < 120
    assert lines[-1].startswith("hepower: cell 3/8") and "1,000/1,000 sims" in lines[-1]


def test_crossing_counts_repeats_instead_of_calling_a_crossed_group_partial() -> None:
    from humaneval_power.completed_study import design_summary
    from humaneval_power.fitting.ratings import read_ratings

    crossing = {}
    for repeats in (0, 5):
        data = read_ratings(_crossed(systems="ABC", repeats=repeats), duplicates="keep")
        crossing[repeats] = design_summary(data).set_index("name").loc["crossing", "value"]
    assert crossing[0] == "fully crossed: every worker rated every system on every item"
    assert crossing[5].startswith(crossing[0]) and "5 repeated ratings" in crossing[5]
    partial = read_ratings(_crossed(systems="ABC").iloc[3:], duplicates="keep")
    assert design_summary(partial).set_index("name").loc["crossing", "value"] == (
        "every worker rated every system, but not every item")


#: Krippendorff's alpha tables of the contrast-plot tests' study, by ratings and arguments (per process)
_ALPHAS: dict[tuple, pd.DataFrame] = {}


@pytest.fixture
def shared_alpha_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's agreement row (``paper.alpha_table``: Krippendorff's alpha with a seeded bootstrap, a function
    of the ratings and its arguments only) computed once for the ratings the adjustments share: the bootstrap was
    ~2 CPU s of each figure; every check below is on the figure's titles."""
    from humaneval_power.completed_study import paper

    fn = paper.alpha_table

    def shared(ratings: pd.DataFrame, *args: object, **kwargs: object) -> pd.DataFrame:
        key = (tuple(ratings.columns), pd.util.hash_pandas_object(ratings).to_numpy().tobytes(), repr(args),
               repr(sorted(kwargs.items())))
        if key not in _ALPHAS:
            _ALPHAS[key] = fn(ratings, *args, **kwargs)
        return _ALPHAS[key].copy()

    monkeypatch.setattr(paper, "alpha_table", shared)


@pytest.mark.parametrize("adjust, kind", [("holm", "Bonferroni-adjusted"), ("bonferroni", "Bonferroni-adjusted"),
                                          ("fdr", "Bonferroni-adjusted"), ("tukey", "Tukey-adjusted"),
                                          ("none", "unadjusted")])
@pytest.mark.xdist_group("contrast_plot")  # one worker: the study's fit and alpha are shared (per process)
@pytest.mark.usefixtures("shared_alpha_table")
def test_contrast_plot_names_the_interval_adjustment_and_wraps(adjust: str, kind: str,
                                                                shared_analysis_fits: dict[tuple, tuple]) -> None:
    from humaneval_power.completed_study import analysis_figure, analyze
    from humaneval_power.plots import TITLE_CHARS

    result = analyze(_crossed(systems="ABC", sd_worker_system=0.2), backend="statsmodels", adjust=adjust)
    titles = [ax.get_title(loc="left") for ax in analysis_figure(result).axes]
    contrast = titles[-1]
    assert kind in contrast.replace("\n", " ") and f"{adjust}-adjusted" not in contrast
    assert all(len(line) <= TITLE_CHARS for t in titles for line in t.splitlines())
    assert contrast.replace("\n", " ") == textwrap.fill(contrast.replace("\n", " "), TITLE_CHARS).replace("\n", " ")


def test_duplicates_keep_is_explained(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "treats repeats as independent errors" in help_text
