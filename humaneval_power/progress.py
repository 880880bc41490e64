"""Labelled progress: ``progress(done, total, label)``, what the library reports while it works.

``done`` and ``total`` count units of work (simulated studies, refits); ``label``
says what is being worked on (which cell, which step, "starting R").
"""
from __future__ import annotations

import warnings
from typing import Protocol

from .errors import InputError


class Progress(Protocol):
    """A progress callback with a label."""

    def __call__(self, done: int, total: int, label: str = "") -> None: ...


ProgressFn = Progress  #: the type of every ``progress=`` argument


def _quiet(done: int, total: int, label: str = "") -> None:
    """No progress wanted."""


def as_progress(fn: ProgressFn | None) -> Progress:
    """The callback ``fn(done, total, label)`` (None: a no-op)."""
    return _quiet if fn is None else fn


class LongRunWarning(UserWarning):
    """A run is projected to take long (issued once, after its first chunks)."""


def format_duration(seconds: float) -> str:
    """An estimated time, to 3 digits in its largest unit: ``45 minutes``, ``3.5 hours``, ``2 days``."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds / 60:.3g} minutes"


def format_elapsed(seconds: float) -> str:
    """A measured time: ``12.3 s``, ``4m05s``, ``2h07m``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, s = divmod(round(seconds), 60)
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes >= 60 else f"{minutes}m{s:02d}s"


#: estimated run time beyond which work is refused before it starts: it cannot reasonably finish
MAX_SECONDS = 7 * 86400
#: estimated run time beyond which a LongRunWarning says how long the work will take
LONG_SECONDS = 3600


def check_work(what: str, seconds: float, hint: str, warn: bool = True) -> None:
    """Before any work: refuse ``what`` (InputError) when it is estimated to take over
    :data:`MAX_SECONDS`, warn (``LongRunWarning``) when over :data:`LONG_SECONDS`.

    ``seconds`` comes from an operation count and an optimistic measured rate, so what is
    refused surely cannot finish; ``hint`` says what to ask for instead.
    """
    if seconds > MAX_SECONDS:
        raise InputError(f"{what} would take about {format_duration(seconds)}; {hint}")
    if warn and seconds > LONG_SECONDS:
        warnings.warn(LongRunWarning(f"{what} will take about {format_duration(seconds)} or more; Ctrl-C stops it"),
                      stacklevel=3)
