"""Plots: Figures returned (no pyplot, no backend switch), readable ticks, the legend outside, the
target line, power 1 visible, wrapped panels, Type-M rows, the effect's unit, saving."""
from __future__ import annotations

import itertools
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from humaneval_power import InputError, get_preset, likert_power
from humaneval_power.plots import (
    plot_accuracy_power,
    plot_bleu_power,
    plot_h2h_power,
    plot_likert_power,
    save_figure,
)


def _table(**axes: list) -> pd.DataFrame:
    """A result table over the product of ``axes``: power rising with the first axis and the second."""
    rows = pd.DataFrame(list(itertools.product(*axes.values())), columns=list(axes))
    first, second = (rows[c].rank(pct=True) for c in list(axes)[:2])
    power = 1 / (1 + np.exp(-(8 * first * second - 3)))
    return rows.assign(power=power, ci_low=(power - 0.03).clip(0), ci_high=(power + 0.03).clip(upper=1),
                       type_s=0.01 * (1 - power), type_m=1 + (1 - power))


def _drawn(fig: Figure):
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _overlapping_labels(fig: Figure) -> list[tuple[str, str]]:
    renderer = _drawn(fig)
    pairs = []
    for ax in fig.axes:
        labels = sorted((t for t in ax.get_xticklabels() if t.get_visible() and t.get_text()),
                        key=lambda t: t.get_window_extent(renderer).x0)
        for a, b in itertools.pairwise(labels):
            if a.get_window_extent(renderer).x1 >= b.get_window_extent(renderer).x0:
                pairs.append((a.get_text(), b.get_text()))
    return pairs


@pytest.mark.parametrize("items", [
    list(range(20, 201, 20)),                 # README's 20:200:20 (overlapped before)
    [25, 50, 100, 200, 400, 800],             # Card et al. Fig. 6
    list(range(100, 5001, 100)),              # 50 evenly spaced values
    [10, 30, 100, 300, 1000, 3000, 10_000, 30_000, 100_000],
])
def test_x_tick_labels_never_overlap(items: list[int]) -> None:
    fig = plot_likert_power(_table(items=items, effect=[0.1, 0.2], workers=[3, 5, 10]))
    labels = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert len(labels) >= 2
    assert _overlapping_labels(fig) == []


