"""The completed-study analysis finds its backends in one table: a new backend is one entry, and the
options each entry declares (maximal structure, Kenward-Roger, posterior) decide what is refused."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from humaneval_power.completed_study import analyze, backends
from humaneval_power.errors import InputError


def _ratings() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = [(f"w{w}", f"i{i}", s, 2.5 + 0.8 * k + rng.normal(0, 0.5)) for w in range(4) for i in range(6)
            for k, s in enumerate("ABC")]
    return pd.DataFrame(rows, columns=["worker", "item", "system", "score"])


@pytest.fixture
def copy_of_no_r() -> Iterator[backends.AnalysisBackend]:
    """The no-R backend registered once more under another name and engine text, without a Kenward-Roger cost."""
    entry = backends.register(replace(backends.get_backend("statsmodels"), name="copy",
                                      methods_text="a copied REML solver", kenward_roger=None))
    yield entry
    backends.REGISTRY.unregister("copy")


def test_a_registered_backend_is_used_through_its_entry_alone(copy_of_no_r: backends.AnalysisBackend) -> None:
    """One entry suffices: analyze() fits with its fitter (the no-R numbers, to the bit) and names its engine."""
    ours = analyze(_ratings(), backend="copy", contrasts="baseline")
    reference = analyze(_ratings(), backend="statsmodels", contrasts="baseline")
    for name in ("omnibus", "means", "contrasts", "components"):
        pd.testing.assert_frame_equal(getattr(ours, name), getattr(reference, name), check_exact=True)
    assert ours.backend == "copy" and "a copied REML solver" in ours.methods()
    assert "a copied REML solver" not in reference.methods()


def test_each_entry_declares_what_is_refused(copy_of_no_r: backends.AnalysisBackend) -> None:
    with pytest.raises(InputError, match=r"--random maximal needs --backend lme4 \(.*the copy backend"):
        analyze(_ratings(), backend="copy", random="maximal")
    with pytest.raises(InputError, match="--df kenward-roger is not offered by --backend copy"):
        analyze(_ratings(), backend="copy", df="kenward-roger")
    with pytest.raises(InputError, match="backend"):
        analyze(_ratings(), backend="no-such-backend")
    assert [b.name for b in backends.REGISTRY.values() if b.posterior] == ["bambi"]
    assert backends.kenward_roger_limits() == backends.KR_MAX_RATINGS  # the copy offers no Kenward-Roger
