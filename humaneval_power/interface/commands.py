"""The public commands, each described once (see :mod:`humaneval_power.interface`).

Order is the help's order. ``SIGNATURE`` defaults are the function's; a ``grid`` option takes
several values or ranges on the command line and a list in the API.
"""
from __future__ import annotations

from collections.abc import Callable

from ..designs import BUDGET_ITEMS, BUDGET_RATINGS_PER_ITEM, BUDGET_WORKERS
from ..params import SD_NAMES
from . import SIGNATURE, Command, Group, Option, resolve
from .values import RANGE_HELP, dpi, finite_float, non_negative, positive, target_power

#: the coding-invariant SDs typed on the command line besides --sd-residual (processes.INVARIANT_SDS less it)
INVARIANT_TYPED = ("sd_worker", "sd_worker_system", "sd_item", "sd_item_system")


# ---- options several commands share -------------------------------------------------------------------------

def seed(what: str = "; one seed reproduces a whole run", source: str | None = None) -> Option:
    """--seed, with the API's default."""
    return Option("--seed", f"random seed{what}", non_negative, SIGNATURE, source=source)


ALPHA = Option("--alpha", "significance level of the test", finite_float, SIGNATURE)
JSON = Option("--json", "print one JSON array of records, nothing else", action="store_true", api=False)
OUT = Option("--out", "also write the table to FILE (.csv, .json or .parquet)", metavar="FILE", api=False)


def target(what: str = "") -> Option:
    """--target-power, a power in (0, 1)."""
    return Option("--target-power", f"power to reach{what}", target_power, SIGNATURE)


def run_options(sims: bool = True, jobs: bool = True, sims_default: object = SIGNATURE) -> tuple[Option, ...]:
    """--sims, --seed, --jobs, --scheduler and --json: the options every simulating command shares."""
    out: list[Option] = []
    if sims:
        out.append(Option("--sims", "simulated studies per design cell (Monte-Carlo repetitions)", positive,
                          sims_default, param="n_sims", metavar="N"))
    out.append(seed())
    if jobs:
        out += [Option("--jobs", "worker processes (default: all cores); results do not depend on it", positive,
                       metavar="N"),
                Option("--scheduler", "where chunks run: 'processes' (local, the default), 'dask' (a Dask "
                       "LocalCluster of --jobs workers) or a Dask scheduler address tcp://HOST:PORT; results do not "
                       "depend on it", metavar="WHERE", api=False)]
    return (*out, JSON)


def plot(what: str, type_m: bool = True) -> Group:
    """--plot FILE, --dpi and (when the plot does not always show it) --type-m."""
    options = [Option("--plot", f"also draw {what} to FILE (.png, .pdf or .svg)", metavar="FILE", api=False),
               Option("--dpi", "resolution of the plot, dots per inch (10-2400)", dpi, 120, api=False)]
    if type_m:
        options.append(Option("--type-m", "add a Type-M (exaggeration) panel under each power panel of the plot",
                              action="store_true", api=False))
    return Group("plot", tuple(options))


STORE = (Option("--store", "result store (SQLite): finished chunks are saved there and not run again; rerun the "
                "same command to resume; several runs may share one store", metavar="FILE"),
         Option("--checkpoint", "deprecated spelling of --store, removed in version 0.2.0", dest="store",
                param="store", metavar="FILE"),
         Option("--restart", "recompute this run's cells in the --store FILE", action="store_true", api=False))


def assurance(solve: bool) -> Group:
    """--assurance, --prior, --draws (and --target-assurance for a search); their help quotes the assurance
    module's constants when shown (that module imports scipy and pandas: not for every ``--help``)."""
    options = [
        Option("--assurance", "average power over parameter draws: those stored in --params (`hepower fit --draws N`: "
               "parametric bootstrap, or bambi's posterior) or --prior; reports conditional power, assurance and "
               "P(power >= target)", action="store_true", default=SIGNATURE),
        Option("--prior", lambda: f"with --assurance: draw these parameters from a prior instead "
               f"({resolve('PRIOR_HELP')}); the others stay at their point values", nargs="+", metavar="NAME=DIST:ARGS",
               api=False),
        Option("--draws", lambda: f"with --assurance: parameter draws used (default {resolve('DEFAULT_DRAWS')}; a "
               "file's draws are thinned to N, a prior sampled N times)", positive, metavar="N")]
    if solve:
        options.append(Option("--target-assurance", "with --assurance: the assurance to reach (default: "
                              "--target-power)", target_power, metavar="A"))
    return Group("assurance (power averaged over the uncertainty of the parameters; docs/assurance.md)",
                 tuple(options))


# ---- likert ---------------------------------------------------------------------------------------------------

EFFECT_HELP = ("difference in mean rating, system B - system A (the pair of interest), on the parameters' scale "
               "(0-1 for the presets; the rescaled scale of a fitted parameter file); ordinal parameters: the latent "
               "shift (see --effect-scale)")
EFFECT_SCALE = Option("--effect-scale", "ordinal parameters: the --effect is a latent shift (latent, default) or a "
                      "difference in expected mean rating (mean-rating), converted to the latent shift",
                      default=SIGNATURE, choices="EFFECT_SCALES")


def sizes(grid: bool) -> tuple[Option, ...]:
    """--workers, --items, --ratings-per-item, --items-per-hit: lists for a grid, single values otherwise."""
    return (
        Option("--workers", "workers in the pool (crossed: each rates every item under every system)"
               + (" (default: 3)" if grid else ""), positive, grid=grid),
        Option("--items", "items (each rated under every system)" + (" (default: 100, or the pilot's)" if grid else ""),
               positive, grid=grid),
        Option("--ratings-per-item", "distinct workers per item (within) or per output (between); default: all "
               "workers (fully crossed)", positive, grid=grid),
        Option("--items-per-hit", "items (within) or outputs (between) in a HIT, done by the same workers", positive,
               SIGNATURE, grid=grid))