def test_returns_a_figure_without_pyplot_or_a_backend_switch(tmp_path: Path) -> None:
    code = (
        "import sys, matplotlib\n"
        "from humaneval_power.plots import plot_likert_power, save_figure\n"
        "from humaneval_power import get_preset, likert_power\n"
        "t = likert_power(get_preset('card2020-low'), [3], [25, 50], [0.1], method='analytic')\n"
        "fig = plot_likert_power(t)\n"
        f"save_figure(fig, {str(tmp_path / 'f.png')!r})\n"
        "print(type(fig).__module__ + '.' + type(fig).__name__, 'matplotlib.pyplot' in sys.modules)\n"
        "print(matplotlib.get_backend())\n"
    )
    env = {**os.environ, "MPLBACKEND": "svg", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.split() == ["matplotlib.figure.Figure", "False", "svg"]
    assert (tmp_path / "f.png").stat().st_size > 5_000


def test_legend_outside_target_line_labelled_and_power_one_visible() -> None:
    table = likert_power(get_preset("card2020-low"), [3, 10], [25, 100, 400], [0.1, 0.4], method="analytic")
    assert table.power.max() > 0.999  # a curve at power 1
    fig = plot_likert_power(table, target=0.8)
    renderer = _drawn(fig)
    legend = fig.legends[0].get_window_extent(renderer)
    assert all(not legend.overlaps(ax.get_window_extent(renderer)) for ax in fig.axes)
    for ax in fig.axes:
        targets = [line for line in ax.get_lines() if "target" in line.get_label()]
        assert len(targets) == 1 and np.allclose(targets[0].get_ydata(), 0.8)
        assert ax.get_ylim()[1] > 1 and ax.get_ylim()[0] < 0
    assert "target power 0.8" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_title_clears_the_legend() -> None:
    title = "card2020-high, card2020 test (effect = 2 x Card et al.'s diff), a title too long for one panel"
    fig = plot_likert_power(_table(items=[25, 50], effect=[0.1, 0.2], workers=[3]), title=title)
    renderer = _drawn(fig)
    text = fig._suptitle
    assert text.get_text().replace("\n", " ") == title
    assert not text.get_window_extent(renderer).overlaps(fig.legends[0].get_window_extent(renderer))


def test_panels_wrap_and_type_m_rows_sit_under_their_power_panels() -> None:
    workers = [2, 3, 4, 5, 6, 8, 10]
    fig = plot_likert_power(_table(items=[25, 50, 100], effect=[0.1, 0.2], workers=workers), type_m=True)
    spans = [ax.get_subplotspec() for ax in fig.axes]
    assert len(fig.axes) == 2 * len(workers)
    assert max(s.colspan.stop for s in spans) <= 3            # no long single row
    assert len({s.rowspan.start for s in spans}) == 6         # 3 rows of panels x (power, Type-M)
    titled = {ax.get_title(): ax.get_subplotspec() for ax in fig.axes if ax.get_title()}
    assert set(titled) == {f"{w} workers" for w in workers}
    type_m = [ax for ax in fig.axes if any("Type-M 1" in line.get_label() for line in ax.get_lines())]
    assert len(type_m) == len(workers)
    below = {(s.get_subplotspec().rowspan.start - 1, s.get_subplotspec().colspan.start) for s in type_m}
    assert below == {(s.rowspan.start, s.colspan.start) for s in titled.values()}


@pytest.mark.parametrize("plot, table, unit", [
    (plot_likert_power, _table(items=[25, 50], effect=[0.1, 0.2], workers=[3]), "mean-rating difference,\n0–1 scale"),
    (plot_h2h_power, _table(n=[25, 50, 100], p_win=[0.6, 0.65], p_tie=[0.0], ties=["drop"]), "P(win)"),
    (plot_h2h_power, _table(items=[50, 100], effect=[0.4, 0.8], workers=[10], judgments_per_item=[3]), "log-odds"),
    (plot_bleu_power, _table(n=[500, 1000, 2000], delta=[0.5, 1.0], p0=[0.1], b0=[25.0]), "BLEU points"),
    (plot_accuracy_power, _table(n=[500, 2000], delta=[0.01, 0.02, 0.03], agreement=[0.9]), "test-set size"),
])
def test_legend_title_names_the_effect_unit(plot, table: pd.DataFrame, unit: str) -> None:
    assert unit in plot(table).legends[0].get_title().get_text()


def test_h2h_glmm_lines_show_log_odds_and_p_win() -> None:
    fig = plot_h2h_power(_table(items=[50, 100], effect=[math.log(1.5)], workers=[5, 10], judgments_per_item=[3]))
    assert fig.legends[0].get_texts()[0].get_text() == "0.405 (P(win) 0.6)"
    assert {ax.get_title() for ax in fig.axes} == {"5 workers, 3 judgments/item", "10 workers, 3 judgments/item"}
    assert fig.axes[0].get_xlabel() == "items"


def test_bleu_x_axis_is_the_axis_with_more_values_or_chosen() -> None:
    by_delta = _table(delta=[0.25, 0.5, 1.0, 1.5, 2.0], n=[500, 2000], p0=[0.1], b0=[25.0])
    assert plot_bleu_power(by_delta).axes[0].get_xlabel() == "difference in BLEU (points)"
    assert plot_bleu_power(by_delta, x="n").axes[0].get_xlabel() == "test-set size n (sentences)"
    with pytest.raises(InputError, match="'n' or 'delta'"):
        plot_bleu_power(by_delta, x="p0")


def test_accuracy_rows_and_likert_scale_from_params() -> None:
    table = _table(n=[500, 2000], delta=[0.01, 0.02, 0.03], agreement=[0.9, 0.95])
    assert len(plot_accuracy_power(table).axes) == 6
    assert len(plot_accuracy_power(table, type_m=False, type_s=False).axes) == 2
    fig = plot_likert_power(_table(items=[25, 50], effect=[0.5], workers=[3]), scale=(1.0, 5.0))
    assert "1–5 scale" in fig.legends[0].get_title().get_text()


@pytest.mark.parametrize("table, match", [
    (pd.DataFrame(), "non-empty"),
    (_table(n=[25, 50], p_win=[0.6]), "no column 'items'"),
    (pd.concat([_table(items=[25, 50], effect=[0.1], workers=[3])] * 2), "several rows per point"),
    (_table(items=[25, 50], effect=[0.1], workers=[3]).assign(power=np.nan), "no power values"),
])
def test_bad_tables_are_input_errors(table: pd.DataFrame, match: str) -> None:
    with pytest.raises(InputError, match=match):
        plot_likert_power(table)


def test_bad_target_is_an_input_error() -> None:
    with pytest.raises(InputError, match="target power"):
        plot_likert_power(_table(items=[25, 50], effect=[0.1], workers=[3]), target=80)


def test_save_figure_formats_dpi_and_bad_paths(tmp_path: Path) -> None:
    fig = plot_likert_power(_table(items=[25, 50], effect=[0.1], workers=[3]))
    for suffix in (".png", ".pdf", ".svg"):
        assert save_figure(fig, tmp_path / f"f{suffix}").stat().st_size > 1_000
    width = {dpi: _png_width(save_figure(fig, tmp_path / f"d{dpi}.png", dpi=dpi)) for dpi in (50, 100)}
    assert abs(width[100] - 2 * width[50]) <= 2
    with pytest.raises(InputError, match=r"\.png, \.pdf, \.svg"):
        save_figure(fig, tmp_path / "f.jpg")
    with pytest.raises(InputError, match="does not exist"):
        save_figure(fig, tmp_path / "missing" / "f.png")
    with pytest.raises(InputError, match="dpi"):
        save_figure(fig, tmp_path / "f.png", dpi=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d100.png", "d50.png", "f.pdf", "f.png", "f.svg"]
    mask = os.umask(0o022)
    os.umask(mask)
    assert (tmp_path / "f.png").stat().st_mode & 0o777 == 0o666 & ~mask


def test_figure_writer_joins_an_all_or_nothing_write(tmp_path: Path) -> None:
    from humaneval_power.io import table_writer, write_outputs
    from humaneval_power.plots import figure_writer

    table = _table(items=[25, 50], effect=[0.1], workers=[3])
    fig = plot_likert_power(table)
    write_outputs([(tmp_path / "t.csv", table_writer(table, tmp_path / "t.csv")),
                   (tmp_path / "p.svg", figure_writer(fig, tmp_path / "p.svg", dpi=72))])
    assert (tmp_path / "p.svg").read_text().lstrip().startswith("<?xml") and (tmp_path / "t.csv").exists()
    with pytest.raises(InputError, match="must end in"):
        figure_writer(fig, tmp_path / "p.gif")


def _png_width(path: Path) -> int:
    return int.from_bytes(path.read_bytes()[16:20], "big")


@pytest.mark.parametrize("script, written, needs_data", [
    ("fig6_card2020.py", ["fig6_card2020-high.png", "fig6_card2020-low.png"], False),
    ("gsm8k_accuracy.py", ["gsm8k_power.png"], True),
])
def test_examples_write_into_out(script: str, written: list[str], needs_data: bool, tmp_path: Path,
                                 request: pytest.FixtureRequest) -> None:
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    if needs_data:
        env["HEPOWER_DATA"] = str(request.getfixturevalue("data_dir"))
    subprocess.run([sys.executable, str(root / "examples" / script)], cwd=tmp_path, env=env, check=True,
                   capture_output=True)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == written


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[16:24]
    return int.from_bytes(header[:4], "big"), int.from_bytes(header[4:], "big")


@pytest.mark.parametrize("argv", [
    ["likert", "power", "--items", "20:200:20", "--effect", "0.15", "--method", "analytic"],
    ["h2h", "power", "--n", "25:400:25", "--p-win", "0.55", "0.6"],
    ["bleu", "power", "--n", "200", "1000", "--delta", "0.5", "1", "2", "--p0", "0.13", "--b0", "25.8",
     "--method", "saddlepoint", "--sims", "50", "--jobs", "1"],  # in the process: no pool per command
])
def test_cli_plot_dpi_and_type_m(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from humaneval_power.cli import main

    plain, with_type_m = tmp_path / "a.png", tmp_path / "b.png"
    assert main(argv + ["--plot", str(plain), "--dpi", "50", "--json"]) == 0
    assert main(argv + ["--plot", str(with_type_m), "--dpi", "100", "--type-m", "--json"]) == 0
    (w1, h1), (w2, h2) = _png_size(plain), _png_size(with_type_m)
    assert abs(w2 - 2 * w1) <= 2      # twice the dpi
    assert h2 > 3 * h1                # twice the dpi and a Type-M row under the power row
    capsys.readouterr()


@pytest.mark.r
def test_cli_glmm_plot(lme4_backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from humaneval_power.cli import main

    plot = tmp_path / "glmm.svg"
    assert main(["h2h", "power", "--sd-worker", "0.5", "--sd-item", "0.5", "--workers", "6", "--items", "20", "40",
                 "--effect", "0.7", "--sims", "10", "--jobs", "1", "--plot", str(plot), "--json"]) == 0
    svg = plot.read_text()
    assert "log-odds" in svg and "6 workers, 6 judgments/item" in svg
    capsys.readouterr()


@pytest.mark.parametrize("extra, message", [
    (["--dpi", "0"], "dpi must be a number from 10 to 2400"),
    (["--plot", "PLOT.jpg"], "--plot must end in .png, .pdf, .svg"),
])
def test_cli_bad_plot_options_fail_before_work(extra: list[str], message: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from humaneval_power.cli import main

    argv = ["bleu", "power", "--n", "100000", "--delta", "0.1", "--p0", "0.1", "--b0", "20", "--sims", "100000",
            "--plot", str(tmp_path / "p.png")] + [e.replace("PLOT", str(tmp_path / "p")) for e in extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_likert_with_one_items_value_is_drawn_against_workers() -> None:
    fig = plot_likert_power(_table(workers=[3, 5, 10, 20], effect=[0.1, 0.2], items=[100]))
    assert len(fig.axes) == 1 and fig.axes[0].get_xlabel() == "workers" and fig.axes[0].get_title() == "100 items"
    assert len(fig.axes[0].get_lines()[0].get_xdata()) == 4
