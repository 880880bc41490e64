"""The executor seam: what runs the engine's tasks (see :mod:`humaneval_power.executors`)."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


class Executor:
    """Runs tasks and reports each result once, in this process, as it finishes."""

    #: workers that run tasks at once (sets how many tasks are queued ahead)
    workers: int = 1

    def map(self, fn: Callable[[Any], Any], tasks: Iterable[Any], on_done: Callable[[Any, Any], None]) -> None:
        """``on_done(task, fn(task))`` for every task, in completion order. On an error or Ctrl-C,
        results already finished are reported first, then the rest is cancelled and it is raised."""
        raise NotImplementedError

    def describe(self) -> str:
        """What runs the tasks, for progress and summaries."""
        return type(self).__name__

    def close(self) -> None:
        """Stop the workers this executor started (an executor given a running cluster leaves it)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Jobs = int | Executor | Any | None  #: a number of local processes, an Executor or a distributed.Client
