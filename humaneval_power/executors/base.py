"""The executor seam: what runs the engine's tasks (see :mod:`humaneval_power.executors`)."""
from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

#: tasks :func:`costliest_first` reads ahead of the one it hands out (bounds its memory on a huge lazy list)
LOOKAHEAD = 4096


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


def costliest_first(tasks: Iterable[T], cost: Callable[[T], float], lookahead: int = LOOKAHEAD) -> Iterator[T]:
    """Every task once, each time the costliest of the next ``lookahead`` still to hand out (ties in the
    given order): largest-first scheduling, so that workers finish together instead of one running the
    largest chunk alone at the end (a sweep's cells often grow along the list). Lazy, at most
    ``lookahead`` tasks held; the order changes where tasks run, never their results."""
    counter = itertools.count()
    it = iter(tasks)
    heap = [(-cost(t), next(counter), t) for t in itertools.islice(it, lookahead)]
    heapq.heapify(heap)
    for task in it:
        yield heapq.heappushpop(heap, (-cost(task), next(counter), task))[2]
    while heap:
        yield heapq.heappop(heap)[2]


Jobs = int | Executor | Any | None  #: a number of local processes, an Executor or a distributed.Client
