"""Imported once by the web app's fork server, so that every worker starts with the numerical
stack, the engine and the CLI loaded (a fast computation then answers in milliseconds)."""
from __future__ import annotations

import importlib

PRELOADED = ("numpy", "pandas", "scipy.stats", "tqdm", "humaneval_power.io", "humaneval_power.engine",
             "humaneval_power.planning", "humaneval_power.fitting.batched", "humaneval_power.scenarios.likert",
             "humaneval_power.scenarios.headtohead", "humaneval_power.scenarios.accuracy",
             "humaneval_power.scenarios.bleu", "humaneval_power.cli.likert", "humaneval_power.cli.h2h",
             "humaneval_power.cli.accuracy", "humaneval_power.cli.bleu")

for _name in PRELOADED:
    importlib.import_module(_name)
