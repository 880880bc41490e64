"""Labelled progress: ``progress(done, total, label)``, what the library reports while it works.

``done`` and ``total`` count units of work (simulated studies, refits); ``label``
says what is being worked on (which cell, which step, "starting R"). Plain
two-argument callables ``progress(done, total)`` are still accepted:
:func:`as_progress` adapts them, and they simply get no label.
"""
from __future__ import annotations

import inspect
from typing import Callable, Protocol, Union


class Progress(Protocol):
    """A progress callback with a label."""

    def __call__(self, done: int, total: int, label: str = "") -> None: ...


ProgressFn = Union[Progress, Callable[[int, int], None]]


def _quiet(done: int, total: int, label: str = "") -> None:
    """No progress wanted."""


def as_progress(fn: ProgressFn | None) -> Progress:
    """A labelled callback from ``fn`` (None: a no-op; a two-argument callable: label dropped)."""
    if fn is None:
        return _quiet
    try:
        inspect.signature(fn).bind(0, 0, "")
    except TypeError:
        two = fn
        return lambda done, total, label="": two(done, total)  # type: ignore[call-arg]
    except ValueError:  # a builtin without a signature: assume the labelled form
        pass
    return fn  # type: ignore[return-value]


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
    import warnings

    from .engine import LongRunWarning, _duration
    from .errors import InputError

    if seconds > MAX_SECONDS:
        raise InputError(f"{what} would take about {_duration(seconds)}; {hint}")
    if warn and seconds > LONG_SECONDS:
        warnings.warn(LongRunWarning(f"{what} will take about {_duration(seconds)} or more; Ctrl-C stops it"),
                      stacklevel=3)