DESIGN = Group("crowd design (default: fully crossed, two systems)", (
    Option("--design", "a JSON design file with any of items, workers, ratings_per_item, systems, assignment, "
           "presentation, items_per_hit, missing, workload (options given on the command line win)", metavar="FILE",
           api=False),
    Option("--systems", "systems compared (the pair of interest is the first and the last unless --pair; default: "
           "2, or the number of systems of a --params file fitted on several: a Gaussian one with shared SDs or an "
           "ordinal one, e.g. 4 for B, C, D vs the baseline; the headline says how many)", positive),
    Option("--assignment", "crossed (k = workers), balanced (even workloads; between outputs every worker rates "
           "every system as evenly as possible) or random (k of the pool drawn per item in every simulated study) "
           "(default: crossed when k = workers, else balanced)", choices=("crossed", "balanced", "random")),
    Option("--presentation", "within: an item's workers rate every system's output of it; between: each (item, "
           "system) output gets its own workers", default=SIGNATURE, choices=("within", "between"),
           source="cell_factory"),
    Option("--missing", "share of ratings lost at random (0-1)", finite_float, SIGNATURE, source="cell_factory"),
    Option("--workload-from", "skewed workloads: draw workers with the pilot's ratings per worker as weights (the "
           "pool is the pilot's workers; implies --assignment random)", metavar="RATINGS", api=False),
    Option("--design-from", "the design a pilot or finished study used (columns worker, item, system), scaled to "
           "--items (default: the pilot's)", metavar="RATINGS", source="crowd_design"),
    Option("--where", "with --design-from/--workload-from: keep only these rows (e.g. dimension=coherence)",
           action="append", metavar="COL=VALUE", source="crowd_design"),
    Option("--pilot-systems", "with --design-from: the systems to plan for, the first being A (default: all, "
           "sorted)", nargs="+", metavar="SYSTEM", source="crowd_design"),
    Option("--duplicates", "with --design-from: several ratings of one (worker, item, system) are refused "
           "(default), averaged (planned as one rating per cell, the pilot's true k) or kept (planned as independent "
           "ratings), as in `fit` and `analyze`", default=SIGNATURE, choices=("error", "average", "keep"),
           source="crowd_design"),
))


def _sd_option(name: str) -> Option:
    what = name.removeprefix("sd_").replace("_", " ")
    extra = " (SD of the B - A difference: the mean-difference convention)" if "slope" in name else ""
    return Option("--" + name.replace("_", "-"), f"SD of the {what} on the rating scale{extra}", finite_float,
                  metavar="SD", api=False)


def _invariant_option(name: str) -> Option:
    what = name.removeprefix("sd_").replace("_", ":")
    return Option("--" + name.replace("_", "-"), f"coding-invariant model: SD of the {what} effects (with "
                  "--sd-residual; any number of systems)", finite_float, metavar="SD", api=False)


PARAMS = Group("parameters (default: --preset card2020-high)", (
    Option("--preset", "built-in parameter set (Card et al. 2020, Table 16; ordinal: fitted CLMMs of DialSummEval, "
           "docs/ordinal.md)", choices="LIKERT_PRESETS", api=False),
    Option("--params", "parameter file (JSON, from `hepower fit` or hand-written)", metavar="FILE", api=False),
    Option("--comparison", "which comparison of a parameter file with several (the pair the headline names; "
           "a system the file lacks is refused)", metavar="SYSTEM", api=False),
    Option("--intercept", "beta0, the mean rating (default 0.5 with typed SDs)", finite_float, api=False),
    *(_sd_option(n) for n in SD_NAMES), *(_invariant_option(n) for n in INVARIANT_TYPED),
    Option("--family", "gaussian (ratings on an interval scale) or ordinal (ratings 1..K from a cumulative-link "
           "model: thresholds from an ordinal --preset or --thresholds, the latent SDs --sd-worker, "
           "--sd-worker-system, --sd-item, --sd-item-system; default: the parameters')",
           choices=("gaussian", "ordinal"), api=False),
    Option("--thresholds", "--family ordinal: the K - 1 increasing thresholds of the latent scale (ratings "
           "1..K)", finite_float, nargs="+", metavar="THETA", api=False),
    Option("--link", "--family ordinal: logit (default) or probit", choices=("logit", "probit"), api=False)))

ANALYSIS = Group("analysis", (
    Option("--method", "fast (exact simulation; batched fits for crowd designs), analytic (instant; crossed only), "
           "lme4 (refits in R) or statsmodels (crossed only); the ordinal model: fast (batched Laplace CLMM, no R) "
           "or clmm (ordinal::clmm refits in R)", default=SIGNATURE, choices="LIKERT_METHODS"),
    Option("--test", "satterthwaite (REML t, lmerTest df; ordinal: the default ordinal test, t), card2020 "
           "(ML, t > 1.96), z (Wald z); ordinal only: bartlett (likelihood ratio, Bartlett-corrected by a parametric "
           "bootstrap), lrt (likelihood ratio, chi-square) or t (Wald t, the latent working model's Satterthwaite df)",
           default=SIGNATURE, choices="LIKERT_TESTS"),
    Option("--model", "analysis model (default: ordinal with ordinal parameters, slopes for two systems with "
           "slope parameters, else invariant); ordinal parameters: ordinal (CLMM), invariant (the linear model of "
           "the ratings, what most papers fit) or both (both on the same simulated studies: power, with their Type-I "
           "error; size, mde and budget: each analysis's answer side by side)", choices="LIKERT_MODELS"),
    Option("--compare", "contrasts tested: the pair of interest, every system vs the first, or all pairs",
           default=SIGNATURE, choices=("pair", "baseline", "pairs"), source="cell_factory"),
    Option("--adjust", "multiplicity adjustment over the compared contrasts", default=SIGNATURE,
           choices="PLANNER_ADJUSTMENTS", source="cell_factory"),
    Option("--pair", "the pair of interest, systems numbered from 1 (default: 1 and the last)", positive, nargs=2,
           metavar=("A", "B")),
    Option("--means", "mean rating of every system (instead of --effect spread evenly between the pair)",
           finite_float, nargs="+", metavar="MEAN"),
    ALPHA))

