"""One description of the public API, read by both front ends.

Each public command is described once (:mod:`.commands`): the Python function it calls, and per
parameter its API name, converter, default (read from the function's signature, never retyped),
choices (the library's own constants), help text and command-line flag. ``hepower``'s argparse
parsers are generated from it (:func:`humaneval_power.cli.common.add_command`) and so is the web
API's validation (:func:`humaneval_power.interface.validation.validate`).

Functions and constants are named by dotted path in one table, :data:`NAMES`, resolved lazily (on
first use), so that ``hepower --help`` imports nothing numerical.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ..registry import load

#: every library name the description refers to -> "module:attribute" (the one place to fix when modules move)
NAMES: dict[str, str] = {
    # functions
    "likert_power": "humaneval_power.scenarios.likert:likert_power",
    "likert_sample_size": "humaneval_power.scenarios.likert:likert_sample_size",
    "likert_mde": "humaneval_power.scenarios.likert:likert_mde",
    "likert_budget": "humaneval_power.scenarios.likert:likert_budget",
    "cell_factory": "humaneval_power.scenarios.crowd:cell_factory",
    "crowd_design": "humaneval_power.plan_inputs:crowd_design",
    "Costs": "humaneval_power.designs:Costs",
    "h2h_power": "humaneval_power.scenarios.headtohead:h2h_power",
    "h2h_mixed_power": "humaneval_power.scenarios.headtohead:h2h_mixed_power",
    "h2h_sample_size": "humaneval_power.scenarios.headtohead:h2h_sample_size",
    "h2h_mixed_sample_size": "humaneval_power.scenarios.headtohead:h2h_mixed_sample_size",
    "h2h_mde": "humaneval_power.scenarios.headtohead:h2h_mde",
    "mcnemar_power": "humaneval_power.scenarios.accuracy:mcnemar_power",
    "mcnemar_sample_size": "humaneval_power.scenarios.accuracy:mcnemar_sample_size",
    "accuracy_mde": "humaneval_power.scenarios.accuracy:accuracy_mde",
    "mde_table": "humaneval_power.scenarios.accuracy:mde_table",
    "estimate_accuracy": "humaneval_power.scenarios.accuracy:estimate_accuracy",
    "solve_prop_test": "humaneval_power.scenarios.accuracy:solve_prop_test",
    "f1_power": "humaneval_power.scenarios.f1:f1_power",
    "bleu_power": "humaneval_power.scenarios.bleu:bleu_power",
    "bleu_mde": "humaneval_power.scenarios.bleu:bleu_mde",
    "bleu_sample_size": "humaneval_power.scenarios.bleu:bleu_sample_size",
    "bleu_estimate": "humaneval_power.scenarios.bleu:bleu_estimate",
    "bleu_test": "humaneval_power.scenarios.bleu:bleu_test",
    "analyze": "humaneval_power.completed_study:analyze",
    "analyze_judgments": "humaneval_power.completed_study:analyze_judgments",
    "read_ratings": "humaneval_power.fitting.ratings:read_ratings",
    "agreement": "humaneval_power.completed_study:agreement",
    "fit_pilot_file": "humaneval_power.fitting.pilot:fit_pilot_file",
    "fit_ordinal": "humaneval_power.fitting.ordinal_fit:fit_ordinal",
    "read_judgments": "humaneval_power.fitting.ratings:read_judgments",
    "fit_interval_methods": "humaneval_power.fitting.registry:interval_methods",
    "Store": "humaneval_power.store:Store",
    "Limits": "humaneval_power.serve.commands:Limits",
    "DEFAULT_DRAWS": "humaneval_power.assurance:DEFAULT_DRAWS",
    "PRIOR_HELP": "humaneval_power.assurance:PRIOR_HELP",
    # constants (choices)
    "PRESETS": "humaneval_power.params:PRESETS",
    "LIKERT_METHODS": "humaneval_power.scenarios.crowd:METHODS",
    "LIKERT_TESTS": "humaneval_power.scenarios.crowd:TESTS",
    "LIKERT_MODELS": "humaneval_power.scenarios.crowd:MODELS",
    "LIKERT_PRESETS": "humaneval_power.plan_inputs:LIKERT_PRESETS",
    "EFFECT_SCALES": "humaneval_power.scenarios.likert:EFFECT_SCALES",
    "COEFFICIENT_TESTS": "humaneval_power.significance.coef_test:COEFFICIENT_TESTS",
    "TIE_POLICIES": "humaneval_power.validation:TIE_POLICIES",
    "ACCURACY_METHODS": "humaneval_power.scenarios.accuracy:METHODS",
    "BLEU_METHODS": "humaneval_power.scenarios.bleu:METHODS",
    "METRICS": "humaneval_power.metrics:METRICS",
    "BOOTSTRAP_RULES": "humaneval_power.significance.paired:BOOTSTRAP_RULES",
    "PLANNER_ADJUSTMENTS": "humaneval_power.multiplicity:PER_STUDY",
    "SEPARATE_ADJUSTMENTS": "humaneval_power.multiplicity:SEPARATE",
    "ADJUSTMENTS": "humaneval_power.multiplicity:ADJUSTMENTS",
    "ANALYZE_RANDOM": "humaneval_power.completed_study:RANDOM",
    "ANALYZE_CONTRASTS": "humaneval_power.completed_study:CONTRASTS",
    "ANALYZE_DF": "humaneval_power.completed_study.ordinal:ANALYZE_DF",
    "ANALYZE_BACKENDS": "humaneval_power.completed_study:BACKENDS",
    "ORDINAL_LINKS": "humaneval_power.fitting.clmm:LINKS",
    "ALPHA_METRICS": "humaneval_power.agreement:METRICS",
    "FIT_FAMILIES": "humaneval_power.fitting.registry:FAMILIES",
    "FIT_BACKENDS": "humaneval_power.fitting.registry:REGISTRY",
}


def address(name: str) -> str:
    """``"module:attribute"`` of the library object ``name``: its :data:`NAMES` entry, or the function of the
    command whose ``module`` holds it."""
    if name in NAMES:
        return NAMES[name]
    from .commands import COMMANDS

    module = next((c.module for c in COMMANDS.values() if c.function == name and c.module), None)
    if module is None:
        raise KeyError(f"{name!r} is neither in interface.NAMES nor a command's function with its module")
    return f"{module}:{name}"


def resolve(name: str) -> Any:
    """The library object called ``name`` (:func:`address`; imported now)."""
    return load(address(name))


class _FromSignature:
    """The default of an option: the function's own (see :func:`api_default`)."""

    def __repr__(self) -> str:
        return "SIGNATURE"


