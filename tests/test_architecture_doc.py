"""docs/architecture.md names the package's modules; each name it gives in backticks (``x.py``, ``pkg/``,
``pkg/x.py``) is a file or folder of the checkout (issue 25: the architecture document matches the code)."""
from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def _named_paths() -> set[str]:
    return {m for m in re.findall(r"`([A-Za-z0-9_./]+(?:\.py|/))`", DOC.read_text()) if m != "/"}


def _checkout() -> tuple[set[str], set[str]]:
    """The checkout's files and folders as paths relative to ROOT, walked once with ``.git`` and ``.venv`` pruned
    (a virtualenv inside the checkout has tens of thousands of files: a walk per name took 5 CPU s)."""
    files: set[str] = set()
    folders: set[str] = set()
    for here, dirs, names in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in (".git", ".venv")]
        rel = Path(here).relative_to(ROOT).as_posix()
        prefix = "" if rel == "." else rel + "/"
        folders.update(prefix + d for d in dirs)
        files.update(prefix + n for n in names)
    return files, folders


def _exists(name: str, files: set[str], folders: set[str]) -> bool:
    """Whether a file (or, for ``pkg/``, a folder) of the checkout ends with the path ``name``."""
    stripped = name.rstrip("/")
    return any(p == stripped or p.endswith("/" + stripped) for p in (folders if name.endswith("/") else files))


def test_every_module_the_architecture_names_exists() -> None:
    named = _named_paths()
    assert len(named) > 40  # the document names the modules of every stage
    files, folders = _checkout()
    missing = sorted(n for n in named if not _exists(n, files, folders))
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
