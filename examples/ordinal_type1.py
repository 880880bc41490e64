"""Type-I error of the ordinal (CLMM) tests under the null, to choose the default ordinal test (issue #26).

Null studies (both systems at latent effect 0) from the cumulative-logit process
(:class:`humaneval_power.ordinal_process.OrdinalProcess`: thresholds (-2, -0.7, 0.5, 1.8) on a 1..5 scale,
latent SDs worker 0.8, worker:system 0.3, item 1.0, item:system 0.5 — the settings of
benchmarks/bench_clmm.py; ``--process hr``: worker SD 0.5, the Howcroft & Rieser table of docs/ordinal.md) on
two designs, 2 systems:

* crossed: 5 workers rate both systems' outputs of 40 items (400 ratings);
* sparse:  3 of a pool of 15 workers per item (balanced, cyclic), 100 items (600 ratings).

Each study is fitted by the no-R batched Laplace CLMM (``fit_clmm_many``, four random terms, with the LRT and
one parametric-bootstrap LR per study from its fitted null model, pooled over the chunk of 200 studies)
and tested at alpha 0.05 by: the Bartlett-corrected LRT (LR / mean bootstrap LR against chi-square 1),
Wald z (clmm's test), the LRT (chi-square 1), Wald t with the Satterthwaite df of the latent working model
(``latent_satterthwaite_df``, plug-in SDs; the default) and Wald t with df = workers - 1. Each study also
draws one LR from the TRUE null parameters (the oracle Bartlett factor), and the report splits the rates by
singular / non-singular fits. ``--planner-seed S`` fits the planner's studies (``hepower likert power --seed
S``) instead of one stream; ``--effect`` shifts system B (power on the same random effects).
``--r-refits M`` also refits the first M studies (from ``--start``) with R ``ordinal::clmm`` (rpy2) and records its z.

Results are saved after every chunk to ``--out`` (npz; a rerun resumes), and ``--report`` prints the table
(rates with 95% Clopper-Pearson intervals) of one or more saved files.

Run: nice python examples/ordinal_type1.py --design crossed --sims 1000 --out crossed.npz [--r-refits 100]
     python examples/ordinal_type1.py --report crossed.npz sparse.npz
"""
from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from _ordinal_common import DESIGNS, PROCESSES, chunks, rate
from scipy import stats

from humaneval_power.analyses import OrdinalCLMM
from humaneval_power.analyses.ordinal import SINGULAR_SD
from humaneval_power.engine import chunk_seed
from humaneval_power.fitting.clmm import bartlett_draws, bootstrap_lr, crossed_groups, fit_clmm_many, treatment_design
from humaneval_power.ordinal_process import OrdinalProcess, study_dfs
from humaneval_power.scenarios.crowd import ORDINAL_CHUNK, CrowdScenario

ALPHA = 0.05
FIELDS = ("z", "p_wald", "p_lr", "df", "failed", "z_r", "p_bartlett", "factor", "lr", "lr_boot", "lr_oracle",
          "null_min_sd", "min_sd")


def true_null(process: OrdinalProcess, groups: dict[str, np.ndarray]) -> np.ndarray:
    """The process's null-model parameters in ``ClmmBatch.null_params`` order (thresholds, SDs of ``groups``)."""
    sd = {"worker": process.sd_worker, "item": process.sd_item, "worker:system": process.sd_worker_system,
          "item:system": process.sd_item_system}
    return np.array([*process.thresholds, *(sd[t] for t in groups)])