SIGNATURE: Any = _FromSignature()


@cache
def api_defaults(function: str) -> dict[str, Any]:
    """The keyword defaults of the function (or dataclass) :data:`NAMES` calls ``function``."""
    params = inspect.signature(resolve(function)).parameters.values()
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


@dataclass(frozen=True)
class Option:
    """One parameter of a command: its command-line flag and, when the API takes it, its API name.

    ``default=SIGNATURE`` reads the default of ``param`` from ``source`` (default: the command's
    function); ``choices`` is a sequence or the :data:`NAMES` key of the library's constant;
    ``grid``: the command line takes several values or ranges (``number_list(kind)``); ``api=False``:
    a front-end option with no API keyword of that name (e.g. ``--json``, ``--params`` FILE).
    """

    flag: str
    help: str | Callable[[], str]  #: a callable when the text quotes defaults read from signatures
    kind: Callable[[str], Any] | None = None
    default: Any = None
    param: str | None = None  #: the API keyword (default: the flag without dashes, - -> _)
    choices: Sequence[Any] | str | Callable[[], Sequence[Any]] | None = None
    metavar: str | tuple[str, ...] | None = None
    nargs: str | int | None = None
    grid: bool = False
    action: str | None = None
    const: Any = None
    required: bool = False
    dest: str | None = None
    hidden: bool = False  #: a former spelling, accepted but not shown
    api: bool = True
    source: str | None = None  #: the function (NAMES key) whose signature gives the default
    aliases: tuple[str, ...] = ()  #: other spellings shown before ``flag`` (e.g. ``-o`` for ``--out``)

    @property
    def dest_name(self) -> str:
        """The command line's name of the value (argparse's dest)."""
        return self.dest or self.flag.lstrip("-").replace("-", "_")

    @property
    def name(self) -> str:
        """The API keyword (for ``api=False``: the command line's dest)."""
        return self.param or self.dest_name

    @property
    def positional(self) -> bool:
        return not self.flag.startswith("-")