COSTS = Group("costs (currency units; adds a cost column)", (
    Option("--cost-per-rating", "paid per rating", finite_float, SIGNATURE, param="per_rating", source="Costs"),
    Option("--cost-per-hit", "paid per HIT assignment (one worker, one HIT)", finite_float, SIGNATURE,
           param="per_hit", source="Costs"),
    Option("--platform-fee", "platform fee as a fraction of the payments", finite_float, SIGNATURE, param="fee",
           source="Costs"),
    Option("--cost-per-worker", "recruitment or qualification cost per worker used", finite_float, SIGNATURE,
           param="per_worker", source="Costs")))


def likert_common() -> tuple[Option | Group, ...]:
    """The design, parameter, analysis, cost and run options of every ``likert`` command."""
    return (DESIGN, PARAMS, ANALYSIS, COSTS, *run_options())


LIKERT = (
    Command(("likert", "power"), "likert_power",
            "power over workers x items (x ratings per item x items per HIT) x effect",
            (*sizes(grid=True), Option("--effect", EFFECT_HELP, finite_float, grid=True, required=True), EFFECT_SCALE,
             *likert_common(), target(" (for the summary of smallest designs)"), OUT,
             plot("power curves like Card et al. Fig. 6 (a panel per workers)"), *STORE, assurance(solve=False)),
            description=f"Power, Type-S and Type-M over the design grid. Grid options take {RANGE_HELP}.",
            design="cell_factory"),
    Command(("likert", "size"), "likert_sample_size",
            "smallest number of items (or workers, or ratings per item) reaching a target power",
            (*sizes(grid=False), Option("--effect", EFFECT_HELP, finite_float, required=True), EFFECT_SCALE, target(),
             Option("--vary", "which design size to solve for (the others are held fixed)", default=SIGNATURE,
                    choices=("items", "workers", "ratings_per_item")),
             *likert_common(), assurance(solve=True)), design="cell_factory"),
    Command(("likert", "mde"), "likert_mde", "minimum detectable effect of a design (the sensitivity of a study)",
            (*sizes(grid=False), target(), *likert_common()), design="cell_factory"),
    Command(("likert", "budget"), "likert_budget",
            "cheapest design reaching a target power (items x workers x k x h)",
            (Option("--items", f"items to consider (default: {' '.join(map(str, BUDGET_ITEMS))})", positive,
                    grid=True),
             Option("--workers", "sizes of the worker pool to consider (default: "
                    f"{' '.join(map(str, BUDGET_WORKERS))})", positive, grid=True),
             Option("--ratings-per-item", "distinct workers per item (within) or per output (between) to consider "
                    f"(default: {' '.join(map(str, BUDGET_RATINGS_PER_ITEM))}; never more than the pool)", positive,
                    grid=True),
             Option("--items-per-hit", "items (within) or outputs (between) per HIT to consider", positive, SIGNATURE,
                    grid=True),
             Option("--effect", EFFECT_HELP, finite_float, required=True), EFFECT_SCALE,
             Option("--budget", "largest total cost to consider (currency units)", finite_float),
             target(), *likert_common(),
             Option("--out", "also write the evaluated designs to FILE (.csv, .json, .parquet)", metavar="FILE",
                    api=False),
             plot("the cost-power frontier of the evaluated designs", type_m=False), assurance(solve=True)),
            description="Searches items x workers x ratings per item x items per HIT, cheapest design first (of "
                        "designs differing only in the pool and costing the same, the largest pool: never less "
                        "powerful), for the first that reaches the target power, within --budget when given. "
                        "Without --items/--workers/--ratings-per-item the search space is items "
                        f"{', '.join(map(str, BUDGET_ITEMS))} x pools of {', '.join(map(str, BUDGET_WORKERS))} "
                        f"workers x k = {', '.join(map(str, BUDGET_RATINGS_PER_ITEM))}. {RANGE_HELP}.",
            design="cell_factory", progress="designs"),
)


# ---- h2h ------------------------------------------------------------------------------------------------------

P_WIN_HELP = ("independent judgments: probability that a judgment prefers B, counting ties in the denominator: "
              "p_win + p_tie + p_lose = 1 (the effect is p_win - p_lose); unlike a GLMM design's --effect and p_win "
              "column, which are conditional on a decisive judgment")
P_TIE_HELP = "probability of a tie (a GLMM design with --params: the parameter file's, from the pilot)"
TIES_HELP = ("ties: drop them, or split each as half a win for each side (a GLMM design with --params: as the "
             "pilot was fitted)")


