"""A plan's headline names what is planned, not the parameter file: the compared pair (``--comparison``
vs the file's baseline) or the file's comparisons, and the number of systems in the study; a multi-system
file of either family (Gaussian shared-SD set, ordinal fit) plans its own number of systems unless
``--systems`` says otherwise; an ordinal file's ``--comparison`` is honoured or refused, never ignored."""
from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from humaneval_power.cli import main
from humaneval_power.errors import InputError
from humaneval_power.params import LikertParams, OrdinalParams
from humaneval_power.plan_inputs import likert_params, likert_systems, plan_subject

NAMES = ("alpha", "beta", "gamma", "delta", "omega")  # no name is part of another
SDS = {"sd_worker": 0.5, "sd_worker_system": 0.1, "sd_item": 0.4, "sd_item_system": 0.3}


def write_file(folder: Path, family: str, baseline: str, others: tuple[str, ...]) -> Path:
    """A fitted-looking parameter file comparing ``others`` with ``baseline``: a Gaussian set with shared SDs
    (as `hepower fit` writes for several systems) or an ordinal fit."""
    if family == "ordinal":
        doc = OrdinalParams(thresholds=(-2.0, -0.5, 0.5, 2.0), sds=SDS, systems=(baseline, *others),
                            effects={s: 0.1 * (k + 1) for k, s in enumerate(others)},
                            name=f"{', '.join(others)} vs {baseline} (ordinal)").to_json()
    else:
        doc = {"schema": "humaneval-power/params-set", "version": 1, "baseline": baseline, "comparisons": {
            s: LikertParams(0.6 + 0.05 * k, 0.3, 0.1, 0.4, 0.3, 0.7, effect=0.1 * k, name=f"{s} vs {baseline}",
                            provenance={"baseline": baseline, "system": s}).to_json()
            for k, s in enumerate(others)}}
    path = folder / f"{family}-{baseline}-{len(others)}.json"
    path.write_text(json.dumps(doc))
    return path


def named(subject: str) -> set[str]:
    return set(re.findall(r"\w+", subject)) & set(NAMES)


files = st.tuples(st.sampled_from(("gaussian", "ordinal")),
                  st.lists(st.sampled_from(NAMES), min_size=2, max_size=len(NAMES), unique=True))


@settings(max_examples=40, deadline=None)
@given(files, st.data())
def test_the_headline_names_the_planned_pair_and_systems(spec, data) -> None:
    family, (baseline, *rest) = spec
    others = tuple(rest)
    comparison = data.draw(st.sampled_from((None, *others)), "comparison")
    systems = data.draw(st.sampled_from((None, 2, 3, 5)), "systems")
    with tempfile.TemporaryDirectory() as folder:
        path = str(write_file(Path(folder), family, baseline, others))
        params = likert_params(params=path, comparison=comparison)  # accepted: the comparison is held
        default = likert_systems(path, comparison)
        assert default == len(others) + 1  # both families: the file's own number of systems
        n = systems or default
        subject = plan_subject(params.name, n, path, comparison)
    assert f"a {n}-system study" in subject or f"in a {n}-system study" in subject
    if comparison is not None:
        assert subject == f"{comparison} vs {baseline} in a {n}-system study" and named(subject) == {comparison, baseline}
    else:  # the file's comparisons, all planned or their shared parameters used
        assert named(subject) == {baseline, *others}


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(NAMES), min_size=2, max_size=4, unique=True), st.text(min_size=1, max_size=8))
def test_an_ordinal_comparison_the_file_lacks_is_refused(systems, comparison) -> None:
    baseline, *others = systems
    with tempfile.TemporaryDirectory() as folder:
        path = str(write_file(Path(folder), "ordinal", baseline, tuple(others)))
        if comparison in others:
            likert_params(params=path, comparison=comparison)
        else:
            with pytest.raises(InputError, match="no comparison"):
                likert_params(params=path, comparison=comparison)
            with pytest.raises(InputError, match="no comparison"):
                likert_systems(path, comparison)
        bare = Path(folder) / "bare.json"  # an ordinal file naming no systems: any comparison is refused
        bare.write_text(json.dumps(OrdinalParams(thresholds=(-1.0, 0.0, 1.0), sds=SDS, scale=(1, 2, 3, 4)).to_json()))
        with pytest.raises(InputError, match="names no systems"):
            likert_params(params=str(bare), comparison=comparison)


RUN = ["--workers", "3", "--items", "8", "--effect", "0.4", "--sims", "1", "--jobs", "1", "--seed", "1"]
#: the headline does not depend on the test: the ordinal plans use t (the Bartlett default refits 200
#: bootstrap draws per chunk; its end-to-end runs are test_ordinal_example's and test_ordinal_plan's)
TEST = {"gaussian": [], "ordinal": ["--test", "t"]}


@pytest.mark.parametrize("family", ["gaussian", "ordinal"])
def test_the_cli_headline_and_default_systems(tmp_path: Path, family: str, capsys) -> None:
    path = str(write_file(tmp_path, family, "F", ("A", "H", "K")))
    run = RUN + TEST[family]
    assert main(["likert", "power", "--params", path, "--comparison", "K", "--systems", "2", *run]) == 0
    assert capsys.readouterr().out.startswith("Power for K vs F in a 2-system study (")
    assert main(["likert", "power", "--params", path, *run, "--json"]) == 0
    assert {row["systems"] for row in json.loads(capsys.readouterr().out)} == {4}
    assert main(["likert", "power", "--params", path, "--comparison", "Z", *run]) == 2
    assert capsys.readouterr().err.strip().endswith("no comparison 'Z'; have A, H, K")
    if family == "gaussian":  # the MDE's headline too (analytic: instant)
        assert main(["likert", "mde", "--params", path, "--comparison", "H", "--systems", "2", "--workers", "3",
                     "--items", "8", "--method", "analytic"]) == 0
        assert capsys.readouterr().out.startswith("Minimum detectable effect of H vs F in a 2-system study:")
