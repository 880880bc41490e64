"""Converters of one command-line word (or one JSON scalar, as text) to a parameter's value.

Each raises ``ValueError`` or :class:`argparse.ArgumentTypeError` (a one-line message) on a bad value;
argparse turns either into ``hepower: error: ...`` and the web API into HTTP 422.
"""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from ..errors import InputError

RANGE_HELP = "numbers or ranges START:STOP:STEP (STOP included)"
MAX_RANGE = 10_000  #: values one START:STOP:STEP may expand to (a grid cell each)


class BelowMinimum(argparse.ArgumentTypeError):
    """A number below its option's lower bound: the message says the bound (a grid passes it on as is)."""


def number_list(kind: Callable[[str], Any], name: str) -> Callable[[str], list[Any]]:
    """Parse '3', '0.1' or a range 'START:STOP:STEP' (STOP included); a value below ``kind``'s lower bound
    (:class:`BelowMinimum`) is refused with the bound's message."""

    def parse(text: str) -> list[Any]:
        try:
            if ":" not in text:
                return [kind(text)]
            parts = [kind(p) for p in text.split(":")]
            if len(parts) != 3 or parts[2] <= 0 or parts[1] < parts[0]:
                raise ValueError
            start, stop, step = parts
            n = int((stop - start) / step + 1e-9) + 1
        except BelowMinimum:
            raise
        except (ValueError, OverflowError, argparse.ArgumentTypeError):
            raise argparse.ArgumentTypeError(f"{name} takes {RANGE_HELP}, got {text!r}") from None
        if n > MAX_RANGE:
            raise argparse.ArgumentTypeError(f"{name} {text} has {n:,} values, more than {MAX_RANGE:,} design "
                                             "cells; use a coarser STEP")
        return [kind(round(start + k * step, 12)) for k in range(n)]

    return parse


def finite_float(text: str) -> float:
    """A finite number."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def integer(text: str) -> int:
    """An integer; '1e6'-style notation is accepted when it is a whole number."""
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if not value.is_integer():
            raise ValueError(text) from None
        return int(value)


def at_least(minimum: int) -> Callable[[str], int]:
    """An integer type that refuses values below ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = integer(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise BelowMinimum(f"must be an integer >= {minimum}, got {text!r}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


positive = at_least(1)
non_negative = at_least(0)


def target_power(text: str) -> float:
    """A power to reach, in (0, 1) (checked by :func:`humaneval_power.validation.check_target_power`)."""
    from ..validation import check_target_power

    try:
        return check_target_power(finite_float(text))
    except (ValueError, InputError):
        raise argparse.ArgumentTypeError(f"expected a power in (0, 1), got {text!r}") from None


def dpi(text: str) -> float:
    """A plot resolution (checked by :func:`humaneval_power.plots.check_dpi`)."""
    from ..plots import check_dpi

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    try:
        return check_dpi(value)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