def h2h_mixed(grid: bool, sims: Callable[[], str]) -> tuple[Option | Group, ...]:
    """The repeated-judgments (logistic GLMM) options of ``h2h power`` (``grid``) and ``h2h size``."""
    options: list[Option | Group] = [
        Option("--params", "head-to-head parameter file (`hepower fit --family binomial`)", metavar="FILE", api=False),
        Option("--comparison", "which comparison of a parameter file with several (the pair the headline names; "
           "a system the file lacks is refused)", metavar="SYSTEM", api=False),
        Option("--force", "plan with a parameter file whose fit was quasi-separated (refused by default)",
               action="store_true", api=False),
        Option("--sd-worker", "SD of the workers' preference, on the log-odds scale", finite_float, api=False),
        Option("--sd-item", "SD of the items' preference, on the log-odds scale", finite_float, api=False),
        Option("--workers", "workers in the pool", positive, grid=grid)]
    if grid:
        options.append(Option("--items", "items judged", positive, grid=True))
    options += [
        Option("--judgments-per-item", "workers judging each item (default: all)", positive, grid=grid,
               param="per_item"),
        Option("--effect", "P(B preferred) in a decisive (non-tied) judgment for a typical worker and item (a "
               "probability, the table's p_win column; shown as log-odds); not the unconditional --p-win of "
               "independent judgments", finite_float, grid=grid, api=False),
        Option("--log-odds", "the effect as log-odds instead of --effect", finite_float, grid=grid)]
    if grid:
        options += STORE
    options.append(Option("--test", "Wald z test, likelihood-ratio test, or z against t with Satterthwaite df at "
                          "most workers - 1 (holds alpha where z is liberal: few, varying workers; --method fast)",
                          default=SIGNATURE, choices=("z", "lrt", "t"), source="h2h_mixed_power"))
    return (Group("repeated judgments (logistic GLMM)", tuple(options)), ALPHA,
            Option("--sims", lambda: f"simulated studies per cell ({sims()})", positive, param="n_sims", metavar="N"),
            *run_options(sims=False))


def h2h_sims(action: str, mode: str) -> int:
    """The default simulated studies of ``h2h power|size`` in a mode ("independent" or "glmm"): the API's."""
    from . import api_defaults

    n_sims: int = api_defaults(H2H_FUNCTIONS[action, mode])["n_sims"]
    return n_sims


#: (command, mode) -> the function ``h2h power|size`` calls: independent judgments or a GLMM design
H2H_FUNCTIONS = {("power", "independent"): "h2h_power", ("power", "glmm"): "h2h_mixed_power",
                 ("size", "independent"): "h2h_sample_size", ("size", "glmm"): "h2h_mixed_sample_size"}

H2H = (
    Command(("h2h", "power"), "h2h_power", "power of independent judgments (--n) or of a GLMM design (--params)",
            (Option("--n", "independent judgments (a count)", positive, grid=True),
             Option("--p-win", P_WIN_HELP, finite_float, grid=True),
             Option("--p-tie", P_TIE_HELP, finite_float, grid=True),
             Option("--ties", TIES_HELP, choices="TIE_POLICIES"),
             Option("--method", "exact or simulate (independent judgments; default exact); fast (GLMM, the default "
                    "there: glmer's Laplace fit without R) or lme4 (glmer refits in R)",
                    choices=("exact", "simulate", "fast", "lme4")),
             *h2h_mixed(grid=True, sims=lambda: f"default {h2h_sims('power', 'independent')} independent (--method simulate), "
                                                f"{h2h_sims('power', 'glmm')} GLMM"),
             OUT, plot("power curves (against n, or against items for a GLMM design; a line per effect)"),
             target(" (with --assurance: the share of draws whose power reaches it)"), assurance(solve=False)),
            description=f"Power, Type-S and Type-M. Grid options take {RANGE_HELP}.", modes=("h2h_mixed_power",)),
    Command(("h2h", "size"), "h2h_sample_size",
            "smallest n (independent) or number of items (GLMM) for a target power",
            (Option("--p-win", P_WIN_HELP, finite_float), Option("--p-tie", P_TIE_HELP, finite_float),
             Option("--ties", TIES_HELP, choices="TIE_POLICIES"), target(),
             *h2h_mixed(grid=False, sims=lambda: f"GLMM; default {h2h_sims('size', 'glmm')}"),
             Option("--method", "GLMM refits: fast (glmer's Laplace fit without R, the default) or lme4 (glmer in R)",
                    default=SIGNATURE, choices=("fast", "lme4"), source="h2h_mixed_sample_size"),
             assurance(solve=True)), modes=("h2h_mixed_sample_size",)),
    Command(("h2h", "mde"), "h2h_mde", "smallest p_win detectable with n independent judgments",
            (Option("--n", "independent judgments (a count)", positive, required=True),
             Option("--p-tie", "probability of a tie", finite_float, SIGNATURE),
             Option("--ties", TIES_HELP, default=SIGNATURE, choices="TIE_POLICIES"),
             target(), ALPHA, seed(source="h2h_sample_size"), JSON)),
)


# ---- accuracy -------------------------------------------------------------------------------------------------

DELTA_HELP = "accuracy difference B - A, as a proportion (0.02, not 2)"
ACCURACY_METHOD_HELP = "McNemar test: exact (conditional), midp, unconditional (Suissa-Shuster), normal"
AGREEMENT_HELP = "share of items where both models are right or both wrong"


def EXACT_METHODS() -> tuple[str, ...]:
    """McNemar's methods that need no simulation."""
    return tuple(m for m in resolve("ACCURACY_METHODS") if m != "simulate")

SOLVE_HELP = "; leave out the one of --n, --p2, --power to solve for"

