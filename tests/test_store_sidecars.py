"""A store's SQLite sidecar names (X-wal, X-shm, X-journal): no run deletes a file that merely has
such a name (review of issue 24)."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from humaneval_power.cli import main
from humaneval_power.store import SIDECARS, Store

RUN = ["likert", "power", "--workers", "3", "--items", "10", "--effect", "0.2", "--sims", "5", "--jobs", "1", "--json"]


@pytest.mark.parametrize("suffix", SIDECARS)
@pytest.mark.parametrize("option", ["--store", "--out"])
def test_a_sidecar_name_is_refused_and_nothing_is_written(tmp_path: Path, suffix: str, option: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / f"st.db{suffix}"
    assert main(RUN + [option, str(path)]) == 2
    assert "SQLite" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", SIDECARS)
def test_a_foreign_database_where_the_sidecar_goes_survives_a_run_on_its_sibling(
        tmp_path: Path, suffix: str, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / f"st.db{suffix}"
    with sqlite3.connect(other) as db:  # another database (e.g. a store made before names were checked)
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES (1)")
    db.close()
    before = other.read_bytes()
    assert main(RUN + ["--store", str(tmp_path / "st.db")]) == 2
    assert "not the" in capsys.readouterr().err
    assert other.read_bytes() == before and not (tmp_path / "st.db").exists()


def test_a_live_store_with_its_own_log_opens_again(tmp_path: Path) -> None:
    """The real sidecars of an open store (its write-ahead log) are accepted by a second run."""
    path = tmp_path / "st.db"
    with Store(path) as first:
        first.add_cells([("k", "s", {}, 1, 1)])
        assert Path(f"{path}-wal").stat().st_size > 0
        with Store(path) as second:
            assert second.about()["format"]
    assert main(RUN + ["--store", str(path)]) == 0
