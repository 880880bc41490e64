"""One pool of two local worker processes per test module, for the checks that results do not depend on jobs.

With R loaded in the test process (any earlier R test in the xdist worker) the workers are spawned and each
imports the package anew (~1.2 CPU s): a check that passed ``jobs=2`` paid that per call. A module's checks
pass this executor instead, as a solve or grid passes its own to every sweep (``executors.one_executor``); the
work still runs on two processes, and what a worker keeps from one run (caches, R) must not change the next's
results either. Import the fixture into the module and put its tests in one ``xdist_group``.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from humaneval_power.executors import LocalProcesses


@pytest.fixture(scope="module", name="two_workers")
def two_workers_fixture() -> Iterator[LocalProcesses]:
    """Two worker processes, started on first use and stopped at the end of the module."""
    pool = LocalProcesses(2)
    with pool:
        yield pool