ACCURACY = (
    Command(("accuracy", "power"), "mcnemar_power", "McNemar power over n x delta x agreement",
            (Option("--n", "test-set size", positive, grid=True, required=True),
             Option("--delta", DELTA_HELP, finite_float, grid=True),
             Option("--agreement", AGREEMENT_HELP, finite_float, grid=True),
             Option("--table", "2x2 table of probabilities instead of --delta/--agreement", finite_float, nargs=4,
                    metavar=("BOTH_RIGHT", "A_ONLY", "B_ONLY", "BOTH_WRONG"), api=False),
             Option("--method", ACCURACY_METHOD_HELP + ", or simulate", default=SIGNATURE, choices="ACCURACY_METHODS"),
             Option("--sims", "simulated test sets per cell (--method simulate)", positive, SIGNATURE, param="n_sims",
                    metavar="N"),
             seed(" (--method simulate)"), OUT,
             plot("power, Type-M and Type-S against delta (Card et al. Figs. 3, 7, 8)", type_m=False), ALPHA, JSON),
            description=f"Power, Type-S and Type-M. Grid options take {RANGE_HELP}."),
    Command(("accuracy", "size"), "mcnemar_sample_size", "test-set size for a target power",
            (Option("--delta", DELTA_HELP, finite_float, required=True),
             Option("--agreement", AGREEMENT_HELP, finite_float, required=True), target(),
             Option("--method", ACCURACY_METHOD_HELP, default=SIGNATURE, choices=EXACT_METHODS), ALPHA, JSON)),
    Command(("accuracy", "mde"), "accuracy_mde", "minimum detectable accuracy gain under a historical prior (or none)",
            (Option("--n", "test-set size", positive, required=True),
             Option("--baseline", "state-of-the-art accuracy (proportion)", finite_float, required=True),
             Option("--prior", "overlap regression (Card et al. Tables 5-6) or Lachenbruch's no-prior bounds",
                    default=SIGNATURE, choices=("glue", "squad2", "lachenbruch")),
             target(), Option("--method", ACCURACY_METHOD_HELP, default=SIGNATURE, choices=EXACT_METHODS), ALPHA,
             JSON)),
    Command(("accuracy", "estimate"), "estimate_accuracy", "delta and agreement of two models from per-item correctness",
            (Option("predictions", "CSV/Parquet: item, model, correct (0/1)", metavar="PREDICTIONS", param="source"),
             Option("--model-a", "name of model A in the model column", required=True),
             Option("--model-b", "name of model B in the model column", required=True),
             *(Option(f"--{col}-column", f"column holding the {col}", default=SIGNATURE, param=col, metavar="COL")
               for col in ("item", "model", "correct")), JSON)),
    Command(("accuracy", "table"), "mde_table", "Card et al. Table 2 / Table 9: MDE per benchmark task",
            (Option("--prior", "overlap regression of the prior", default=SIGNATURE, choices=("glue", "squad2")),
             Option("--method", "one or more methods, one MDE column each: " + ACCURACY_METHOD_HELP, default=SIGNATURE,
                    choices=EXACT_METHODS, nargs="+", param="methods"),
             target(), ALPHA, JSON)),
    Command(("accuracy", "unpaired"), "solve_prop_test",
            "two independent proportions (power.prop.test): solve for the missing one",
            (Option("--n", "items per model (a count)" + SOLVE_HELP, finite_float),
             Option("--p1", "baseline accuracy (a proportion)", finite_float, required=True),
             Option("--p2", "new model's accuracy (a proportion)" + SOLVE_HELP, finite_float),
             Option("--power", "power to reach (0-1)" + SOLVE_HELP, finite_float), ALPHA, JSON)),
)


# ---- bleu -----------------------------------------------------------------------------------------------------

BLEU_METHOD_HELP = "p-values by randomization (Monte Carlo permutations) or the saddlepoint / normal approximation"
P0_HELP = "share of sentences whose swap changes nothing (Card et al. P0)"
B0_HELP = "Laplace scale of the swap effects times n (Card et al. b0, BLEU points)"
BLEU_DELTA_HELP = "expected difference B - A in BLEU points"
REF_HELP = ("reference, one segment per line; give several (--ref A B, or --ref repeated) for "
            "multi-reference BLEU/chrF (sacrebleu's statistics)")
PERMUTATIONS = Option("--permutations", "randomization trials per simulated study (--method randomization)", positive,
                      SIGNATURE, metavar="N")
REF = Option("--ref", REF_HELP, required=True, action="extend", nargs="+", metavar="FILE", param="references")
METRIC = Option("--metric", "corpus metric", default=SIGNATURE, choices="METRICS")


def bleu_search(first: Option) -> tuple[Option | Group, ...]:
    """The options of ``bleu mde`` and ``bleu size`` (``first``: --n or --delta)."""
    return (first, Option("--p0", P0_HELP, finite_float, required=True),
            Option("--b0", B0_HELP, finite_float, required=True), target(),
            Option("--method", BLEU_METHOD_HELP, default=SIGNATURE, choices="BLEU_METHODS"), PERMUTATIONS, ALPHA,
            *run_options())


BLEU = (
    Command(("bleu", "power"), "bleu_power", "power, Type-S, Type-M over n x delta x p0 x b0",
            (Option("--n", "test-set sentences", positive, grid=True, required=True),
             Option("--delta", BLEU_DELTA_HELP, finite_float, grid=True, required=True),
             Option("--p0", P0_HELP, finite_float, grid=True, required=True),
             Option("--b0", B0_HELP, finite_float, grid=True, required=True),
             Option("--method", BLEU_METHOD_HELP, default=SIGNATURE, choices="BLEU_METHODS"),
             *STORE, OUT, plot("power curves against n or delta, whichever has more values (the other: a line each)"),
             PERMUTATIONS, ALPHA, *run_options()),
            description=f"Randomization-test power. Grid options take {RANGE_HELP}."),
    Command(("bleu", "mde"), "bleu_mde", "smallest BLEU difference reaching the target power",
            bleu_search(Option("--n", "test-set sentences", positive, required=True))),
    Command(("bleu", "size"), "bleu_sample_size", "test-set size reaching the target power",
            bleu_search(Option("--delta", BLEU_DELTA_HELP, finite_float, required=True))),
    Command(("bleu", "estimate"), "bleu_estimate",
            "swap effects of two systems' outputs -> P0, b0 (with intervals)",
            (REF, Option("--sys-a", "system A's output, one segment per line", required=True, metavar="FILE"),
             Option("--sys-b", "system B's output, one segment per line", required=True, metavar="FILE"),
             Option("--n-boot", "bootstrap resamples for the intervals", positive, SIGNATURE, metavar="N"),
             METRIC, seed(""), JSON)),
    Command(("bleu", "test"), "bleu_test", "paired tests of systems against a baseline",
            (REF, Option("--baseline", "the baseline system's output", required=True, metavar="FILE"),
             Option("--systems", "outputs compared with the baseline", required=True, nargs="+", metavar="FILE"),
             Group("", (Option("--paired-ar", "approximate randomization (the default test)", action="store_true",
                               api=False),
                        Option("--paired-bs", "paired bootstrap", action="store_true")), exclusive=True),
             Option("--trials", "AR trials (default 10,000) or bootstrap resamples (default 1,000)", positive,
                    metavar="N"),
             Option("--adjust", "p_adjusted over the systems compared (fdr: Benjamini-Hochberg)", default=SIGNATURE,
                    choices="SEPARATE_ADJUSTMENTS"),
             Option("--bs-rule", "bootstrap p-value: sacrebleu's or Berg-Kirkpatrick et al.'s (delta > 2x observed)",
                    default=SIGNATURE, choices="BOOTSTRAP_RULES", param="rule"),
             METRIC, seed(""), JSON), progress="trials"),
)