def studies(design: str, process: str, effect: float, sims: int, seed: int, planner_seed: int | None) -> np.ndarray:
    """The ratings (N x sims) of the simulated studies: one stream from ``seed``, or with ``planner_seed`` the
    planner's (``hepower likert power --seed planner_seed``: its chunks of 200 studies, each its own stream)."""
    d, proc = DESIGNS[design], PROCESSES[process]
    lay = d.draw(np.random.default_rng(seed), 1)
    means = np.array([0.0, effect])
    if planner_seed is None:
        return proc.simulate(lay, means, sims, np.random.default_rng([seed, 1]))
    key = CrowdScenario(d, proc, OrdinalCLMM.of(proc), effect).stream_key()
    return np.hstack([proc.simulate(lay, means, min(ORDINAL_CHUNK, sims - k * ORDINAL_CHUNK),
                                    np.random.default_rng(chunk_seed(planner_seed, key, k)))
                      for k in range(-(-sims // ORDINAL_CHUNK))])


def run(design: str, sims: int, seed: int, out: Path, chunk: int, r_refits: int, start: int = 0,
        process: str = "bench", effect: float = 0.0, planner_seed: int | None = None) -> None:
    """Simulate ``sims`` null studies and fit those from ``start`` on in chunks, saving after each (resuming a
    partial file); the first ``r_refits`` of them are also refitted by clmm. Each study also gets one bootstrap
    LR drawn from the TRUE null parameters (``lr_oracle``: the oracle Bartlett factor). ``effect``: the latent
    shift of the second system (power instead of Type-I error; the same random effects, common random numbers)."""
    d, proc = DESIGNS[design], PROCESSES[process]
    lay = d.draw(np.random.default_rng(seed), 1)
    Y = studies(design, process, effect, sims, seed, planner_seed)
    groups = crossed_groups(lay.worker, lay.item, lay.system)
    X, _ = treatment_design(lay.system)
    r_fit = None
    if r_refits:
        from humaneval_power.fitting.clmm_r import fit_clmm_r as r_fit
    for cols, res in chunks(out, FIELDS, sims, chunk, design, start, design=design, process=process, effect=effect,
                            workers=d.workers):
        n = cols.stop - cols.start
        b = fit_clmm_many(Y[:, cols], X, groups, coef=0, scale=proc.scale, lrt=True, bootstrap=bartlett_draws(n))
        res["z"][cols], res["p_wald"][cols], res["p_lr"][cols] = b.z, b.p_wald, b.p_lr
        res["p_bartlett"][cols] = b.p_bartlett
        res["factor"][cols] = np.nanmean(b.lr_boot)
        res["lr"][cols], res["lr_boot"][cols] = b.lr, np.nanmean(b.lr_boot, axis=1)
        res["min_sd"][cols] = np.nanmin(b.sds, axis=1)
        res["null_min_sd"][cols] = np.nanmin(b.null_params[:, -len(groups):], axis=1)
        oracle = replace(b, null_params=np.tile(true_null(proc, groups), (n, 1)))
        res["lr_oracle"][cols] = bootstrap_lr(oracle, X, groups, coef=0, scale=proc.scale, draws=1,
                                              seed=[seed, 3, cols.start])[:, 0]
        res["failed"][cols] = b.failed
        res["df"][cols] = study_dfs(b.sds, groups, X)
        if r_fit is not None:
            for j in range(cols.start, min(cols.stop, r_refits)):
                f = r_fit(Y[:, j], X, groups, scale=proc.scale)
                res["z_r"][j] = f.beta[0] / f.se_beta[0]


def per_study(design: str, sims: int, studies: int, draws: int, seed: int, out: Path, process: str = "bench") -> None:
    """The Bartlett test as a user runs it on one data set: each of the first ``studies`` null studies with its own
    factor from ``draws`` bootstrap data sets of its fitted null model; saved (resuming) after each study."""
    d, proc = DESIGNS[design], PROCESSES[process]
    lay = d.draw(np.random.default_rng(seed), 1)
    Y = proc.simulate(lay, np.zeros(d.systems), sims, np.random.default_rng([seed, 1]))  # run()'s studies
    groups = crossed_groups(lay.worker, lay.item, lay.system)
    X, _ = treatment_design(lay.system)
    for cols, res in chunks(out, ["p_study"], studies, 1, f"{design} per study", design=design, draws=draws):
        j = cols.start
        b = fit_clmm_many(Y[:, [j]], X, groups, coef=0, scale=proc.scale, lrt=True, bootstrap=draws, seed=[seed, 2, j])
        res["p_study"][j] = b.p_bartlett[0]


def oracle_note(label: str, r: Any, ok: np.ndarray, p_t: np.ndarray) -> str:
    """The Bartlett factor from the fitted null models against the oracle's (draws from the true parameters), and
    the rates of the studies whose full fit is singular (an SD < SINGULAR_SD) and of the others."""
    lr, boot, orc = r["lr"][ok], r["lr_boot"][ok], r["lr_oracle"][ok]
    n = len(lr)
    parts = [slice(i, min(n, i + 200)) for i in range(0, n, 200)]
    p_or = np.concatenate([stats.chi2.sf(lr[c] / np.nanmean(orc[c]), 1) for c in parts])
    sing, null_sing = r["min_sd"][ok] < SINGULAR_SD, r["null_min_sd"][ok] < SINGULAR_SD

    def mean_se(x: np.ndarray) -> str:
        x = x[np.isfinite(x)]
        return f"{x.mean():.3f} (SE {x.std(ddof=1) / np.sqrt(x.size):.3f}, {x.size} studies)"

    groups = "; ".join(f"{name} ({g.sum()} studies): Bartlett {rate(r['p_bartlett'][ok][g] < ALPHA)}, oracle "
                       f"{rate(p_or[g] < ALPHA)}, t {rate(p_t[g] < ALPHA)}"
                       for name, g in (("singular", sing), ("non-singular", ~sing)))
    return (f"{label}: Bartlett factor from the fitted null models {mean_se(boot)}, from the true parameters "
            f"{mean_se(orc)}; the draws from singular null fits ({null_sing.sum()} studies) {mean_se(boot[null_sing])}, "
            f"from the others {mean_se(boot[~null_sing])}. Rate with the oracle factor (per chunk) "
            f"{rate(p_or < ALPHA)}. By the full fit: {groups}")


def report(paths: list[Path]) -> str:
    """The Markdown table of the saved files without clmm refits, and per design the comparison with clmm on the
    studies refitted (the union over the files, by study)."""
    lines = [("| design | studies (failed) | Bartlett LRT (factors) | Wald z | LRT, chi-square | LRT, F(1, df) "
              "| t, Satterthwaite df (median df) | t, df = workers - 1 |"), "|---|---|---|---|---|---|---|---|"]
    refits: dict[str, dict[int, tuple[float, float]]] = {}
    notes_pre: list[str] = []
    for path in paths:
        r = np.load(path)
        if "p_study" in r:
            continue
        fitted = np.isfinite(r["z"]) | (r["failed"] == 1)
        zr = r["z_r"]
        if np.isfinite(zr).any():
            both = np.isfinite(zr) & np.isfinite(r["z"])
            refits.setdefault(str(r["design"]), {}).update(
                {int(j): (float(r["z"][j]), float(zr[j])) for j in np.flatnonzero(both)})
            continue
        ok = fitted & (r["failed"] == 0)
        z, p_lr, df = r["z"][ok], r["p_lr"][ok], r["df"][ok]
        p_f = stats.f.sf(stats.chi2.isf(p_lr, 1), 1, df)
        p_t = 2 * stats.t.sf(np.abs(z), df)
        p_w = 2 * stats.t.sf(np.abs(z), int(r["workers"]) - 1)
        fac = np.unique(np.round(r["factor"][fitted], 3))
        label = f"{r['design']}" + (f", {r['process']}" if "process" in r else "") + (
            f", effect {float(r['effect']):g}" if "effect" in r and float(r["effect"]) else "")
        if "lr_oracle" in r:
            notes_pre.append(oracle_note(label, r, ok, p_t))
        lines.append(f"| {label} | {fitted.sum()} ({fitted.sum() - ok.sum()}) | "
                     f"{rate(r['p_bartlett'][ok] < ALPHA)} ({', '.join(f'{f:.3f}' for f in fac)}) | "
                     f"{rate(2 * stats.norm.sf(np.abs(z)) < ALPHA)} | {rate(p_lr < ALPHA)} | {rate(p_f < ALPHA)} | "
                     f"{rate(p_t < ALPHA)} ({np.median(df):.1f}) | {rate(p_w < ALPHA)} |")
    notes = notes_pre
    pooled = {str(np.load(p)["design"]): np.load(p) for p in paths if "p_bartlett" in np.load(p)}
    for path in paths:
        r = np.load(path)
        if "p_study" not in r or str(r["design"]) not in pooled:
            continue
        ps = r["p_study"][np.isfinite(r["p_study"])]
        pc = pooled[str(r["design"])]["p_bartlett"][:ps.size]
        notes.append(f"{r['design']}: per-study Bartlett ({int(r['draws'])} bootstrap draws per study) on the first {ps.size} "
                     f"studies: rate {rate(ps < ALPHA)}, chunk factor {rate(pc < ALPHA)}; decisions agree on "
                     f"{int(np.sum((ps < ALPHA) == (pc < ALPHA)))}/{ps.size}; median |p - p_chunk| "
                     f"{np.median(np.abs(ps - pc)):.3f}")
    crit = stats.norm.isf(ALPHA / 2)
    for design, pairs in refits.items():
        zf, zr = (np.array(v) for v in zip(*pairs.values()))
        notes.append(f"{design}: {zf.size} studies refitted by clmm: Wald z rate clmm {rate(np.abs(zr) > crit)}, "
                     f"fast path {rate(np.abs(zf) > crit)}; decisions agree on "
                     f"{int(np.sum((np.abs(zr) > crit) == (np.abs(zf) > crit)))}/{zf.size}, "
                     f"max |z - z_clmm| {np.max(np.abs(zf - zr)):.1e}")
    return "\n".join(lines + [""] + notes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--design", choices=sorted(DESIGNS))
    ap.add_argument("--process", choices=sorted(PROCESSES), default="bench",
                    help="bench: sd_worker 0.8 (benchmarks/bench_clmm.py); hr: sd_worker 0.5 (the H&R table)")
    ap.add_argument("--sims", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--effect", type=float, default=0.0, help="latent shift of system B (0: the null)")
    ap.add_argument("--planner-seed", type=int, help="the planner's studies (hepower likert power --seed S) "
                    "instead of one stream from --seed")
    ap.add_argument("--chunk", type=int, default=200, help="studies per batch (the planner's chunk of the "
                    "Bartlett test: its factor is the mean bootstrap LR of the batch)")
    ap.add_argument("--r-refits", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first study to fit (to split clmm refits over processes)")
    ap.add_argument("--per-study", type=int, nargs=2, metavar=("STUDIES", "DRAWS"),
                    help="the per-study Bartlett test (its own bootstrap draws) on the first STUDIES studies")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--report", type=Path, nargs="+")
    a = ap.parse_args()
    if a.report:
        print(report(a.report))
        return
    if a.design is None or a.out is None:
        ap.error("give --design and --out (or --report FILES)")
    if a.per_study:
        per_study(a.design, a.sims, *a.per_study, a.seed, a.out, a.process)
        return
    run(a.design, a.sims, a.seed, a.out, a.chunk, a.r_refits, a.start, a.process, a.effect, a.planner_seed)


if __name__ == "__main__":
    main()
