"""Power of a t-test (or z-test) with known noncentrality: power with the correct sign, Type-S and Type-M."""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy import stats


@functools.lru_cache(maxsize=1)
def _legendre_nodes() -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights of t_power (an eigenvalue problem: computed once)."""
    return np.polynomial.legendre.leggauss(200)


def t_power(ncp: float, df: float, crit: float, one_sided: bool = False) -> tuple[float, float, float]:
    """Power (correct sign), Type-S and Type-M of a t-test with known noncentrality.

    The statistic is ``T = (Z + ncp) / sqrt(V)`` with ``V ~ chi2(df)/df``
    (``df = inf`` for a z-test); significant iff |T| > crit (T > crit if
    ``one_sided``). Type-M uses estimate / effect = (Z + ncp) / ncp and is
    integrated over V by Gauss-Legendre quadrature on V's quantiles.
    """
    if ncp < 0:
        return t_power(-ncp, df, crit, one_sided)
    if math.isinf(df):
        v = np.array([1.0])
        w = np.array([1.0])
    else:
        x, w = _legendre_nodes()
        v = stats.chi2.ppf((x + 1) / 2, df) / df
        w = w / 2
    k = crit * np.sqrt(v)
    up = stats.norm.sf(k - ncp)
    down = np.zeros_like(up) if one_sided else stats.norm.cdf(-k - ncp)
    # E[X; X > k] and E[-X; X < -k] for X ~ N(ncp, 1)
    m_up = ncp * up + stats.norm.pdf(k - ncp)
    m_down = np.zeros_like(up) if one_sided else stats.norm.pdf(k + ncp) - ncp * down
    if math.isinf(df):
        p_up = float(up[0])
        p_down = float(down[0])
    else:
        p_up = float(stats.nct.sf(crit, df, ncp))
        p_down = 0.0 if one_sided else float(stats.nct.cdf(-crit, df, ncp))
    p_sig = float((w * (up + down)).sum())
    type_s = p_down / (p_up + p_down) if p_up + p_down > 0 else math.nan
    type_m = float((w * (m_up + m_down)).sum()) / ncp / p_sig if ncp > 0 and p_sig > 0 else math.nan
    return p_up, type_s, type_m
