"""The planner's page in a real headless browser (Playwright driving Debian's chromium): the numbers read off
the page are those of the API and of the command the page shows; a parameter file written by `hepower fit`
uploads; a shared link reopens the same design; bad input shows the one-line message; a long run shows its
progress and cancels.

The page's screenshot for docs/serve.md is written to out/ (HEPOWER_DOCS_SCREENSHOT=1: to docs/img/serve.png).
"""
from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser")]  # one server and browser (--dist loadgroup)

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOT = bool(os.environ.get("HEPOWER_DOCS_SCREENSHOT"))  #: write the docs' screenshot (a smoother curve: more sims)
SIMS = 400 if SHOT else 100
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(base: str, path: str, body: Any) -> tuple[int, Any]:
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """`hepower serve` on a free localhost port, stopped at the end."""
    pytest.importorskip("fastapi", reason="hepower serve needs the serve extra (FastAPI, uvicorn)")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "humaneval_power.cli", "serve", "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(base + "/api", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"hepower serve did not start: {proc.stderr.read() if proc.stderr else ''}")
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="the browser tests need Playwright (dev extra)")
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium is not installed (make chromium-setup installs Debian's)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(server: str, browser: Any) -> Iterator[Any]:  # the server outlives the browser's connections
    context = browser.new_context(viewport={"width": 1200, "height": 1000}, accept_downloads=True)
    pg = context.new_page()
    pg.set_default_timeout(120_000)  # a loaded 2-core machine; the waits end as soon as the page is ready
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert not errors, errors  # no JavaScript error on the page


def _open(page: Any, server: str, state: dict[str, str] | None = None) -> None:
    """Open the page (``state``: the inputs, as a shared link carries them) and wait for its first answer."""
    from urllib.parse import urlencode

    page.goto(server + "/" + ("#" + urlencode(state) if state else ""))
    page.wait_for_function("document.querySelector('#power').dataset.value")


def _fill(page: Any, scenario: str, values: dict[str, str]) -> None:
    for name, value in values.items():
        el = page.locator(f"[data-scenario={scenario}] [name={name}]")
        if el.evaluate("e => e.tagName") == "SELECT":
            el.select_option(value)
        else:
            el.fill(value)


def _settled(page: Any, command: str, what: str = "#power") -> None:
    """Wait until the page shows the result of ``command`` (its tokens, in any order) and is idle."""
    tokens = sorted(command.split())
    page.wait_for_function(
        """([tokens, what]) => !document.body.dataset.busy && document.querySelector(what).dataset.value
             && JSON.stringify(document.querySelector('#command').textContent.split(/\\s+/).filter(Boolean).sort())
                === JSON.stringify(tokens)""", arg=[tokens, what], timeout=120_000)


def _download(page: Any, button: str, folder: Path) -> Path:
    """Click a download button; the file, saved in ``folder`` under the name the page gives it."""
    with page.expect_download() as info:
        page.click(button)
    path = folder / info.value.suggested_filename
    info.value.save_as(path)
    return path


def _value(page: Any, selector: str) -> Any:
    return json.loads(page.locator(selector).get_attribute("data-value"))


def _cli_records(command: str, cwd: Path) -> list[dict[str, Any]]:
    """Run the command shown (``hepower ...``) with --json in ``cwd``: its records."""
    import shlex

    from humaneval_power.cli import main

    here, out = os.getcwd(), io.StringIO()
    os.chdir(cwd)
    try:
        with redirect_stdout(out):
            assert main([*shlex.split(command)[1:], "--json"]) == 0
    finally:
        os.chdir(here)
    return json.loads(out.getvalue())


def _snippet_table(code: str, cwd: Path) -> Any:
    here, ns = os.getcwd(), {}
    os.chdir(cwd)
    try:
        with redirect_stdout(io.StringIO()):
            exec(code, ns)
    finally:
        os.chdir(here)
    return ns["table"]


def test_page_power_is_the_api_and_the_cli_power(page: Any, server: str, tmp_path: Path) -> None:
    from humaneval_power.serve.commands import check, command_line, shell_command

    _open(page, server, {"scenario": "likert", "items": "60", "workers": "6", "ratings_per_item": "3",
                         "n_sims": str(SIMS), "seed": "2", "search_items": "40 160", "search_workers": "6 12",
                         "search_k": "3"})
    _fill(page, "likert", {"effect": "0.25", "per_rating": "0.1"})  # typed into the inputs
    kwargs = {"params": "card2020-high", "workers": [6], "items": [60], "effect": [0.25], "ratings_per_item": [3],
              "items_per_hit": [1], "systems": 2, "presentation": "within", "costs": {"per_rating": 0.1},
              "method": "fast", "test": "satterthwaite", "alpha": 0.05, "n_sims": SIMS, "seed": 2}
    command = shell_command(command_line("likert_power", check("likert_power", kwargs)))
    _settled(page, command)
    status, api = _post(server, "/api/likert_power", kwargs)
    assert status == 200
    record = api["records"][0]
    assert _value(page, "#power") == record["power"] and page.text_content("#power") == f"{record['power']:.3f}"
    assert page.text_content("#power-ci") == f"[{record['ci_low']:.3f}, {record['ci_high']:.3f}]"
    assert _value(page, "#type-m") == record["type_m"] and _value(page, "#cost") == record["cost"] == 0.1 * 60 * 3 * 2
    page.click("#show-command")
    assert page.text_content("#command") == command
    assert _cli_records(command, tmp_path)[0] == record  # the command shown reproduces the page's numbers
    table = _snippet_table(page.text_content("#python"), tmp_path)
    assert float(table.power.iloc[0]) == record["power"] and float(table.type_m.iloc[0]) == record["type_m"]
    design = _download(page, "#dl-design", tmp_path)  # a --design FILE giving the same power
    assert json.loads(design.read_text()) == {"items": 60, "workers": 6, "ratings_per_item": 3, "items_per_hit": 1,
                                              "systems": 2, "presentation": "within"}
    again = _cli_records(f"hepower likert power --design {design} --effect 0.25 --cost-per-rating 0.1 --sims {SIMS} "
                         "--seed 2", tmp_path)
    assert again[0] == record

    page.wait_for_function("document.querySelector('#cheapest').dataset.value !== undefined", timeout=120_000)
    budget = {"params": "card2020-high", "effect": 0.25, "items": [40, 160], "workers": [6, 12],
              "ratings_per_item": [3], "items_per_hit": [1], "costs": {"per_rating": 0.1}, "target_power": 0.8,
              "systems": 2, "presentation": "within", "method": "fast", "test": "satterthwaite", "alpha": 0.05,
              "n_sims": SIMS, "seed": 2}
    status, best = _post(server, "/api/likert_budget", budget)
    assert status == 200 and _value(page, "#cheapest") == best["records"][0]["value"]
    points = json.loads(page.locator("#frontier").get_attribute("data-points"))
    assert points == [{"cost": d["cost"], "power": d["power"]} for d in best["designs"]]
    curve = json.loads(page.locator("#curve").get_attribute("data-points"))
    assert [p["x"] for p in curve] == [15, 30, 60, 120, 240]
    assert next(p["y"] for p in curve if p["x"] == 60) == record["power"]  # the curve goes through the design

    shot = ROOT / "docs" / "img" / "serve.png" if SHOT else tmp_path / "serve.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


@pytest.fixture(scope="module")
def fitted_params(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A parameter file written by `hepower fit` (statsmodels backend: no R needed) from a small simulated pilot."""
    import numpy as np
    import pandas as pd

    from humaneval_power.cli import main

    folder = tmp_path_factory.mktemp("fit")
    rng = np.random.default_rng(1)
    rows = [(w, i, s, 0.5 + 0.1 * (s == "B") + rng.normal(0, 0.1) + 0.05 * w / 5 + 0.05 * (i % 7) / 7)
            for w in range(5) for i in range(12) for s in "AB"]
    pd.DataFrame(rows, columns=["worker", "item", "system", "score"]).to_csv(folder / "pilot.csv", index=False)
    with redirect_stdout(io.StringIO()):
        assert main(["fit", str(folder / "pilot.csv"), "--backend", "statsmodels", "-o",
                     str(folder / "pilot_params.json")]) == 0
    return folder / "pilot_params.json"


def test_upload_a_fitted_parameter_file(page: Any, server: str, fitted_params: Path, tmp_path: Path) -> None:
    doc = json.loads(fitted_params.read_text())
    _open(page, server, {"scenario": "likert", "effect": "0.1", "n_sims": "200"})
    _fill(page, "likert", {"source": "file"})
    page.set_input_files("#params-file", str(fitted_params))
    page.wait_for_function("document.querySelector('#params-name').textContent.startsWith('loaded: pilot_params.json')")
    kwargs = {"params": doc, "workers": [10], "items": [100], "effect": [0.1], "items_per_hit": [1], "systems": 2,
              "presentation": "within", "costs": {"per_rating": 0.1}, "method": "fast", "test": "satterthwaite",
              "alpha": 0.05, "n_sims": 200, "seed": 0}
    from humaneval_power.serve.commands import check, command_line, shell_command

    command = shell_command(command_line("likert_power", check("likert_power", kwargs)))
    assert "--params params.json" in command
    _settled(page, command)
    status, api = _post(server, "/api/likert_power", kwargs)
    assert status == 200 and _value(page, "#power") == api["records"][0]["power"]
    _download(page, "#dl-params", tmp_path)  # as the page says: save the parameter file as params.json
    assert json.loads((tmp_path / "params.json").read_text()) == doc
    assert _cli_records(command, tmp_path)[0] == api["records"][0]


def test_shared_link_reopens_the_design(page: Any, browser: Any, server: str) -> None:
    _open(page, server, {"scenario": "accuracy", "method": "normal"})
    _fill(page, "accuracy", {"n": "800", "delta": "0.04", "agreement": "0.88"})
    _settled(page, "hepower accuracy power --n 800 --delta 0.04 --agreement 0.88 --method=normal --alpha=0.05 "
                   "--sims=10000 --seed=0")
    power = _value(page, "#power")
    page.click("#share")
    url = page.input_value("#share-url")
    assert url.startswith(server + "/#") and "n=800" in url
    _fill(page, "accuracy", {"n": "900"})  # a link pasted into the same tab (only the hash changes) restores it
    page.wait_for_function("document.querySelector('#command').textContent.includes('--n 900 ')")
    page.goto(url)
    page.wait_for_function("document.querySelector('#command').textContent.includes('--n 800 ') "
                           "&& !document.body.dataset.busy")
    assert page.input_value("[data-scenario=accuracy] [name=n]") == "800" and _value(page, "#power") == power
    other = browser.new_context().new_page()
    try:
        other.goto(url)
        other.wait_for_function("document.querySelector('#power').dataset.value && !document.body.dataset.busy")
        assert other.input_value("#scenario") == "accuracy"
        assert other.input_value("[data-scenario=accuracy] [name=delta]") == "0.04"
        assert _value(other, "#power") == power
        status, api = _post(server, "/api/mcnemar_power", {"n": [800], "delta": [0.04], "agreement": [0.88],
                                                           "method": "normal"})
        assert status == 200 and api["records"][0]["power"] == power
    finally:
        other.context.close()


def test_bad_input_shows_the_message(page: Any, server: str) -> None:
    _open(page, server, {"scenario": "h2h"})
    page.select_option("#scenario", "likert")
    _fill(page, "likert", {"workers": "3", "ratings_per_item": "5"})
    page.wait_for_function("!document.querySelector('#error').hidden && !document.body.dataset.busy")
    kwargs = {"params": "card2020-high", "workers": [3], "items": [100], "effect": [0.2], "ratings_per_item": [5]}
    status, api = _post(server, "/api/likert_power", kwargs)
    assert status == 422 and page.text_content("#error") == api["detail"] == \
        "ratings per item (5) exceed the pool of workers (3)"
    assert page.text_content("#power") == "–"  # no stale number next to the message
    _fill(page, "likert", {"ratings_per_item": "3"})  # fixed: the message goes
    page.wait_for_function("document.querySelector('#error').hidden && document.querySelector('#power').dataset.value")


def test_long_run_shows_progress_and_cancels(page: Any, server: str) -> None:
    _open(page, server, {"scenario": "h2h"})
    page.select_option("#scenario", "likert")
    _fill(page, "likert", {"items": "400", "ratings_per_item": "3", "n_sims": "20000"})
    page.wait_for_selector("#progress:not([hidden])", timeout=30_000)
    page.wait_for_function("/power: [0-9,]+ \\/ 20,000 studies/.test(document.querySelector('#progress-label').textContent)")
    page.click("#cancel")
    page.wait_for_function("document.querySelector('#error').textContent.startsWith('cancelled')")
    assert page.locator("#progress").is_hidden()
    status, _ = _post(server, "/api/h2h_mde", {"n": 100})  # the worker is gone: the server takes new work
    assert status == 200


def test_a_completed_study_uploads_and_its_report_shows(page: Any, server: str, tmp_path: Path) -> None:
    """A user uploads ratings and reads the report in the page: the contrasts are `hepower analyze`'s; a file
    that is not ratings shows the one-line message."""
    from tests.serve_helpers import ratings_csv

    page.goto(server + "/")
    bad = tmp_path / "notes.txt"
    bad.write_text("not ratings")
    page.set_input_files("#ratings-file", str(bad))
    page.click("#analysis-run")
    page.wait_for_selector("#analysis-error:not([hidden])")
    assert "upload ratings as" in page.text_content("#analysis-error")
    study = tmp_path / "study.csv"
    study.write_bytes(ratings_csv())
    page.set_input_files("#ratings-file", str(study))
    page.select_option("#analysis-backend", "statsmodels")
    page.click("#analysis-run")
    page.wait_for_selector("#analysis-report:not([hidden])")
    records = json.loads(page.locator("#analysis-report").get_attribute("data-records"))
    assert page.is_hidden("#analysis-error")
    command = page.text_content("#analysis-command")
    assert command == "hepower analyze --contrasts=pairs --backend=statsmodels ratings.csv"
    (tmp_path / "ratings.csv").write_bytes(ratings_csv())
    assert records == _cli_records(command, tmp_path)
    frame = page.frame_locator("#analysis-report")
    assert "C" in frame.locator("body").inner_text() and frame.locator("table").count() > 0


def test_glmm_head_to_head_planner_from_the_page(page: Any, server: str, tmp_path: Path) -> None:
    """The GLMM head-to-head planner typed into the page: its power is the API's (`h2h_mixed_power`) and the
    command shown's."""
    import math

    page.goto(server + "/")
    page.select_option("#scenario", "h2h_glmm")
    _fill(page, "h2h_glmm", {"sd_worker": "0.4", "sd_item": "0.6", "p_tie": "0.1", "ties": "split", "workers": "6",
                             "items": "30", "per_item": "3", "p_win": "0.7", "n_sims": "60", "seed": "4"})
    page.wait_for_function("document.querySelector('#power').dataset.value "
                           "&& document.querySelector('#command').textContent.includes('--seed=4')")
    words = page.text_content("#command").split()
    log_odds = float(words[words.index("--log-odds") + 1])  # the page's log(p / (1 - p)), to the last digit
    assert log_odds == pytest.approx(math.log(0.7 / 0.3), rel=1e-14)
    kwargs = {"params": {"sd_worker": 0.4, "sd_item": 0.6, "p_tie": 0.1, "ties": "split"}, "workers": [6],
              "items": [30], "log_odds": [log_odds], "per_item": [3], "test": "z", "method": "fast",
              "alpha": 0.05, "n_sims": 60, "seed": 4}
    from humaneval_power.serve.commands import check, command_line, shell_command

    assert sorted(words) == sorted(shell_command(command_line("h2h_mixed_power", check("h2h_mixed_power", kwargs))).split())
    status, doc = _post(server, "/api/h2h_mixed_power", kwargs)
    assert status == 200, doc
    assert _value(page, "#power") == doc["records"][0]["power"]
    assert _cli_records(page.text_content("#command"), tmp_path) == doc["records"]


def test_a_pilot_layout_plans_from_the_page(page: Any, server: str, tmp_path: Path) -> None:
    """A pilot uploaded in the Likert planner (--design-from): the page's power is that of the command shown,
    run on the same file."""
    from tests.serve_helpers import ratings_csv

    page.goto(server + "/")
    pilot = tmp_path / "pilot.csv"
    pilot.write_bytes(ratings_csv(2))
    _fill(page, "likert", {"method": "fast", "n_sims": "40", "items": "24", "pilot_systems": "A C"})
    page.set_input_files("#pilot-file", str(pilot))
    page.wait_for_function("document.querySelector('#command').textContent.includes('--design-from=design_from.csv') "
                           "&& document.querySelector('#command').textContent.includes('--sims=40') "
                           "&& document.querySelector('#power').dataset.value")
    (tmp_path / "design_from.csv").write_bytes(ratings_csv(2))
    records = _cli_records(page.text_content("#command"), tmp_path)
    assert _value(page, "#power") == records[0]["power"] and records[0]["items"] == 24


def test_every_other_command_runs_from_its_generated_form(page: Any, server: str, tmp_path: Path) -> None:
    """`agreement` from the generic form: ratings uploaded, the records shown are the command's."""
    from tests.serve_helpers import ratings_csv

    page.goto(server + "/")
    page.wait_for_selector("#other-form [data-arg=ratings]")
    study = tmp_path / "study.csv"
    study.write_bytes(ratings_csv())
    page.set_input_files("#other-form [data-arg=ratings]", str(study))
    page.select_option("#other-form [data-arg=metric]", "interval")
    page.fill("#other-form [data-arg=n_boot]", "30")
    page.click("#other-run")
    page.wait_for_function("document.querySelector('#other-records').dataset.records "
                           "|| !document.querySelector('#other-error').hidden")
    assert page.is_hidden("#other-error"), page.text_content("#other-error")
    records = json.loads(page.locator("#other-records").get_attribute("data-records"))
    command = page.text_content("#other-command")
    assert command == "hepower agreement --metric=interval --boot=30 ratings.csv"
    (tmp_path / "ratings.csv").write_bytes(ratings_csv())
    assert records == _cli_records(command, tmp_path)
    assert page.locator("#other-records table tbody tr").count() == len(records)
    assert "alpha" in page.text_content("#other-summary").lower()
    page.select_option("#other-function", "solve_prop_test")
    page.fill("#other-form [data-arg=p1]", "0.8")
    page.fill("#other-form [data-arg=power]", "0.8")
    page.click("#other-run")
    page.wait_for_selector("#other-error:not([hidden])")  # n and p2 both left out: the API's one line
    assert "\n" not in page.text_content("#other-error")


def test_a_pilot_fitted_from_the_generated_form_downloads_the_parameter_file_of_hepower_fit(
        page: Any, server: str, tmp_path: Path) -> None:
    """`fit` from the generic form: the pilot uploaded, the parameter file downloaded is the one the command shown
    writes with -o, byte for byte, and the summary is the one it prints."""
    import io
    import shlex
    from contextlib import redirect_stdout

    from humaneval_power.cli import main
    from tests.serve_helpers import ratings_csv

    page.goto(server + "/")
    page.wait_for_selector("#other-form [data-arg=ratings]")
    page.select_option("#other-function", "fit_pilot_file")
    pilot = tmp_path / "pilot.csv"
    pilot.write_bytes(ratings_csv())
    page.set_input_files("#other-form [data-arg=source]", str(pilot))
    page.select_option("#other-form [data-arg=backend]", "statsmodels")
    page.click("#other-run")
    page.wait_for_selector("#other-params:not([hidden]), #other-error:not([hidden])")
    assert page.is_hidden("#other-error"), page.text_content("#other-error")
    command = page.text_content("#other-command")
    assert command == "hepower fit --backend=statsmodels source.csv"
    downloaded = _download(page, "#other-params", tmp_path)
    (tmp_path / "source.csv").write_bytes(ratings_csv())
    here, out = os.getcwd(), io.StringIO()
    os.chdir(tmp_path)
    try:
        with redirect_stdout(out):
            assert main([*shlex.split(command)[1:], "-o", "cli.json"]) == 0
    finally:
        os.chdir(here)
    assert downloaded.name == "params.json" and downloaded.read_bytes() == (tmp_path / "cli.json").read_bytes()
    assert out.getvalue().startswith(page.text_content("#other-summary"))
