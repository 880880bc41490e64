"""The bad-input matrix (issues 18 and 24): every subcommand, every case one line on stderr, exit 2, nothing
on stdout, no output or temporary file left, input files (result stores included) untouched.

Every case fails before any computation, so the whole matrix takes seconds.
"""
from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from humaneval_power.cli import main
from humaneval_power.params import get_preset
from humaneval_power.store import _checksum

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


F1_TABLES = "--table-positive 0.1 0.05 0.15 0.7 --table-negative 0.9 0.05 0.03 0.02"
F1_SYMMETRIC = "--table-positive 0.1 0.1 0.1 0.7 --table-negative 0.9 0.04 0.04 0.02"
CASES: dict[str, Argv] = {
    # item 6: exit codes and validation gaps
    "seed -1": _likert("--seed", "-1"),
    "bleu estimate --n-boot 0": _s(f"bleu estimate {BLEU_FILES} --n-boot 0"),
    "bleu estimate --n-boot -1": _s(f"bleu estimate {BLEU_FILES} --n-boot -1"),
    "bleu test --trials 0": _s(f"{BLEU_TEST} --trials 0"),
    "h2h size --jobs -1": _s("h2h size --p-win 0.6 --jobs -1"),
    "h2h mde --target-power 2": _s("h2h mde --n 100 --target-power 2"),
    "h2h mde --target-power 0": _s("h2h mde --n 100 --target-power 0"),
    "h2h parameter file version 7": _s(f"{H2H_POWER} --params {{d}}/h2h7.json --workers 5 --items 20 --effect 0.6"),
    "accuracy estimate, one model twice": _s("accuracy estimate {d}/acc.csv --model-a A --model-b A"),
    "agreement unknown metric": _s("agreement {d}/ratings.csv --metric cosine"),
    "agreement --boot -1": _s("agreement {d}/ratings.csv --boot -1"),
    "agreement --level 2": _s("agreement {d}/ratings.csv --level 2 --out {o}/alpha.csv"),
    "f1 power, table not summing to 1": _s(f"f1 power --n 100 --p-positive 0.3 {F1_TABLES.replace('0.7', '0.9')}"),
    "f1 size, models with the same F1": _s(f"f1 size --p-positive 0.3 {F1_SYMMETRIC}"),
    "f1 mde, --p-positive 1": _s(f"f1 mde --n 100 --p-positive 1 {F1_TABLES}"),
    # item 3: unbounded work refused up front
    "items range of 10^8 values": _likert("--items", "2:100000000:1"),
    "bleu power --n 1e10": _s(BLEU_POWER.replace("--n 200", "--n 1e10")),
    "h2h split ties, n 1e12": _s(f"{H2H_POWER} --ties split --p-tie 0.1".replace("--n 50", "--n 1e12")),
    "bleu estimate --n-boot 1e12": _s(f"bleu estimate {BLEU_FILES} --n-boot 1e12"),
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
    "analyze ordinal with kenward-roger": _s("analyze {d}/ratings.csv --family ordinal --df kenward-roger"),
    "analyze ordinal with statsmodels": _s("analyze {d}/ratings.csv --family ordinal --backend statsmodels"),
    "analyze ordinal non-integer scale": _s("analyze {d}/ratings.csv --family ordinal --backend laplace --scale 0.5 5"),
    "analyze gaussian with clmm": _s("analyze {d}/ratings.csv --backend clmm"),
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

LIKERT = "likert power --workers 3 --items 20 --effect 0.2 --sims 20"
BUDGET = "likert budget --items 50 --workers 5 --ratings-per-item 2 --effect 0.2 --cost-per-rating 1 --sims 20"
ANALYZE = "analyze {d}/ratings.csv --backend statsmodels"
INVARIANT = "--sd-worker-system 0.1 --sd-item 0.1 --sd-item-system 0.1 --sd-residual 0.2"

#: issue 24: each case fails on the main branch before it (exit 0 or 1, a file overwritten, deleted or
#: created, or a misleading message) and is refused now; EXPECT: words the message must hold
CASES_24: dict[str, Argv] = {
    # item 1: no command writes over one of its own input files (resolved paths, symlinks, hard links)
    "analyze --out RATINGS": _s(f"{ANALYZE} --out {{d}}/ratings.csv"),
    "analyze --out a symlink to RATINGS": _s(f"{ANALYZE} --out {{d}}/link.csv"),
    "analyze --out a hard link to RATINGS": _s(f"{ANALYZE} --out {{d}}/hard.csv"),
    "analyze --out RATINGS by another path": _s(f"{ANALYZE} --out {{d}}/../{{d.name}}/ratings.csv"),
    "analyze --report RATINGS": _s("analyze {d}/ratings.md --backend statsmodels --report {d}/ratings.md"),
    "analyze --plot RATINGS": _s("analyze {d}/ratings.png --backend statsmodels --plot {d}/ratings.png"),
    "fit -o RATINGS": _s("fit {d}/ratings.json --backend statsmodels -o {d}/ratings.json"),
    "fit -o a symlink to RATINGS": _s("fit {d}/ratings.json --backend statsmodels -o {d}/link.json"),
    "likert power --out the --design-from pilot": _s(f"{LIKERT} --design-from {{d}}/ratings.csv --out {{d}}/ratings.csv"),
    "likert power --out a hard link to the pilot": _s(f"{LIKERT} --design-from {{d}}/ratings.csv --out {{d}}/hard.csv"),
    "likert power --out the --workload-from pilot": _s(f"{LIKERT} --workload-from {{d}}/ratings.csv "
                                                       "--out {d}/ratings.csv"),
    "likert power --out the --params file": _s(f"{LIKERT} --params {{d}}/params.json --out {{d}}/params.json"),
    "likert power --out the --design file": _s(f"{LIKERT} --design {{d}}/design.json --out {{d}}/design.json"),
    "likert budget --out the --params file": _s(f"{BUDGET} --params {{d}}/params.json --out {{d}}/params.json"),
    "h2h power --out the --params file": _s(f"{H2H_POWER} --params {{d}}/h2h.json --workers 5 --items 20 --effect 0.6 "
                                            "--out {d}/h2h.json"),
    # item 3: no output over the result store
    "--store X --out X (a new store)": _s(f"{LIKERT} --store {{o}}/s.csv --out {{o}}/s.csv"),
    "--store X --out X (an existing store)": _s(f"{LIKERT} --store {{d}}/store.csv --out {{d}}/store.csv"),
    "--store X --plot X": _s(f"{LIKERT} --store {{o}}/s.png --plot {{o}}/s.png"),
    "bleu power --store X --out X": _s("bleu power --n 200 --delta 1 --p0 0.13 --b0 25.8 --sims 10 "
                                       "--store {o}/s.json --out {o}/s.json"),
    "h2h power --store X --out X": _s("h2h power --n 50 --p-win 0.6 --store {o}/s.csv --out {o}/s.csv"),
    # item 2: store show never creates, changes or deletes; a non-store is refused
    "store show of an empty file": _s("store show {d}/empty.db"),
    "store show of an empty SQLite file": _s("store show {d}/blank.db"),
    "store show of a folder": _s("store show {d}"),
    # item 4: clean refusals, not internal errors
    "SDs of 1e308 in a parameter file": _s(f"{LIKERT} --params {{d}}/big.json"),
    "likert mde, SDs of 1e308 in a parameter file": _s("likert mde --sims 20 --workers 3 --items 20 --params {d}/big.json"),
    "a typed SD of 1e308": _s(f"{LIKERT} --preset card2020-low --sd-item-slope 1e308"),
    "an intercept of 1e308": _s(f"{LIKERT} --preset card2020-low --intercept 1e308"),
    "a typed invariant SD of 1e308": _s(f"{LIKERT} --sd-worker 1e308 {INVARIANT}"),
    "fit scores x 1e300 (statsmodels)": _s("fit {d}/huge.csv --backend statsmodels"),
    "fit scores x 1e300 (lme4)": _s("fit {d}/huge.csv --backend lme4"),
    "analyze scores x 1e300 (statsmodels)": _s("analyze {d}/huge.csv --backend statsmodels"),
    "analyze scores x 1e300 (lme4)": _s("analyze {d}/huge.csv --backend lme4"),
    "fit constant scores (statsmodels)": _s("fit {d}/const.csv --backend statsmodels"),
    "fit constant scores (lme4)": _s("fit {d}/const.csv --backend lme4"),
    "fit scores constant within each system (statsmodels)": _s("fit {d}/separate.csv --backend statsmodels"),
    "fit scores constant within each system (lme4)": _s("fit {d}/separate.csv --backend lme4"),
    "analyze scores constant within each system": _s("analyze {d}/separate.csv --backend statsmodels"),
    "analyze NaN in the --by column": _s(f"{ANALYZE.replace('ratings', 'byna')} --by grp"),
    # item 5: no answer to give
    "likert power --missing 0.999": _s(f"{LIKERT} --missing 0.999"),
    "likert mde --missing 0.999": _s("likert mde --sims 20 --workers 3 --items 20 --missing 0.999"),
    "likert mde --target-power below alpha": _s("likert mde --sims 20 --workers 3 --items 20 --target-power 0.01"),
    "likert size --target-power = alpha": _s("likert size --sims 20 --workers 3 --effect 0.2 --target-power 0.05"),
    "likert power --target-power below alpha": _s(f"{LIKERT} --target-power 0.04"),
    "likert budget --target-power below alpha": _s(f"{BUDGET} --target-power 0.01"),
    "h2h size --target-power below alpha": _s("h2h size --p-win 0.6 --target-power 0.04"),
    "h2h mde --target-power = alpha": _s("h2h mde --n 100 --target-power 0.1 --alpha 0.1"),
    "accuracy size --target-power below alpha": _s("accuracy size --delta 0.05 --agreement 0.9 --target-power 0.01"),
    "accuracy mde --target-power below alpha": _s("accuracy mde --n 100 --baseline 0.8 --target-power 0.03"),
    "accuracy table --target-power below alpha": _s("accuracy table --target-power 0.01"),
    "accuracy unpaired --power below alpha": _s("accuracy unpaired --p1 0.5 --p2 0.6 --power 0.01"),
    "bleu mde --target-power below alpha": _s("bleu mde --n 100 --p0 0.1 --b0 25 --target-power 0.01"),
    "bleu size --target-power below alpha": _s("bleu size --delta 1 --p0 0.1 --b0 25 --target-power 0.02"),
    # item 6: nonsense no longer accepted silently
    "bleu power --b0 200": _s(BLEU_POWER.replace("--b0 25.8", "--b0 200")),
    "bleu power --delta 150": _s(BLEU_POWER.replace("--delta 1", "--delta 150")),
    "bleu power --delta -101": _s(BLEU_POWER.replace("--delta 1", "--delta -101")),
    "bleu mde --b0 200": _s("bleu mde --n 100 --p0 0.1 --b0 200"),
    "bleu size --delta 150": _s("bleu size --delta 150 --p0 0.1 --b0 25"),
    "likert power --items-per-hit above the items": _s(f"{LIKERT} --items-per-hit 30"),
    "likert mde --items-per-hit above the items": _s("likert mde --sims 20 --workers 3 --items 4 --items-per-hit 5"),
    "likert power --out ''": _s(LIKERT, "--out", ""),
    "likert power --plot ''": _s(LIKERT, "--plot", ""),
    "bleu power --out ''": _s("bleu power --n 200 --delta 1 --p0 0.13 --b0 25.8 --sims 10", "--out", ""),
    "fit -o ''": _s("fit {d}/ratings.csv --backend statsmodels", "-o", ""),
    "analyze --out ''": _s(ANALYZE, "--out", ""),
    "likert power --params ''": _s(LIKERT, "--params", ""),
    "likert power --type-m without --plot": _s(f"{LIKERT} --type-m"),
    "bleu power --type-m without --plot": _s("bleu power --n 200 --delta 1 --p0 0.13 --b0 25.8 --sims 10 --type-m"),
    "h2h power --type-m without --plot": _s("h2h power --n 50 --p-win 0.6 --type-m"),
    "likert size given the --items it varies": _s("likert size --sims 20 --workers 3 --items 40 --effect 0.2"),
    "likert size given the --workers it varies": _s("likert size --sims 20 --workers 3 --items 40 --effect 0.2 --vary workers"),
    "likert size, a design file's items it varies": _s("likert size --sims 20 --workers 3 --effect 0.2 --design {d}/design.json"),
    "design file items 'lots', --items given": _s(f"{LIKERT} --design {{d}}/lots.json"),
    "likert mde, design file items 'lots', --items given": _s("likert mde --sims 20 --workers 3 --items 20 "
                                                              "--design {d}/lots.json"),
    "design file workers 2.5, --workers given": _s(f"{LIKERT} --design {{d}}/half.json"),
    "likert budget --platform-fee 5": _s(f"{BUDGET} --platform-fee 5"),
    "likert budget --platform-fee 1.5": _s(f"{BUDGET} --platform-fee 1.5"),
    # item 7: messages that say what is wrong
    "analyze a folder": _s("analyze {d} --backend statsmodels"),
    "fit a folder": _s("fit {d} --backend statsmodels"),
    "accuracy estimate a folder": _s("accuracy estimate {d} --model-a A --model-b B"),
    "bleu estimate --ref a folder": _s(f"bleu estimate {BLEU_FILES}".replace("{d}/ref.txt", "{d}")),
    "bleu test --systems a folder": _s(f"{BLEU_TEST}".replace("{d}/b.txt", "{d}")),
    "likert --params a folder": _s(f"{LIKERT} --params {{d}}"),
    "likert --design-from a folder": _s(f"{LIKERT} --design-from {{d}}"),
    "h2h --params a folder": _s("h2h size --p-win 0.6 --params {d} --workers 5"),
    "bleu estimate, a blank reference file": _s(f"bleu estimate {BLEU_FILES}".replace("ref.txt", "blank.txt")),
    "bleu test, a blank reference file": _s(f"{BLEU_TEST}".replace("ref.txt", "blank.txt")),
    "accuracy power --delta 0 --agreement 1": _s("accuracy power --n 100 --delta 0 --agreement 1"),
    "accuracy power simulated, --delta 0 --agreement 1": _s("accuracy power --n 100 --delta 0 --agreement 1 "
                                                             "--method simulate --sims 10"),
}
EXPECT = {
    **dict.fromkeys(list(CASES_24)[:20], "refusing to write over an input"),
    "store show of an empty file": "not a hepower result store",
    "store show of an empty SQLite file": "not a hepower result store",
    **{case: "folder" for case in CASES_24 if case.endswith("a folder")},
    "bleu estimate, a blank reference file": "blank",
    "bleu test, a blank reference file": "blank",
    "accuracy power --delta 0 --agreement 1": "agreement 1",
    "accuracy power simulated, --delta 0 --agreement 1": "agreement 1",
    "fit constant scores (lme4)": "constant",
    "fit scores constant within each system (lme4)": "never vary within a system",
    **{case: "too large" for case in CASES_24 if "1e308" in case},
    "fit scores x 1e300 (lme4)": "overflow",
    "analyze scores x 1e300 (lme4)": "overflow",
}
CASES.update(CASES_24)


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
    _inputs_24(d)
    return d


def _inputs_24(d: Path) -> None:
    """Inputs of issue 24's cases: copies and links of the ratings, broken designs and parameters, stores."""
    import shutil
    import sqlite3

    ratings = pd.read_csv(d / "ratings.csv")
    for name in ("ratings.md", "ratings.png", "ratings.json"):
        shutil.copy(d / "ratings.csv", d / name)
    (d / "link.csv").symlink_to(d / "ratings.csv")
    (d / "link.json").symlink_to(d / "ratings.json")
    os.link(d / "ratings.csv", d / "hard.csv")
    ratings.assign(score=ratings.score * 1e300).to_csv(d / "huge.csv", index=False)
    ratings.assign(score=3).to_csv(d / "const.csv", index=False)
    ratings.assign(score=(ratings.system == "B") + 3).to_csv(d / "separate.csv", index=False)
    ratings.assign(grp=["x" if k % 3 else None for k in range(len(ratings))]).to_csv(d / "byna.csv", index=False)
    low = get_preset("card2020-low").to_json()
    (d / "params.json").write_text(json.dumps(low))
    (d / "big.json").write_text(json.dumps({**low, **{k: 1e308 for k in low if k.startswith("sd_")}}))
    (d / "design.json").write_text(json.dumps({"items": 20}))
    (d / "lots.json").write_text(json.dumps({"items": "lots"}))
    (d / "half.json").write_text(json.dumps({"workers": 2.5}))
    (d / "blank.txt").write_text("\n \n\n")
    (d / "empty.db").write_bytes(b"")
    db = sqlite3.connect(d / "blank.db")
    db.execute("PRAGMA user_version = 1")  # an SQLite header, no tables
    db.commit()
    db.close()
    shutil.copy(d / "s.db", d / "store.csv")


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
    assert EXPECT.get(case, "") in lines[0], (case, lines[0])
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
    covered = {" ".join(argv[:1] if argv[0] in ("fit", "analyze", "serve", "agreement") else argv[:2])
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