# ---- f1 -------------------------------------------------------------------------------------------------------

TABLE_METAVAR = ("BOTH_NEG", "M1_ONLY", "M2_ONLY", "BOTH_POS")
P_POSITIVE_HELP = "share of positive items (the positive class's prevalence), in (0, 1)"


def f1_tables() -> tuple[Option, ...]:
    """--table-positive and --table-negative: the joint predictions of M1 and M2 per true class (Table 11)."""
    return tuple(Option(f"--table-{label}", f"{label} items: probabilities that both models predict negative, only M1 "
                        "positive, only M2 positive, both positive; they sum to 1 (Card et al. App. F, Table 11)",
                        finite_float, nargs=4, metavar=TABLE_METAVAR, required=True)
                 for label in ("positive", "negative"))


F1_PERMUTATIONS = Option("--permutations", "randomization trials per simulated test set", positive, SIGNATURE,
                         metavar="N")


def f1_search(*more: Option) -> tuple[Option | Group, ...]:
    """The options of ``f1 size`` and ``f1 mde`` (``more``: theirs, after the target power)."""
    return (Option("--p-positive", P_POSITIVE_HELP, finite_float, required=True), *f1_tables(), target(), *more,
            F1_PERMUTATIONS, ALPHA, OUT, *run_options())


F1 = (
    Command(("f1", "power"), "f1_power", "randomization-test power of the F1 difference over n x p_positive",
            (Option("--n", "test-set size (items)", positive, grid=True, required=True),
             Option("--p-positive", P_POSITIVE_HELP, finite_float, grid=True, required=True), *f1_tables(),
             F1_PERMUTATIONS, ALPHA, *STORE, OUT,
             plot("power curves against n (a line per share of positive items)"), *run_options()),
            description="Power, Type-S and Type-M of the paired randomization test of F1 (Card et al. App. F): "
                        "per true class, the joint predictions of the two models (M1, M2); the effect is "
                        f"F1(M2) - F1(M1) of the positive class. Grid options take {RANGE_HELP}."),
    Command(("f1", "size"), "f1_size", "test-set size reaching the target power for the tables' F1 difference",
            f1_search(Option("--max-n", "largest test set searched", positive, SIGNATURE, metavar="N")),
            module="humaneval_power.scenarios.f1", columns=()),
    Command(("f1", "mde"), "f1_mde", "smallest F1 difference reaching the target power, in the tables' direction",
            (Option("--n", "test-set size (items)", positive, required=True), *f1_search()),
            module="humaneval_power.scenarios.f1", columns=(),
            description="Smallest F1(M2) - F1(M1) reaching the target power: each class keeps its agreement (the "
                        "both-negative and both-positive cells) and the tables' direction, while the imbalance of "
                        "its only-M1 and only-M2 cells grows (the record's scale: the answer as a multiple of the "
                        "tables' imbalance)."),
)


# ---- analyze (a completed study) -----------------------------------------------------------------------------

def ratings_input(what: str = "rating", source: str | None = None) -> tuple[Option, ...]:
    """The input of ``fit`` and ``analyze``: the ratings file, its columns, row filters, systems, scale and
    duplicate policy (the keywords of ``fitting.ratings.read_ratings``; ``source``: the function taking them
    when not the command's own, which then names the file ``source``)."""
    return (
        Option("data", f"tidy CSV or Parquet, one row per {what}", metavar="RATINGS",
               param="source" if source else "ratings", source=source),
        *(Option(f"--{role}", f"{role} column (default: found by name)", metavar="COL", source=source)
          for role in ("worker", "item", "system", "score")),
        Option("--where", "keep rows where COL equals VALUE (repeatable)", action="append", metavar="COL=VALUE",
               source=source),
        Option("--systems", "keep only these systems (default: all)", nargs="+", metavar="SYSTEM", source=source),
        Option("--scale", "rating scale (a score outside it is refused): gaussian ratings are rescaled to [0, 1] "
               "(default: no rescaling); ordinal ratings are never rescaled: MIN MAX are the lowest and highest "
               "categories, integers (default: the observed range; a category never used is refused)", finite_float,
               nargs=2, metavar=("MIN", "MAX"), source=source),
        Option("--duplicates", "several ratings of one (worker, item, system): error (default); average them into "
               "one rating; keep each as its own rating (the model then treats repeats as independent errors: no "
               "worker x item x system effect, so agreeing repeats make the SEs too small)", default=SIGNATURE,
               choices=("error", "average", "keep"), source="read_ratings"))


def judgment_columns(source: str) -> tuple[Option, ...]:
    """The columns of head-to-head judgments (``--family binomial``), keywords of ``source``."""
    return (
        Option("--system-a", "binomial: first system's column", default=SIGNATURE, metavar="COL", source=source),
        Option("--system-b", "binomial: second system's column", default=SIGNATURE, metavar="COL", source=source),
        Option("--outcome", "binomial: a, b or tie (or the winner)", default=SIGNATURE, metavar="COL",
               source=source))


