"""docs/architecture.md names the package's modules; each name it gives in backticks (``x.py``, ``pkg/``,
``pkg/x.py``) is a file or folder of the checkout (issue 25: the architecture document matches the code)."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def _named_paths() -> set[str]:
    return {m for m in re.findall(r"`([A-Za-z0-9_./]+(?:\.py|/))`", DOC.read_text()) if m != "/"}


def _exists(name: str) -> bool:
    stripped = name.rstrip("/")
    pattern = stripped if name.endswith("/") else name
    hits = (p for p in ROOT.rglob(Path(pattern).name) if ".venv" not in p.parts and ".git" not in p.parts)
    return any(p.as_posix().endswith("/" + stripped) and (p.is_dir() if name.endswith("/") else p.is_file())
               for p in hits)


def test_every_module_the_architecture_names_exists() -> None:
    named = _named_paths()
    assert len(named) > 40  # the document names the modules of every stage
    missing = sorted(n for n in named if not _exists(n))
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
