"""`hepower fit` input validation: one-line messages, exit 2, no output file (no R needed)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from humaneval_power.cli import main
from humaneval_power.errors import InputError
from humaneval_power.fitting.ratings import read_judgments, read_ratings


def _ratings(tmp: Path) -> Path:
    rows = [(f"w{w}", f"i{i}", s, (w + i + (s == "B")) % 5 + 1) for w in range(3) for i in range(4) for s in "AB"]
    path = tmp / "ok.csv"
    pd.DataFrame(rows, columns=["worker", "item", "system", "score"]).to_csv(path, index=False)
    return path


def _write(tmp: Path, name: str, frame: pd.DataFrame) -> str:
    path = tmp / name
    frame.to_csv(path, index=False)
    return str(path)


def _cases(tmp: Path) -> dict[str, list[str]]:
    ok = _ratings(tmp)
    base = pd.read_csv(ok)
    out = ["-o", str(tmp / "params.json")]
    nonnum = base.astype({"score": object})
    nonnum.loc[3, "score"] = "good"
    nan = base.copy()
    nan.loc[2, "score"] = None
    dup = pd.concat([base, base.iloc[:2]])
    pairs = pd.DataFrame({"judge": ["j1", "j2"], "segment": ["1", "2"], "system_a": ["A", "A"],
                          "system_b": ["B", "B"], "outcome": ["a", "maybe"]})
    return {
        "missing file": [str(tmp / "absent.csv")] + out,
        "missing column": [str(ok), "--score", "rating"] + out,
        "no worker column": [_write(tmp, "noworker.csv", base.drop(columns=["worker"]))] + out,
        "non-numeric score": [_write(tmp, "nonnum.csv", nonnum)] + out,
        "missing score": [_write(tmp, "nan.csv", nan)] + out,
        "single system": [_write(tmp, "one.csv", base[base.system == "A"])] + out,
        "single worker": [_write(tmp, "onew.csv", base[base.worker == "w0"])] + out,
        "single item": [_write(tmp, "onei.csv", base[base["item"] == "i0"])] + out,
        "duplicates": [_write(tmp, "dup.csv", dup)] + out,
        "outside scale": [str(ok), "--scale", "1", "4"] + out,
        "scale order": [str(ok), "--scale", "5", "1"] + out,
        "unknown baseline": [str(ok), "--baseline", "Z"] + out,
        "unknown system": [str(ok), "--systems", "A", "Q"] + out,
        "where no rows": [str(ok), "--where", "system=Q"] + out,
        "where malformed": [str(ok), "--where", "system"] + out,
        "output suffix": [str(ok), "-o", str(tmp / "params.txt")],
        "bad outcome": [_write(tmp, "pairs.csv", pairs), "--family", "binomial", "--worker", "judge",
                        "--item", "segment"] + out,
        "statsmodels binomial": [_write(tmp, "pairs2.csv", pairs.iloc[:1]), "--family", "binomial",
                                 "--worker", "judge", "--item", "segment", "--backend", "statsmodels"] + out,
        "wald correlated": [str(ok), "--correlated", "--intervals", "wald"] + out,
        "statsmodels posterior": [str(ok), "--backend", "statsmodels", "--intervals", "posterior"] + out,
        "ties for ratings": [str(ok), "--ties", "split"] + out,
        "empty file": [str(tmp / "empty.csv")] + out,
    }


def test_bad_input_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.csv").write_text("worker,item,system,score\n")
    cases = _cases(tmp_path)
    assert len(cases) >= 12
    for name, argv in cases.items():
        code = main(["fit"] + argv)
        captured = capsys.readouterr()
        lines = captured.err.strip().splitlines()
        assert code == 2, (name, captured.err)
        assert len(lines) == 1 and "Traceback" not in captured.err, (name, captured.err)
        assert captured.out == ""
        assert not (tmp_path / "params.json").exists(), name


def test_duplicates_average_or_keep(tmp_path: Path) -> None:
    base = pd.read_csv(_ratings(tmp_path))
    dup = pd.concat([base, base.iloc[:1].assign(score=1)])
    avg = read_ratings(dup, duplicates="average")
    assert len(avg.frame) == len(base)
    first = avg.frame.iloc[0]
    assert first.score == pytest.approx((base.score.iloc[0] + 1) / 2)
    kept = read_ratings(dup, duplicates="keep")
    assert len(kept.frame) == len(base) + 1 and kept.notes


def test_scale_and_column_aliases(tmp_path: Path) -> None:
    base = pd.read_csv(_ratings(tmp_path)).rename(columns={"worker": "annotator", "score": "rating"})
    data = read_ratings(base, scale=(1, 5), baseline="B")
    assert data.systems == ("B", "A")
    assert data.frame.score.between(0, 1).all() and data.scale == (1.0, 5.0)


def test_judgments_orientation_and_ties() -> None:
    pairs = pd.DataFrame({
        "worker": ["j1", "j1", "j2", "j2", "j3"], "item": ["1", "2", "1", "2", "3"],
        "system_a": ["A", "B", "A", "B", "A"], "system_b": ["B", "A", "B", "A", "B"],
        "outcome": ["b", "a", "tie", "b", "A"],
    })
    drop = read_judgments(pairs, baseline="A")
    assert list(drop.frame.score) == [1.0, 1.0, 0.0, 0.0]  # B won, B won (as a), A won (b), A won by name
    split = read_judgments(pairs, baseline="A", ties="split")
    assert list(split.frame.score) == [1.0, 1.0, 0.5, 0.0, 0.0]  # one row per judgment, a tie scores 1/2
    assert split.counts()["n_ratings"] == 5
    with pytest.raises(InputError):
        read_judgments(pairs, baseline="C")


def test_simplify_keeps_the_last_component(tmp_path: Path) -> None:
    """Pure noise: every component is at zero; --simplify drops all but one, and says why it stops."""
    import numpy as np

    from humaneval_power.fitting.model import fit_pilot

    rows = [(w, i, s) for w in range(3) for i in range(6) for s in "AB"]
    frame = pd.DataFrame(rows, columns=["worker", "item", "system"])
    frame["score"] = np.random.default_rng(21).normal(size=len(frame))  # a seed whose REML fit is all zeros
    fit = fit_pilot(read_ratings(frame), "statsmodels", simplify=True)
    assert len(fit.dropped) == 3 and fit.raw.singular
    assert fit.steps[-1].startswith("kept the last variance component")


@pytest.mark.parametrize("cholmod", [True, False], ids=["sparse", "no-sparse"])
def test_statsmodels_fits_designs_beyond_dense_algebra_or_says_what_to_install(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, cholmod: bool) -> None:
    """4,001 workers and 4,001 items with slopes: 8,002 effects in the smaller factor. With CHOLMOD the sparse
    path fits them; without it, one line naming what to install (or the lme4 backend), exit 2, no file."""
    from humaneval_power.fitting import sparse_inverse

    if cholmod:
        pytest.importorskip("sksparse", reason="scikit-sparse (the [sparse] extra) is not installed")
    else:
        def unavailable() -> None:
            raise ImportError(sparse_inverse.UNAVAILABLE)

        monkeypatch.setattr(sparse_inverse, "cholmod", unavailable)
    rows = [(f"w{k}", f"i{k}", s, 3) for k in range(4001) for s in "AB"]
    rows += [(f"w{k}", f"i{(k + 1) % 4001}", s, 4) for k in range(4001) for s in "AB"]
    src = _write(tmp_path, "wide.csv", pd.DataFrame(rows, columns=["worker", "item", "system", "score"]))
    out = tmp_path / "p.json"
    code = main(["fit", src, "--backend", "statsmodels", "-o", str(out)])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("hepower fit [")]
    if cholmod:
        assert code == 0 and out.exists(), err
        return
    assert code == 2
    assert len(err) == 1 and "scikit-sparse" in err[0] and "--backend lme4" in err[0], err  # one line besides progress
    assert not out.exists()
