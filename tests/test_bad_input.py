"""The bad-input matrix (issue 18): every subcommand, every case one line on stderr, exit 2, nothing on
stdout, no output or temporary file left, input files (result stores included) untouched.

Every case fails before any computation, so the whole matrix takes seconds.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import pandas as pd
import pytest

from humaneval_power.store import _checksum
from humaneval_power.cli import main
from humaneval_power.params import get_preset

Argv = Callable[[Path, Path], list[str]]  # (inputs folder, outputs folder) -> command line


def _likert(*more: str) -> Argv:
    return lambda d, o: ["likert", "power", "--workers", "3", "--items", "20", "--effect", "0.2", "--sims", "50",
                         "--out", str(o / "out.csv"), "--plot", str(o / "out.png"),
                         *(m.format(d=d, o=o) for m in more)]


def _cmd(*argv: str) -> Argv:
    return lambda d, o: [a.format(d=d, o=o) for a in argv]


BLEU_POWER = "bleu power --n 200 --delta 1 --p0 0.13 --b0 25.8 --sims 10 --out {o}/out.csv --plot {o}/out.png"
H2H_POWER = "h2h power --n 50 --p-win 0.6 --out {o}/out.csv --plot {o}/out.png"
ACC_POWER = "accuracy power --n 500 --delta 0.02 --agreement 0.9 --out {o}/out.csv --plot {o}/out.png"
BLEU_FILES = "--ref {d}/ref.txt --sys-a {d}/a.txt --sys-b {d}/b.txt"
BLEU_TEST = "bleu test --ref {d}/ref.txt --baseline {d}/a.txt --systems {d}/b.txt"
FIT = "fit {d}/ratings.csv -o {o}/p.json"


def _s(text: str, *more: str) -> Argv:
    return _cmd(*text.split(), *more)


CASES: dict[str, Argv] = {
    # item 6: exit codes and validation gaps
    "seed -1": _likert("--seed", "-1"),
    "bleu estimate --nboot 0": _s(f"bleu estimate {BLEU_FILES} --nboot 0"),
    "bleu estimate --nboot -1": _s(f"bleu estimate {BLEU_FILES} --nboot -1"),
    "bleu test --trials 0": _s(f"{BLEU_TEST} --trials 0"),
    "h2h size --jobs -1": _s("h2h size --p-win 0.6 --jobs -1"),
    "h2h mde --target-power 2": _s("h2h mde --n 100 --target-power 2"),
    "h2h mde --target-power 0": _s("h2h mde --n 100 --target-power 0"),
    "h2h parameter file version 7": _s(f"{H2H_POWER} --params {{d}}/h2h7.json --workers 5 --items 20 --effect 0.6"),
    "accuracy estimate, one model twice": _s("accuracy estimate {d}/acc.csv --model-a A --model-b A"),
    # item 3: unbounded work refused up front
    "items range of 10^8 values": _likert("--items", "2:100000000:1"),
    "bleu power --n 1e10": _s(BLEU_POWER.replace("--n 200", "--n 1e10")),
    "h2h split ties, n 1e12": _s(f"{H2H_POWER} --ties split --p-tie 0.1".replace("--n 50", "--n 1e12")),
    "bleu estimate --nboot 1e12": _s(f"bleu estimate {BLEU_FILES} --nboot 1e12"),
    # item 4: output paths checked first
    "--out is a folder": _likert("--out", "{o}/dir.csv"),
    "--plot is a folder": _likert("--plot", "{o}/dir.png"),
    "--plot p.png --out DIR": _likert("--out", "{o}/dir.csv"),
    "--out unwritable": _likert("--out", "/proc/hepower-test.csv"),
    "--out folder missing": _likert("--out", "{o}/missing/t.csv"),
    "--out suffix": _likert("--out", "{o}/t.xlsx"),
    "--plot suffix": _s(ACC_POWER, "--plot", "{o}/out.txt"),
    "fit -o is a folder": _s(FIT, "-o", "{o}/dir.json"),
    "fit -o unwritable": _s(FIT, "-o", "/proc/p.json"),
    "fit -o suffix": _s(FIT, "-o", "{o}/p.txt"),
    # item 5: result stores that cannot lie (issue 15: --store; --checkpoint is its former name)
    "store is a folder": _likert("--store", "{o}/dir.csv"),
    "store folder missing": _likert("--store", "{o}/missing/s.db"),
    "store of random bytes": _likert("--store", "{d}/random.db"),
    "store of text": _likert("--store", "{d}/notes.db"),
    "store of the former checkpoint format": _likert("--checkpoint", "{d}/former.jsonl"),
    "store of another hepower version": _likert("--store", "{d}/old.db"),
    "store record edited": _likert("--store", "{d}/edited.db"),
    "store record forged (n = -7)": _likert("--store", "{d}/forged.db"),
    "--restart without --store": _likert("--restart"),
    "--scheduler unknown": _likert("--scheduler", "slurm"),
    "store show of a missing file": _s("store show", "{o}/missing.db"),
    "store show of text": _s("store show", "{d}/notes.db"),
    # likert
    "sims 0": _likert("--sims", "0"),
    "sims 1.5": _likert("--sims", "1.5"),
    "jobs 0": _likert("--jobs", "0"),
    "effect nan": _likert("--effect", "nan"),
    "effect inf": _likert("--effect", "inf"),
    "alpha 0": _likert("--alpha", "0"),
    "target power 1.5": _likert("--target-power", "1.5"),
    "unknown preset": _likert("--preset", "nope"),
    "negative SD": _likert("--sd-worker-slope", "-0.1", "--preset", "card2020-low"),
    "missing parameter file": _likert("--params", "{d}/absent.json"),
    "Likert file version 7": _likert("--params", "{d}/likert7.json"),
    "h2h file for likert": _likert("--params", "{d}/h2h.json"),
    "likert size without workers": _s("likert size --effect 0.1"),
    "likert size target power 2": _s("likert size --effect 0.1 --workers 3 --target-power 2"),
    "likert size sims 0": _s("likert size --effect 0.1 --workers 3 --sims 0"),
    "likert mde without items": _s("likert mde --workers 3"),
    "likert mde k above workers": _s("likert mde --workers 3 --items 50 --ratings-per-item 4"),
    "likert budget without costs": _s("likert budget --items 50 --workers 5 --ratings-per-item 2 --effect 0.2"),
    "likert budget below one HIT": _s("likert budget --items 50 --workers 5 --ratings-per-item 2 --effect 0.2 "
                                      "--cost-per-rating 1 --budget 0.5"),
    "likert budget negative fee": _s("likert budget --items 50 --workers 5 --ratings-per-item 2 --effect 0.2 "
                                     "--cost-per-rating 1 --platform-fee -0.1"),
    # h2h
    "h2h p-win 1.2": _s(H2H_POWER.replace("0.6", "1.2")),
    "h2h n 0": _s(H2H_POWER.replace("--n 50", "--n 0")),
    "h2h simulate sims 0": _s(f"{H2H_POWER} --method simulate --sims 0"),
    "h2h GLMM without --sd-item": _s(f"{H2H_POWER} --sd-worker 0.5 --workers 5 --items 10 --effect 0.6"),
    "h2h size p-win 0.5": _s("h2h size --p-win 0.5"),
    # accuracy
    "accuracy agreement 1.2": _s(ACC_POWER.replace("0.9", "1.2")),
    "accuracy simulate sims 0": _s(f"{ACC_POWER} --method simulate --sims 0"),
    "accuracy size delta 0": _s("accuracy size --delta 0 --agreement 0.9"),
    "accuracy mde baseline 1.5": _s("accuracy mde --n 100 --baseline 1.5"),
    "accuracy mde target power 1": _s("accuracy mde --n 100 --baseline 0.9 --target-power 1"),
    "accuracy estimate missing file": _s("accuracy estimate {d}/absent.csv --model-a A --model-b B"),
    "accuracy estimate unknown model": _s("accuracy estimate {d}/acc.csv --model-a A --model-b Z"),
    "accuracy unpaired p1 1.5": _s("accuracy unpaired --p1 1.5 --n 50 --p2 0.6"),
    "accuracy table target power 0": _s("accuracy table --target-power 0"),
    # bleu
    "bleu p0 1": _s(BLEU_POWER.replace("--p0 0.13", "--p0 1")),
    "bleu permutations 0": _s(f"{BLEU_POWER} --permutations 0"),
    "bleu sims 0": _s(BLEU_POWER.replace("--sims 10", "--sims 0")),
    "bleu mde n -5": _s("bleu mde --n -5 --p0 0.1 --b0 25"),
    "bleu size delta 0": _s("bleu size --delta 0 --p0 0.1 --b0 25"),
    "bleu estimate missing reference": _s(f"bleu estimate {BLEU_FILES}".replace("ref.txt", "absent.txt")),
    "bleu estimate length mismatch": _s(f"bleu estimate {BLEU_FILES}".replace("b.txt", "short.txt")),
    "bleu test system twice": _s(f"{BLEU_TEST} {{d}}/b.txt"),
    "bleu test not UTF-8": _s(f"{BLEU_TEST}".replace("b.txt", "latin1.txt")),
    "bleu test empty reference": _s(f"{BLEU_TEST}".replace("ref.txt", "empty.txt")),
    # fit
    "fit missing file": _s(FIT.replace("ratings.csv", "absent.csv")),
    "analyze missing file": _s("analyze {d}/absent.csv --backend statsmodels"),
    "analyze --out is a folder": _s("analyze {d}/ratings.csv --backend statsmodels --out {o}/dir.csv"),
    "analyze --report wrong suffix": _s("analyze {d}/ratings.csv --backend statsmodels --report {o}/r.txt"),
    "analyze unknown adjustment": _s("analyze {d}/ratings.csv --adjust sidak"),
    "analyze unknown baseline": _s("analyze {d}/ratings.csv --backend statsmodels --baseline Z"),
    "analyze maximal without R": _s("analyze {d}/ratings.csv --backend statsmodels --random maximal"),
    "analyze kenward-roger with bambi": _s("analyze {d}/ratings.csv --backend bambi --df kenward-roger"),
    "analyze --by unknown column": _s("analyze {d}/ratings.csv --backend statsmodels --by nocolumn"),
    "analyze --plot wrong suffix": _s("analyze {d}/ratings.csv --backend statsmodels --plot {o}/p.gif"),
    "analyze unknown family": _s("analyze {d}/ratings.csv --family poisson"),
    "analyze binomial on ratings": _s("analyze {d}/ratings.csv --family binomial"),
    "fit unknown column": _s(FIT, "--score", "rating"),
    "fit --n-boot 0": _s(FIT, "--n-boot", "0"),
    "fit --seed -1": _s(FIT, "--seed", "-1"),
    # serve (each refused before anything listens)
    "serve --port 0": _s("serve --port 0"),
    "serve --port 70000": _s("serve --port 70000"),
    "serve --time-limit 0": _s("serve --time-limit 0"),
    # usage
    "unknown group": _s("planets power"),
    "unknown command": _s("likert fly"),
}


def _stores(d: Path) -> None:
    """A store of a small run (seed 1), an edited, a forged and an old-version copy, and foreign files."""
    import shutil
    import sqlite3

    ck = d / "s.db"
    assert main(["likert", "power", "--workers", "3", "--items", "20", "--effect", "0.2", "--sims", "50",
                 "--store", str(ck), "--json"]) == 0

    def copy(name: str, sql: str, *args: Any) -> None:
        shutil.copy(ck, d / name)
        with sqlite3.connect(d / name) as db:
            db.execute(sql, args)
        db.close()

    db = sqlite3.connect(ck)
    cell, chunk, n, counts = db.execute("SELECT cell, chunk, n, counts FROM chunks").fetchone()
    db.close()
    edited = json.dumps({**json.loads(counts), "n_correct_sign": n}, sort_keys=True)  # power 1.0, checksum fails
    copy("edited.db", "UPDATE chunks SET counts = ?", edited)
    forged = json.dumps({**json.loads(counts), "n": -7}, sort_keys=True)  # a valid checksum over impossible counts
    copy("forged.db", "UPDATE chunks SET counts = ?, sum = ?", forged, _checksum(cell, chunk, n, forged))
    copy("old.db", "UPDATE meta SET value = '0.0.1' WHERE name = 'hepower'")
    (d / "random.db").write_bytes(os.urandom(300))
    (d / "notes.db").write_text("some notes\nnot json\n")
    (d / "former.jsonl").write_text('{"about": {}, "hepower_checkpoint": 1, "run": "0123"}\n')


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("inputs")
    (d / "ref.txt").write_text("the cat sat on the mat\na dog ran\nhello world\n")
    (d / "a.txt").write_text("the cat sat on a mat\na dog ran\nhello there\n")
    (d / "b.txt").write_text("a cat sat on the mat\nthe dog ran\nhello world\n")
    (d / "short.txt").write_text("the cat\n")
    (d / "empty.txt").write_text("")
    (d / "latin1.txt").write_bytes("caf\xe9 cat\na dog\nhello\n".encode("latin-1"))
    pd.DataFrame({"item": [1, 1, 2, 2], "model": ["A", "B", "A", "B"], "correct": [1, 0, 1, 1]}).to_csv(
        d / "acc.csv", index=False)
    rows = [(f"w{w}", f"i{i}", s, (w + i + (s == "B")) % 5 + 1) for w in range(3) for i in range(4) for s in "AB"]
    pd.DataFrame(rows, columns=["worker", "item", "system", "score"]).to_csv(d / "ratings.csv", index=False)
    h2h = {"schema": "humaneval-power/h2h-params", "version": 1, "family": "binomial", "sd_worker": 0.5,
           "sd_item": 0.5}
    (d / "h2h.json").write_text(json.dumps(h2h))
    (d / "h2h7.json").write_text(json.dumps({**h2h, "version": 7}))
    (d / "likert7.json").write_text(json.dumps({**get_preset("card2020-low").to_json(), "version": 7}))
    _stores(d)
    return d


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input(case: str, inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for folder in ("dir.csv", "dir.png", "dir.json"):
        (tmp_path / folder).mkdir()
    before = _snapshot(inputs)
    capsys.readouterr()
    code = main(CASES[case](inputs, tmp_path))
    captured = capsys.readouterr()
    assert code == 2, (case, captured.err)
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hepower") and "Traceback" not in captured.err, captured.err
    assert captured.out == ""
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["dir.csv", "dir.json", "dir.png"], f"outputs or temporary files left: {left}"
    assert _snapshot(inputs) == before, "an input file (or store) was changed"


def test_the_matrix_covers_every_subcommand() -> None:
    import argparse

    from humaneval_power.cli import build_parser

    def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return dict(found[0].choices) if found else {}

    commands = {f"{g} {c}".strip() for g, p in subparsers(build_parser()).items() for c in subparsers(p) or [""]}
    covered = {" ".join(argv[:1] if argv[0] in ("fit", "analyze", "serve") else argv[:2])
               for argv in (make(Path("d"), Path("o")) for make in CASES.values())}
    assert commands <= covered, sorted(commands - covered)


def test_a_bom_in_a_system_file_changes_nothing(tmp_path: Path) -> None:
    from humaneval_power.metrics import corpus_stats, read_lines

    ref, plain, bom = tmp_path / "ref.txt", tmp_path / "plain.txt", tmp_path / "bom.txt"
    ref.write_text("the cat sat\na dog ran\n")
    plain.write_text("the cat sat\na dog ran\n")
    bom.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert read_lines(bom, "system output") == read_lines(plain, "system output")
    refs = [read_lines(ref, "reference")]
    assert corpus_stats(read_lines(bom, "x"), refs).stats.tolist() == corpus_stats(read_lines(plain, "x"), refs).stats.tolist()


def test_lachenbruch_mde_says_why_there_is_none() -> None:
    from humaneval_power.scenarios.accuracy import accuracy_mde

    r = accuracy_mde(1, 0.9, "lachenbruch")
    assert r.value is None and not r.attainable and "increase n" in r.reason
