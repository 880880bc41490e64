"""One BLAS thread for small dense fits, with the loaded BLAS libraries found once per process."""
from __future__ import annotations

from functools import lru_cache
from typing import Any


@lru_cache(maxsize=1)
def blas_controller() -> Any:
    """threadpoolctl's controller of the loaded BLAS libraries (finding them costs more than a small fit)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def one_blas_thread() -> Any:
    """A context of one BLAS thread (small dense factorisations: more threads only contend). ``threadpool_limits``
    would scan the loaded libraries on every call, ~6 ms, a tenth of a 24-rating study's fit."""
    return blas_controller().limit(limits=1)