#: the options of the head-to-head judgments of ``analyze --family binomial``
JUDGMENT_COLUMNS = judgment_columns("analyze_judgments")

ANALYZE = Command(
    ("analyze",), "analyze", "analyse a completed study: F test, marginal means, adjusted contrasts (mixed model)", (
        *ratings_input(),
        Option("--baseline", "system listed first and compared with (default: first, sorted)", metavar="SYSTEM"),
        Option("--random", "random effects: invariant (1|worker) + (1|worker:system) + (1|item) + (1|item:system); "
               "maximal (system|worker) + (system|item) with correlations, stepping down to no correlations, then "
               "invariant, on a failed, non-converged or singular fit (logged; lme4 only); slopes: Card et al.'s "
               "(1 + contrasts || worker) + (1 + contrasts || item)", default=SIGNATURE, choices="ANALYZE_RANDOM"),
        Option("--keep-singular", "with --random maximal: keep the maximal fit when it is singular (lme4's own "
               "behaviour, R's (system | worker) numbers; a variance at zero or a correlation at +-1 is then treated "
               "as absent by the tests) instead of stepping down; a fit that did not converge still steps down",
               action="store_true"),
        Option("--df", "denominator df of the F test and the contrasts (kenward-roger: pbkrtest's method, dense in "
               "the ratings: refused above 3,000 ratings with lme4, 4,000 without R, with the estimated memory and "
               "time); --family ordinal: satterthwaite (the latent working model's df per contrast, the planner's t "
               "test; default) or asymptotic (z, emmeans' df = Inf for clmm)", default=SIGNATURE,
               choices="ANALYZE_DF"),
        Option("--by", "analyse each value of COLUMN (e.g. dimension) separately; each adjustment covers the "
               "contrasts within one group", metavar="COLUMN"),
        Option("--contrasts", "all pairs of systems, or each system against the baseline", default=SIGNATURE,
               choices="ANALYZE_CONTRASTS"),
        Option("--adjust", "multiplicity adjustment over the family of contrasts (default holm; fdr: "
               "Benjamini-Hochberg; tukey: pairs only; dunnett: multivariate t, emmeans' mvt; not with --backend "
               "bambi)", default=SIGNATURE, choices="ADJUSTMENTS"),
        Option("--backend", "lme4 (R, lmerTest; the default), statsmodels (no R, the same REML fit and Satterthwaite "
               "df) or bambi (Bayesian: posterior mean, SD, HDI and P(system > versus) of each contrast); --family "
               "ordinal: clmm (R ordinal::clmm; its default), laplace (no R, the same Laplace likelihood) or bambi (the "
               "posterior of bambi's cumulative family: mean, SD, HDI and P(better) of each latent contrast)",
               default=SIGNATURE, choices="ANALYZE_BACKENDS"),
        Option("--draws", "bambi: posterior draws per chain (default 1000; refused with another backend)", positive,
               SIGNATURE, metavar="N"),
        Option("--chains", "bambi: chains (default 2; refused with another backend)", positive, SIGNATURE,
               metavar="N"),
        Option("--level", "confidence level of the intervals", finite_float, SIGNATURE),
        seed(" (Monte Carlo of --adjust dunnett; bambi's sampler)"),
        Option("--out", "also write the contrasts to FILE (.csv, .json or .parquet)", metavar="FILE", api=False),
        Option("--report", "also write a report for the paper: Markdown (.md) or self-contained HTML (.html)",
               metavar="FILE", api=False),
        Option("--plot", "write the means + forest plot figure (.png, .pdf or .svg)", metavar="FILE", api=False),
        Option("--sims", "--report of --family gaussian: studies simulated on this design for its Type-I error and "
               "sensitivity (default 100; 0: skip)", non_negative, metavar="N", api=False),
        Option("--latex", "also write booktabs LaTeX tables (means with intervals, letters and ranks; contrasts; "
               "variance components; agreement; reliability) and the methods paragraph to FILE (.tex)",
               metavar="FILE", api=False),
        Option("--latex-digits", "--latex: decimals of the LaTeX tables' numbers (0-10; default 3)", non_negative,
               metavar="N", api=False),
        Option("--agreement-metric", "Krippendorff's alpha of the ratings in the summary, report and LaTeX: "
               "interval or ordinal", default=SIGNATURE, choices=("interval", "ordinal")),
        Option("--reliability-target", "reliability whose ratings per item the reliability section reports",
               finite_float, SIGNATURE),
        Option("--paper-records", "with --json/--out: also the agreement, reliability and per-system (letters, "
               "cluster, rank, P(best)) records, each with a `record` kind (default: the contrast records only)",
               action="store_true", api=False),
        Option("--family", "gaussian (ratings as interval data), ordinal (integer ratings as ordered categories: a "
               "cumulative-link mixed model, likelihood-ratio and Wald tests, latent and mean-rating marginal means, "
               "category probabilities; --scale LOWEST HIGHEST names the categories) or binomial (head-to-head "
               "judgments: a logistic GLMM per pair and a Bradley-Terry ranking)", default="gaussian",
               choices=("gaussian", "ordinal", "binomial")),
        Option("--link", "ordinal: the cumulative link (default logit)", default=SIGNATURE, choices="ORDINAL_LINKS"),
        Option("--bootstrap", "ordinal: parametric-bootstrap draws of the Bartlett-corrected likelihood-ratio test "
               "of all systems equal (default 200, seeded by --seed; 0: plain LR and Wald only)", non_negative,
               SIGNATURE, metavar="B"),
        *JUDGMENT_COLUMNS,
        Option("--ties", "binomial: drop ties, or split each as half a win for each side", default=SIGNATURE,
               choices="TIE_POLICIES", source="analyze_judgments"),
        Option("--tie-values", "binomial: further outcome answers that mean a tie (always: tie, draw, equal, 0)",
               default=SIGNATURE, nargs="+", metavar="ANSWER", source="analyze_judgments"),
        JSON), progress="stages")

