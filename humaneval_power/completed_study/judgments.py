"""Analyse a completed head-to-head study (``hepower analyze --family binomial``).

Judgments as ``hepower fit --family binomial`` reads them (``system_a``,
``system_b``, ``outcome``; ties dropped or split). For every pair of systems
(later minus earlier in the system order, the baseline first): the win rate and
the logistic GLMM ``won ~ 1 + (1 | worker) + (1 | item)`` (glmer, Laplace; a
split tie is half a win and half a loss, :mod:`~humaneval_power.fitting.judgments`)
whose intercept is the log-odds that the later system wins for a typical worker
and item, Wald z test, p-values adjusted over all pairs (holm, bonferroni, fdr or
none; intervals Bonferroni-adjusted as in ``hepower analyze``). With more than
two systems, a Bradley-Terry ranking: ``logit P(j beats i) = lambda_j - lambda_i``
fitted by maximum likelihood to all judgments at once (the same weighted
likelihood for split ties), abilities relative to the baseline with Wald intervals.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..validation import TIE_POLICIES, check_choice
from .inference import INTERVAL_TEXT
from .report import text_table, warnings_section

#: |ability| beyond this (log-odds against the baseline) marks a Bradley-Terry fit as quasi-separated
MAX_ABILITY = 10.0
#: the columns of a pair withheld from inference (quasi-separated or degenerate): missing, with the reason
WALD_COLUMNS = ("log_odds", "se", "z", "p_value")


def p_win_text(ties: str) -> str:
    """What the ``p_win`` column means under a tie policy: plogis(log_odds) for a typical worker and item,
    a decisive-judgment probability with ties dropped, an expected score with ties split (not the
    unconditional p_win of ``h2h power --p-win``)."""
    what = ("the probability that a decisive (non-tied) judgment prefers the first system" if ties == "drop" else
            "the first system's expected score per judgment (win 1, tie 1/2, loss 0), not a win probability")
    return f"p_win = plogis(log_odds): {what}, for a typical worker and item"


@dataclass(frozen=True, eq=False)
class JudgmentAnalysis:
    """What :func:`analyze_judgments` found: per pair (:attr:`pairs`) and the ranking (:attr:`ranking`)."""

    pairs: pd.DataFrame    #: system, versus, n, wins, losses, ties, win_rate, log_odds, se, z, p_value, p_adjusted,
    #: ci_low, ci_high (log-odds), p_win, sd_worker, sd_item, singular, separation
    ranking: pd.DataFrame  #: rank, system, ability, se, ci_low, ci_high, wins, losses, ties (empty for two systems)
    design: pd.DataFrame   #: name, value
    adjust: str
    ties: str
    level: float
    source: str
    notes: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)

    model = "won ~ 1 + (1 | worker) + (1 | item), logistic (per pair)"
    singular = property(lambda self: bool(self.pairs["singular"].any()))

    def tables(self) -> dict[str, pd.DataFrame]:
        return {"design": self.design, "pairs": self.pairs, "ranking": self.ranking}

    def records(self, paper: bool = False) -> list[dict[str, Any]]:
        """One record per pair (the CLI's ``--json``); ``paper`` (agreement, letters, ranks) is refused: those
        are computed for ratings."""
        if paper:
            raise InputError("--paper-records applies to ratings (--family gaussian), not to head-to-head judgments")
        return [{**r, "adjust": self.adjust, "ties_policy": self.ties} for r in self.pairs.to_dict("records")]

    def methods(self) -> str:
        """A methods paragraph for the paper."""
        ties = ("Ties were dropped." if self.ties == "drop" else
                "Each tie counted as half a win and half a loss (a weighted likelihood).")
        adj = {"none": "without adjustment", "fdr": "by Benjamini-Hochberg's false discovery rate",
               "holm": "by Holm's step-down method", "bonferroni": "by Bonferroni's method"}[self.adjust]
        decisive = "decisive " if self.ties == "drop" else ""
        text = (f"For every pair of systems we fitted a logistic mixed model to the {decisive}judgments,"
                " with random intercepts for workers and items (`won ~ 1 + (1 | worker) + (1 | item)`, "
                "lme4's glmer, Laplace approximation); its intercept is the log-odds that one system is preferred "
                f"for a typical worker and item, tested against 0 by a Wald z test. {ties} p-values were adjusted "
                f"over the {len(self.pairs)} pairs {adj}; intervals are {self.level:.0%} Wald intervals"
                + ("" if self.adjust == "none" or len(self.pairs) == 1 else ", Bonferroni-adjusted") + ".")
        withheld = self.pairs.loc[self.pairs["withheld"]]
        if len(withheld):
            text += (" For " + ", ".join(f"{r.system} vs {r.versus}" for r in withheld.itertuples())
                     + " the model was quasi-separated or degenerate (items or workers won unanimously), so its "
                     "Wald test and interval are not reported; we report the raw win rate only.")
        if len(self.ranking):
            text += (" We ranked the systems by a Bradley-Terry model (logit P(j preferred to i) = lambda_j - "
                     "lambda_i) fitted by maximum likelihood to all judgments, with Wald intervals for each "
                     f"ability relative to {self.ranking.loc[self.ranking['ability'] == 0, 'system'].iloc[0]}; "
                     "these treat judgments as independent (no worker or item effects).")
        return text

    def __str__(self) -> str:
        parts = [f"{self.source}: " + "; ".join(f"{n} {v}" for n, v in zip(self.design.name, self.design.value)),
                 f"model: {self.model}; ties {self.ties}; adjustment {self.adjust} over {len(self.pairs)} pairs",
                 "", text_table(self.pairs.drop(columns="withheld_reason")), p_win_text(self.ties)]
        if len(self.ranking):
            parts += ["", f"Bradley-Terry ranking ({self.level:.0%} Wald intervals, log-odds vs the baseline):",
                      text_table(self.ranking)]
        parts += [f"note: {n}" for n in self.notes]
        return "\n".join(parts)

    def figure(self) -> Any:
        """The Bradley-Terry abilities (left, with more than two systems) and the pairwise log-odds (right)."""
        from ..plots import plot_intervals

        pairs = self.pairs.assign(label=self.pairs["system"] + " vs " + self.pairs["versus"],
                                  estimate=self.pairs["log_odds"],
                                  significant=self.pairs["p_adjusted"] <= round(1 - self.level, 12))
        panels = []
        if len(self.ranking):
            panels.append((self.ranking.rename(columns={"system": "label", "ability": "estimate"}),
                           f"Bradley-Terry abilities, {self.level:.0%} CIs", "log-odds vs the baseline", 0.0))
        kind = INTERVAL_TEXT["none" if len(self.pairs) == 1 else self.adjust]
        panels.append((pairs, f"pairwise GLMMs, {kind} {self.level:.0%} CIs",
                       "log-odds that the first system wins", 0.0))
        return plot_intervals(panels, title=Path(self.source).name)

    def report_sections(self, check: Any = None) -> tuple[str, list[tuple[str, list[Any]]]]:
        """Title and sections of the report (see :mod:`.report`)."""
        sections: list[tuple[str, list[Any]]] = [
            ("Methods (for the paper)", [self.methods()]),
            ("Design", [self.design]),
            ("Pairwise comparisons", [
                "win_rate: share of the pair's judgments won by the first system "
                + ("(ties excluded)" if self.ties == "drop" else "(a tie counts one half)")
                + f"; log_odds: the GLMM's intercept; {p_win_text(self.ties)}.",
                self.pairs.drop(columns="withheld_reason"), self.figure()]),
        ]
        if len(self.ranking):
            sections.append(("Bradley-Terry ranking", [self.ranking]))
        warns = [f"{r.system} vs {r.versus}: singular fit (a worker or item SD at zero)"
                 for r in self.pairs.itertuples() if r.singular] + list(self.notes)
        sections += warnings_section(warns)
        return f"Head-to-head analysis of {Path(self.source).name}", sections


def _pairs_present(raw: pd.DataFrame, a: str, b: str) -> set[frozenset[str]]:
    return {frozenset(p) for p in zip(raw[a].astype(str), raw[b].astype(str)) if p[0] != p[1]}


def read_pairwise(source: str | Path | pd.DataFrame, worker: str | None = None, item: str | None = None,
                  system_a: str = "system_a", system_b: str = "system_b", outcome: str = "outcome",
                  baseline: str | None = None, systems: Sequence[str] | None = None,
                  where: dict[str, str] | None = None, tie_values: Sequence[str] = ()
                  ) -> tuple[tuple[str, ...], dict[tuple[int, int], pd.DataFrame], str]:
    """Every compared pair's judgments, read and validated by :func:`~humaneval_power.fitting.ratings.read_judgments`.

    Returns the system order (baseline first), ``{(i, j): frame}`` for i < j with ``score`` 1 when system j
    won, 0 when it lost, 1/2 for a tie, and the source's name. Pairs never compared are absent.
    """
    from ..fitting.ratings import judged_systems, read_judgments
    from ..io import apply_filters, read_table, resolve_column

    raw, name, _ = read_table(source)
    raw = apply_filters(raw, where)
    a, b = resolve_column(raw, "system_a", system_a), resolve_column(raw, "system_b", system_b)
    order = judged_systems(raw[a], raw[b], baseline, systems)
    present = _pairs_present(raw, a, b)
    out = {}
    for i, j in itertools.combinations(range(len(order)), 2):
        if frozenset((order[i], order[j])) in present:
            data = read_judgments(raw, worker, item, a, b, outcome, order[i], [order[i], order[j]], None, "split",
                                  tie_values)
            out[(i, j)] = data.frame
    if not out:
        raise InputError("no judgments compare two of the systems")
    return order, out, name


def bradley_terry(frames: dict[tuple[int, int], pd.DataFrame], k: int, level: float = 0.95) -> pd.DataFrame:
    """Bradley-Terry abilities (system 0 fixed at 0) by Newton's method on the weighted binomial likelihood
    ``score * eta - log(1 + exp(eta))``, ``eta = lambda_j - lambda_i``; Wald SEs from the information."""
    from scipy import stats
    from scipy.sparse.csgraph import connected_components

    i = np.concatenate([np.full(len(f), a) for (a, _), f in frames.items()])
    j = np.concatenate([np.full(len(f), b) for (_, b), f in frames.items()])
    s = np.concatenate([f["score"].to_numpy(float) for f in frames.values()])
    adj = np.zeros((k, k))
    adj[i, j] = adj[j, i] = 1
    n_groups, _ = connected_components(adj, directed=False)
    if n_groups > 1:
        raise InputError("the comparisons are disconnected: no judgments link some groups of systems, so they "
                         "cannot be ranked on one scale")
    x = np.zeros((len(s), k))
    x[np.arange(len(s)), j] += 1.0
    x[np.arange(len(s)), i] -= 1.0
    x = x[:, 1:]
    beta = np.zeros(k - 1)
    for _ in range(100):
        p = 1 / (1 + np.exp(-(x @ beta)))
        info = x.T @ (x * (p * (1 - p))[:, None])
        step = np.linalg.solve(info, x.T @ (s - p))
        beta += step
        if np.max(np.abs(step)) < 1e-10:
            break
    p = 1 / (1 + np.exp(-(x @ beta)))
    cov = np.linalg.inv(x.T @ (x * (p * (1 - p))[:, None]))
    ability = np.concatenate([[0.0], beta])
    se = np.concatenate([[0.0], np.sqrt(np.diag(cov))])
    z = stats.norm.ppf(1 - (1 - level) / 2)
    wins, losses, ties = np.zeros(k), np.zeros(k), np.zeros(k)
    np.add.at(wins, j, s == 1)
    np.add.at(wins, i, s == 0)
    np.add.at(losses, j, s == 0)
    np.add.at(losses, i, s == 1)
    np.add.at(ties, i, s == 0.5)
    np.add.at(ties, j, s == 0.5)
    table = pd.DataFrame({"system_index": np.arange(k), "ability": ability, "se": se, "ci_low": ability - z * se,
                          "ci_high": ability + z * se, "wins": wins.astype(int), "losses": losses.astype(int),
                          "ties": ties.astype(int)})
    return table


def analyze_judgments(
    judgments: str | Path | pd.DataFrame,
    worker: str | None = None,
    item: str | None = None,
    system_a: str = "system_a",
    system_b: str = "system_b",
    outcome: str = "outcome",
    where: dict[str, str] | None = None,
    baseline: str | None = None,
    systems: Sequence[str] | None = None,
    ties: str = "drop",
    tie_values: Sequence[str] = (),
    adjust: str = "holm",
    level: float = 0.95,
    progress: Callable[[str], None] | None = None,
) -> JudgmentAnalysis:
    """Win rates, a logistic GLMM per pair (lme4), adjusted over the pairs, and a Bradley-Terry ranking."""
    from scipy import stats

    from ..fitting.judgments import FORMULA, separation_reason, withheld_reason
    from ..fitting.lme4 import available, fit_glmm
    from ..multiplicity import SEPARATE, adjust_pvalues

    check_choice("ties policy", ties, TIE_POLICIES)
    check_choice("adjustment (head-to-head pairs are fitted separately: no joint tukey or dunnett)", adjust,
                 SEPARATE)
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise InputError(f"level must lie strictly between 0 and 1, got {level!r}")
    order, frames, name = read_pairwise(judgments, worker, item, system_a, system_b, outcome, baseline, systems,
                                        where, tie_values)
    ok, why = available()
    if not ok:
        raise InputError(f"the head-to-head analysis fits glmer in R, which is unavailable here: {why}")
    notes = []
    counted = {}
    for key, f in list(frames.items()):
        counted[key] = (int((f["score"] == 1).sum()), int((f["score"] == 0).sum()), int((f["score"] == 0.5).sum()))
        if ties == "drop":
            f = f[f["score"] != 0.5].reset_index(drop=True)
            if f.empty:
                raise InputError(f"every judgment of {order[key[0]]!r} against {order[key[1]]!r} is a tie: nothing "
                                 "left once ties are dropped (use --ties split)")
            frames[key] = f
    report = progress or (lambda message: None)
    rows, versions = [], {}
    for n, ((i, j), f) in enumerate(frames.items(), 1):
        report(f"glmer {n}/{len(frames)}: {order[j]} vs {order[i]} ({len(f)} judgments)")
        frame = pd.DataFrame({"worker": pd.factorize(f["worker"])[0] + 1, "item": pd.factorize(f["item"])[0] + 1,
                              "score": f["score"].to_numpy(float)})
        raw = fit_glmm(frame, FORMULA, "none")
        versions = dict(raw.versions)
        co = raw.coefficients.iloc[0]
        comps = raw.components.set_index("group")["sd"]
        wins, losses, n_ties = counted[(i, j)]
        rate = wins / (wins + losses) if ties == "drop" else (wins + n_ties / 2) / (wins + losses + n_ties)
        separation = separation_reason(raw)
        withheld = withheld_reason(len(f), rate, float(co.se), separation)
        if withheld:
            notes.append(f"{order[j]} vs {order[i]}: {withheld}; its log-odds, SE, test and interval are withheld "
                         "(missing), the win rate stands")
        notes += [f"{order[j]} vs {order[i]}: {w}" for w in raw.warnings]
        wald = dict(zip(WALD_COLUMNS, (float(co.estimate), float(co.se), float(co.estimate / co.se),
                                       float(co.p_value))))
        rows.append({"system": order[j], "versus": order[i], "n": len(f), "wins": wins, "losses": losses,
                     "ties": n_ties, "win_rate": rate,
                     **{k: np.nan if withheld else v for k, v in wald.items()},
                     "sd_worker": float(comps.get("worker", 0.0)), "sd_item": float(comps.get("item", 0.0)),
                     "singular": bool(raw.singular), "separation": separation is not None,
                     "withheld": withheld is not None, "withheld_reason": withheld or ""})
    pairs = pd.DataFrame(rows)
    m = len(pairs)
    # a withheld pair stays in the family at p = 1 (its p-value is unknown, at most 1: conservative for the rest)
    p_adj = np.where(pairs["withheld"], np.nan, adjust_pvalues(pairs["p_value"].fillna(1.0).to_numpy(), adjust))
    if pairs["withheld"].any() and adjust != "none":
        notes.append(f"the {adjust} adjustment counts the withheld pairs in its family of {m} at p = 1")
    pairs.insert(pairs.columns.get_loc("p_value") + 1, "p_adjusted", p_adj)
    crit = stats.norm.ppf(1 - (1 - level) / 2 / (1 if adjust == "none" else m))
    at = pairs.columns.get_loc("p_adjusted") + 1
    pairs.insert(at, "ci_low", pairs["log_odds"] - crit * pairs["se"])
    pairs.insert(at + 1, "ci_high", pairs["log_odds"] + crit * pairs["se"])
    pairs.insert(at + 2, "p_win", 1 / (1 + np.exp(-pairs["log_odds"])))

    ranking = pd.DataFrame()
    if len(order) > 2:
        bt = bradley_terry(frames, len(order), level)
        bt.insert(0, "system", [order[s] for s in bt.pop("system_index")])
        far = bt.loc[bt["ability"].abs() > MAX_ABILITY, "system"].tolist()
        if far:
            notes.append(f"Bradley-Terry: quasi-separated ({', '.join(far)} won or lost nearly everything: |ability| "
                         f"> {MAX_ABILITY:g}); their SEs and intervals are withheld (missing)")
            bt.loc[bt["ability"].abs() > MAX_ABILITY, ["se", "ci_low", "ci_high"]] = np.nan
        if ties == "drop":
            bt = bt.drop(columns="ties")
        ranking = bt.sort_values("ability", ascending=False, kind="stable").reset_index(drop=True)
        ranking.insert(0, "rank", np.arange(1, len(ranking) + 1))
    all_f = pd.concat(frames.values())
    n_all = sum(sum(c) for c in counted.values())
    n_ties = sum(c[2] for c in counted.values())
    notes.insert(0, f"{n_ties} of {n_all} judgments are ties, "
                 + ("dropped" if ties == "drop" else
                    "each split into half a win and half a loss (weighted likelihood)"))
    missing = [f"{order[b]} vs {order[a]}" for a, b in itertools.combinations(range(len(order)), 2)
               if (a, b) not in frames]
    if missing:
        notes.append(f"never compared (no pairwise test): {', '.join(missing)}")
    design = pd.DataFrame({"name": ["judgments", "systems", "pairs compared", "workers", "items"],
                           "value": [str(len(all_f)), str(len(order)), f"{m} of {len(order) * (len(order) - 1) // 2}",
                                     str(all_f["worker"].nunique()), str(all_f["item"].nunique())]})
    return JudgmentAnalysis(pairs, ranking, design, adjust, ties, level, name, tuple(notes), versions)


__all__ = ["JudgmentAnalysis", "analyze_judgments", "bradley_terry", "read_pairwise"]