@dataclass(frozen=True)
class Group:
    """Options shown under one heading of the help."""

    title: str
    options: tuple[Option | Group, ...]
    exclusive: bool = False  #: at most one of them (a mutually exclusive group, no heading)


@dataclass(frozen=True)
class Command:
    """A public command: ``hepower *path``, calling ``function`` (a :data:`NAMES` key, or a function of
    ``module``).

    ``columns`` set: ``hepower`` runs it generically (:func:`humaneval_power.cli.common.run_command`: the API
    keywords from the options, progress, then the returned table's ``columns`` (empty: all) or a solve
    result's sentence), so a command of an existing group is this one entry; None: its group's module
    ``cli/<group>.py`` runs and prints it.
    """

    path: tuple[str, ...]
    function: str | None
    help: str
    options: tuple[Option | Group, ...]
    description: str | None = None
    modes: tuple[str, ...] = ()  #: further functions the command calls in another mode (h2h: the GLMM planner)
    design: str | None = None  #: the function whose keywords the command's function takes through ``**design``
    #: values the parser sets with no option (argparse's ``set_defaults``), e.g. the formats ``fit --out`` writes
    settings: Mapping[str, Any] = field(default_factory=dict)
    module: str | None = None  #: the module of ``function`` when :data:`NAMES` does not name it
    columns: tuple[str, ...] | None = None  #: run by the generic runner: the table columns it prints
    #: what the function's ``progress(done, total, label)`` counts (``"studies"``, ``"designs"``, ``"trials"``), or
    #: ``"stages"``: it calls ``progress(message)`` once per stage; both front ends label progress by it
    progress: str = "studies"

    def functions(self) -> list[str]:
        """The functions whose keywords the command's options may be (:data:`NAMES` keys)."""
        return [f for f in (self.function, *self.modes, self.design) if f is not None]

    def all_options(self) -> list[Option]:
        """Its options, groups flattened."""
        return list(_flat(self.options))

    def option(self, name: str) -> Option:
        """The option whose API name (or dest) is ``name``."""
        return next(o for o in self.all_options() if o.name == name)


def _flat(items: Sequence[Option | Group]) -> Any:
    for item in items:
        if isinstance(item, Group):
            yield from _flat(item.options)
        else:
            yield item


def choices_of(option: Option) -> Sequence[Any] | None:
    """The option's choices (a library constant resolved; a dict's keys sorted)."""
    choices = option.choices
    if isinstance(choices, str):
        value = resolve(choices)
        return sorted(value) if isinstance(value, dict) else tuple(value)
    return choices() if callable(choices) else choices


def help_of(option: Option) -> str:
    """The option's help text."""
    return option.help() if callable(option.help) else option.help


def default_of(option: Option, command: Command) -> Any:
    """The option's default value as the API has it (``SIGNATURE``: read from the function)."""
    if option.default is not SIGNATURE:
        return option.default
    source = option.source or command.function
    assert source is not None, option.flag
    return api_defaults(source)[option.name]