AGREEMENT = Command(
    ("agreement",), "agreement", "rater agreement: Krippendorff's alpha per dimension and system, ICCs and the "
    "ratings per item needed for a target reliability", (
        Option("data", "tidy CSV or Parquet, one row per rating", metavar="RATINGS", param="ratings"),
        *(Option(f"--{role}", f"{role} column", default=SIGNATURE, metavar="COL")
          for role in ("worker", "item", "system", "score")),
        Option("--by", "group columns, alpha and ICCs per group (a column absent from the data is skipped with a "
               "note)", default=SIGNATURE, nargs="+", metavar="COL"),
        Option("--where", "keep rows where COL equals VALUE (repeatable)", action="append", metavar="COL=VALUE"),
        Option("--metric", "Krippendorff's alpha's metric", default=SIGNATURE, choices="ALPHA_METRICS"),
        Option("--levels", "the declared scale (ordinal alpha: a score outside it is an error)", finite_float,
               nargs="+", metavar="V"),
        Option("--boot", "bootstrap resamples of units for alpha's interval (0: none)", non_negative, SIGNATURE,
               param="n_boot", metavar="N"),
        Option("--level", "confidence level of the intervals", finite_float, SIGNATURE),
        seed(" (the bootstrap)"),
        Option("--target", "reliability whose ratings per item are reported", finite_float, SIGNATURE),
        Option("--out", "also write the records to FILE (.csv, .json or .parquet)", metavar="FILE", api=False),
        JSON))

# ---- fit (a pilot), store show, serve ------------------------------------------------------------------------

FIT = Command(
    ("fit",), "fit_pilot_file", "fit pilot data (ratings or head-to-head judgments) and export parameters", (
        *ratings_input("rating or judgment", source="read_ratings"), *judgment_columns("read_judgments"),
        Option("--baseline", "system the others are compared with (default: first)", metavar="SYSTEM",
               source="read_ratings"),
        Option("--family", "gaussian (ratings, LMM), binomial (judgments, logistic GLMM) or ordinal (integer ratings, "
               "cumulative-link mixed model; --scale LOWEST HIGHEST names the categories)", default=SIGNATURE,
               choices="FIT_FAMILIES"),
        Option("--link", "ordinal: the cumulative link (default logit)", choices="ORDINAL_LINKS", source="fit_ordinal"),
        Option("--backend", "lme4 (R, Satterthwaite t; the default), statsmodels (no R, same tests and Wald "
               "intervals, Gaussian only), bambi (Bayesian, posterior intervals); ordinal: clmm (R ordinal::clmm, "
               "the default), laplace (no R, the same Laplace likelihood) or bambi (cumulative family)",
               choices=lambda: tuple(resolve("FIT_BACKENDS"))),
        Option("--ties", "binomial: drop ties, or split each as half a win for each side", default=SIGNATURE,
               choices="TIE_POLICIES", source="read_judgments"),
        Option("--tie-values", "binomial: further outcome answers that mean a tie, e.g. both neither (always ties: "
               "tie, draw, equal, 0)", default=SIGNATURE, nargs="+", metavar="ANSWER", source="read_judgments"),
        Option("--correlated", "correlated random intercepts and slopes", action="store_true"),
        Option("--simplify", "drop zero variance components step by step", action="store_true"),
        Option("--intervals", "intervals for the SDs (default: wald for lme4 and statsmodels, posterior for bambi)",
               choices=lambda: resolve("fit_interval_methods")()),
        Option("--n-boot", "bootstrap refits for --intervals boot", positive, SIGNATURE, metavar="N"),
        Option("--draws", "parameter draws stored in the file for planning with --assurance: bambi's posterior draws "
               "per chain (default 1000); lme4/statsmodels: N parametric-bootstrap refits (default none)", positive,
               metavar="N"),
        Option("--chains", "bambi: chains", positive, SIGNATURE, metavar="N"),
        seed(" (bootstrap, bambi)"),
        Option("--out", "parameter file to write (.json)", metavar="FILE", api=False, aliases=("-o",)),
        JSON), settings={"out_formats": (".json",)}, progress="stages")

STORE_SHOW = Command(
    ("store", "show"), "Store", "list the cells a store holds, with their studies done",
    (Option("file", "a result store written with --store", metavar="FILE", param="path"), JSON),
    description="One row per cell: its design, seed, chunk size, chunks and studies done and the seconds they took.")

SERVE = Command(
    ("serve",), "Limits", "the interactive planner in the browser: a local web app and its JSON API", (
        Option("--host", "address to listen on (only this machine by default; 0.0.0.0 exposes the server to the "
               "network)", default="127.0.0.1", api=False),
        Option("--port", "port to listen on", positive, 8000, api=False),
        Option("--time-limit", "longest computation of one request", finite_float, SIGNATURE, metavar="SECONDS"),
        Option("--max-sims", "most simulated studies per design cell a request may ask for", positive, SIGNATURE,
               metavar="N"),
        Option("--max-jobs", "computations running at once (each takes one core)", positive, SIGNATURE, metavar="N")),
    description="the interactive planner in the browser: a local web app and its JSON API. Open the printed "
                "address in a browser; the JSON API is under /api (docs/serve.md).")


#: every described command, by its path
COMMANDS: dict[tuple[str, ...], Command] = {c.path: c for c in (*LIKERT, *H2H, *ACCURACY, *BLEU, ANALYZE, AGREEMENT,
                                                                  *F1, FIT, STORE_SHOW, SERVE)}
