"""`likert power` at extreme inputs (review of issue 24): an effect beyond 1e50 is refused in one line, one
beyond the rating scale gets mde's note, and SDs whose simulated ratings vary too little or too much for the
refits' absolute tolerances are refused, for every method (analytic failed with an internal error at 1e-161)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.cli import main
from humaneval_power.validation import SCORE_SPREAD

DESIGN = ["--workers", "3", "--items", "8", "--sims", "4", "--jobs", "1"]
SDS = ["--sd-worker-intercept", "--sd-worker-slope", "--sd-item-intercept", "--sd-item-slope", "--sd-residual"]


@pytest.mark.parametrize("effect", ["1e308", "-1e60"])
def test_a_huge_effect_is_refused_in_one_line(effect: str, capsys) -> None:
    assert main(["likert", "power", f"--effect={effect}", *DESIGN]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "too large" in err and "warning" not in err


def test_an_effect_beyond_the_scale_is_noted(capsys) -> None:
    assert main(["likert", "power", "--effect", "3", *DESIGN]) == 0
    assert "larger than the whole rating scale [0, 1]" in capsys.readouterr().out


@settings(max_examples=8, deadline=None)
@given(st.integers(-300, 38))
def test_sds_outside_the_reliable_spread_are_refused(k: int) -> None:
    scale = 10.0 ** k
    sds = [v for name, sd in zip(SDS, (0.2, 0.1, 0.15, 0.1, 0.25)) for v in (name, repr(sd * scale))]
    total = scale * (0.2**2 + 0.1**2 + 0.15**2 + 0.1**2 + 0.25**2) ** 0.5
    inside = SCORE_SPREAD[0] <= total <= SCORE_SPREAD[1]
    argv = ["likert", "power", "--effect", repr(0.1 * scale), *sds, "--workers", "3", "--items", "8", "--json"]
    assert main([*argv, "--method", "fast", "--sims", "2", "--jobs", "1"]) == (0 if inside else 2), k
    assert main([*argv, "--method", "analytic"]) == (0 if inside else 2), k
