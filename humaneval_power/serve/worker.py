"""Imported once by the web app's fork server, so that every worker starts with the numerical
stack and the CLI loaded (a fast computation then answers in milliseconds)."""
from __future__ import annotations

import numpy  # noqa: F401
import pandas  # noqa: F401
import scipy.stats  # noqa: F401

from ..cli import accuracy, bleu, h2h, likert  # noqa: F401
from ..scenarios import accuracy as _accuracy, bleu as _bleu, headtohead, likert as _likert  # noqa: F401
from .. import engine, io, planning  # noqa: F401,E402
from ..fitting import batched  # noqa: F401,E402
import tqdm  # noqa: F401,E402
