"""humaneval-power: statistical power analysis for NLP evaluations."""
from .engine import PowerResult, SampleSizeResult, run_cells
from .errors import BackendUnavailableError, HepowerError, InputError
from .params import PRESETS, LikertParams, get_preset, load_params, save_params
from .scenarios.likert import LikertScenario, likert_power, likert_sample_size

__version__ = "0.1.0"
__all__ = [
    "BackendUnavailableError",
    "HepowerError",
    "InputError",
    "LikertParams",
    "LikertScenario",
    "PRESETS",
    "PowerResult",
    "SampleSizeResult",
    "get_preset",
    "likert_power",
    "likert_sample_size",
    "load_params",
    "run_cells",
    "save_params",
]
