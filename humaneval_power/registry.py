"""Entries found by name: the one registry type behind the package's plug-in seams.

The analyses of simulated studies (:mod:`.analyses`), the fitting backends (:mod:`.fitting.registry`) and the
backends of the completed-study analysis (:mod:`.completed_study.backends`) are each a :class:`Registry`. An
object named ``"module:attribute"`` is imported when first used with :func:`load` (fitters that need R, pymc
or statsmodels; the front ends' library constants). Importing this module imports nothing numerical.
"""
from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Entries by name, in registration order (iterating gives the names); ``what`` names an entry in the
    refusal of an unknown name."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Add (or replace) ``entry`` under ``name``."""
        self._entries[name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` (nothing when it is not registered)."""
        self._entries.pop(name, None)

    def get(self, name: str) -> T:
        """The entry registered as ``name``; InputError ``unknown <what> 'name'; choose one of ...`` otherwise."""
        from .validation import check_choice

        check_choice(self.what, name, self.names())
        return self._entries[name]

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def values(self) -> tuple[T, ...]:
        return tuple(self._entries.values())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries


def load(where: str) -> Any:
    """The object named ``"module:attribute"`` (its module imported now)."""
    module, attribute = where.split(":")
    return getattr(importlib.import_module(module), attribute)
