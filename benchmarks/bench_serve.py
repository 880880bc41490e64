"""Benchmark: how fast `hepower serve` answers. Starts the server on a free port and times, for each tier, the
API round trip (POST /api/<function>: validation, a worker process, the command, the records; median of 5)
and, with Playwright and chromium, the page: from typing a new value to the new power shown (median of 5,
the page's 0.2 s debounce included). Prints one JSON record. Run: python benchmarks/bench_serve.py
(``BENCH_SERVE_PACKAGE=<folder>``: serve the package in that folder, e.g. an older revision's)
(``--in-process``: the worker's call of each request made in this process, wall and CPU seconds, no server;
``--compare-ref REV``: the crowd cell's call by this tree and by git revision REV, alternating
processes, and the ratio of their CPU seconds, warm and as a new worker's first call).
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CALLS = {
    "likert analytic (10 workers x 100 items)": ("likert_power", {"params": "card2020-high", "workers": [10],
                                                                  "items": [100], "effect": [0.2],
                                                                  "method": "analytic"}),
    "likert fast, crossed (1,000 sims)": ("likert_power", {"params": "card2020-high", "workers": [10], "items": [100],
                                                          "effect": [0.2], "n_sims": 1000}),
    "likert fast, crowd k=3 (500 sims)": ("likert_power", {"params": "card2020-high", "workers": [10], "items": [100],
                                                          "ratings_per_item": [3], "effect": [0.2], "n_sims": 500}),
    "h2h exact": ("h2h_power", {"n": [200], "p_win": [0.6]}),
    "mcnemar exact": ("mcnemar_power", {"n": [1000], "delta": [0.03], "agreement": [0.9]}),
    "bleu saddlepoint (500 sims)": ("bleu_power", {"n": [1000], "delta": [1], "p0": [0.3], "b0": [20],
                                                   "method": "saddlepoint", "n_sims": 500}),
}


def _post(base: str, name: str, body: dict) -> float:
    req = urllib.request.Request(f"{base}/api/{name}", data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as r:
        assert r.status == 200
    return time.perf_counter() - t


def _page(base: str) -> dict[str, float] | str:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "playwright not installed"
    chromium = shutil.which("chromium")
    if not chromium:
        return "chromium not installed"
    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        for method, k in (("analytic", ""), ("fast", ""), ("fast", "3")):
            page.goto(f"{base}/#scenario=likert&method={method}&ratings_per_item={k}&per_rating=0")
            page.wait_for_function("document.querySelector('#power').dataset.value && !document.body.dataset.busy",
                                   timeout=120_000)
            times = []
            for effect in ("0.21", "0.22", "0.23", "0.24", "0.25"):
                t = time.perf_counter()
                page.fill("[data-scenario=likert] [name=effect]", effect)
                page.wait_for_function(f"document.querySelector('#command').textContent.includes('--effect {effect} ')"
                                       " && document.querySelector('#power').dataset.value", timeout=120_000)
                times.append(time.perf_counter() - t)
                page.wait_for_function("!document.body.dataset.busy", timeout=120_000)
            out[f"likert {method}" + (f", crowd k={k}" if k else ", crossed")] = round(statistics.median(times), 3)
        browser.close()
    return out


def in_process(only: str | None = None) -> dict[str, dict[str, float]]:
    """The API path without the server: the worker's call (validation, the API function, the records) made in
    this process, wall and CPU seconds (median of 5): what a request costs a free core (``only``: one call);
    ``first_cpu``: the first of them, as a new worker of the server makes it (its caches empty)."""
    import tempfile

    from humaneval_power.scenarios import crowd
    from humaneval_power.serve.worker import call

    out = {}
    with tempfile.TemporaryDirectory() as folder:
        call("h2h_mde", {"n": 100}, folder, lambda *a: None)
        for what, (name, body) in CALLS.items():
            if only is not None and what != only:
                continue
            runs = []
            for _ in range(5):
                crowd._FITS.clear()  # each request runs in a new worker: no fits cached by the previous one
                t, cpu = time.perf_counter(), time.process_time()
                call(name, body, folder, lambda *a: None)
                runs.append((time.perf_counter() - t, time.process_time() - cpu))
            out[what] = {"wall": round(statistics.median(w for w, _ in runs), 3),
                         "cpu": round(statistics.median(c for _, c in runs), 3),
                         "first_cpu": round(runs[0][1], 3)}
    return out


CROWD = "likert fast, crowd k=3 (500 sims)"


def export_revision(rev: str, folder: str) -> None:
    """The package ``humaneval_power`` of git revision ``rev`` into ``folder`` (to put on PYTHONPATH)."""
    import io
    import tarfile

    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "humaneval_power"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(folder, filter="data")


def compare_ref(rev: str, rounds: int = 5) -> dict[str, object]:
    """CPU seconds of the crowd cell's call by this tree and by revision ``rev`` (its package exported by
    ``git archive``), in alternating processes (``rounds`` each, each the median of 5 calls) so that both see
    the same load; the ratio of the medians."""
    import tempfile

    with tempfile.TemporaryDirectory() as ref:
        export_revision(rev, ref)
        cpu: dict[str, list[float]] = {"ref": [], "new": []}
        first: dict[str, list[float]] = {"ref": [], "new": []}
        for _ in range(rounds):
            for which, path in (("ref", ref), ("new", str(ROOT))):
                out = subprocess.run([sys.executable, __file__, "--in-process", "--only", CROWD], check=True,
                                     capture_output=True, text=True, env={**os.environ, "PYTHONPATH": path})
                got = json.loads(out.stdout)["in_process_seconds"][CROWD]
                cpu[which].append(got["cpu"])
                first[which].append(got["first_cpu"])
    med = {k: statistics.median(v) for k, v in cpu.items()}
    med1 = {k: statistics.median(v) for k, v in first.items()}
    return {"call": CROWD, "ref": rev, "cpu_seconds": cpu, "first_call_cpu_seconds": first,
            "median_cpu_ref": med["ref"], "median_cpu_new": med["new"],
            "ratio_ref_over_new": round(med["ref"] / med["new"], 3),
            "median_first_call_cpu_ref": med1["ref"], "median_first_call_cpu_new": med1["new"],
            "first_call_ratio_ref_over_new": round(med1["ref"] / med1["new"], 3), "load_average": os.getloadavg()}


def main() -> None:
    if "--compare-ref" in sys.argv:
        print(json.dumps(compare_ref(sys.argv[sys.argv.index("--compare-ref") + 1])))
        return
    if "--in-process" in sys.argv:
        only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
        print(json.dumps({"in_process_seconds": in_process(only), "load_average": os.getloadavg()[0]}))
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.environ.get("BENCH_SERVE_PACKAGE", str(ROOT))}  # another revision's
    proc = subprocess.Popen([sys.executable, "-m", "humaneval_power.cli", "serve", "--port", str(port)], env=env,
                            stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/api", timeout=2).close()
                break
            except OSError:
                time.sleep(0.1)
        _post(base, "h2h_mde", {"n": 100})  # the worker fork server is up
        api = {what: round(statistics.median(_post(base, *call) for _ in range(5)), 3) for what, call in CALLS.items()}
        load = os.getloadavg()[0]
        try:
            page: dict[str, float] | str = _page(base)
        except Exception as exc:  # noqa: BLE001 - the API figures are printed whatever the browser does
            page = f"page not measured: {exc.__class__.__name__}: {str(exc).splitlines()[0]}"
        print(json.dumps({"api_seconds": api, "page_seconds": page, "load_average": load}))
    finally:
        proc.terminate()
        proc.wait(15)


if __name__ == "__main__":
    main()
