"""The fitting package's seams: backends never import the model layer, and dispatch goes through the registry."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from humaneval_power.errors import InputError
from humaneval_power.fitting import registry

FITTING = Path(__file__).resolve().parents[1] / "humaneval_power" / "fitting"
#: modules that consume fits (model layer and interop); everything else in fitting/ is a backend or a helper
CONSUMERS = {"model.py", "pymer4_interop.py", "pilot.py"}  #: the layers above the model layer (pilot.py: what `hepower fit` runs)


def _imports_of(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            names.add(node.module or "")
    return names


@pytest.mark.parametrize("path", sorted(p for p in FITTING.glob("*.py") if p.name not in CONSUMERS), ids=lambda p: p.name)
def test_backends_and_helpers_do_not_import_the_model_layer(path: Path) -> None:
    assert "model" not in _imports_of(path), f"{path.name} imports fitting.model (an import cycle)"


def test_importing_a_backend_does_not_load_the_model_layer() -> None:
    code = ("import sys, humaneval_power.fitting.statsmodels_lmm, humaneval_power.fitting.lme4; "
            "print('humaneval_power.fitting.model' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_registry_says_what_each_backend_supports() -> None:
    assert set(registry.REGISTRY) >= {"lme4", "statsmodels", "bambi"}
    assert registry.REGISTRY.get("statsmodels").resolve_intervals("gaussian", None) == "wald"
    assert registry.REGISTRY.get("bambi").resolve_intervals("gaussian", None) == "posterior"
    assert registry.backends_for("binomial") == ("lme4", "bambi")
    with pytest.raises(InputError, match="does not fit binomial"):
        registry.REGISTRY.get("statsmodels").resolve_intervals("binomial", None)
    with pytest.raises(InputError, match="not available with the bambi backend"):
        registry.REGISTRY.get("bambi").resolve_intervals("gaussian", "wald")
    with pytest.raises(InputError, match="unknown backend"):
        registry.REGISTRY.get("nope")
