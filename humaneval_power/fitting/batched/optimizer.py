"""The optimiser of a batched fit: projected (quasi-)Newton on the relative variances of every study at once."""
from __future__ import annotations

import numpy as np

from ..criterion import projected_gradient
from .deviance import AnyBatch, Point, evaluate, gradient, scatter_point, stacked

#: largest Newton step in u = log(1 + n gamma) (a factor of ~e^3 in a stratum's variance)
MAX_STEP = 3.0
#: step halvings of the Armijo backtracking, and how many after the first are tried in one evaluation
HALVINGS, STACKED_HALVINGS = 40, 6


def newton(bt: AnyBatch, gamma: np.ndarray, max_iter: int, tol: float, hess0: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, Point]:
    """Projected (quasi-)Newton on ``gamma >= 0`` for every study.

    The iteration runs in ``u_k = log(1 + n_k gamma_k)`` (``n_k`` observations
    per level: the log of a stratum's expected mean square, in which the
    deviance is nearly quadratic), with the same bound ``u >= 0``. Free
    variables are those inside, or at zero with a negative gradient; the
    Hessian is made positive definite by taking absolute eigenvalues; Armijo
    backtracking along the projected arc. With ``hess0`` (a Hessian in u, e.g.
    from pilot studies) the steps use BFGS updates of it until they become
    small, then the exact Hessian (forward differences of the exact gradient)
    takes over; converged when the Newton decrement with the exact Hessian is
    below ``tol``. Returns gamma, converged, iterations, the Hessian of the
    profiled deviance in gamma at the returned point (for the Satterthwaite
    df), the Hessian in u (to start other studies with; NaN along variables held at zero) and the evaluation
    (with gradient parts) at the returned point.
    """
    n, kk = gamma.shape
    scale = bt.st.per_level[None, :]
    eye = np.eye(kk)

    def to_gamma(u: np.ndarray) -> np.ndarray:
        return np.expm1(u) / scale

    def grad_u(b: AnyBatch, pt: Point, u: np.ndarray) -> np.ndarray:
        return gradient(b, pt) * np.exp(u) / scale

    def fd_hessian(sub: AnyBatch, x: np.ndarray, g: np.ndarray) -> np.ndarray:
        """Forward differences of the gradient, the steps of every study in one evaluation.

        Only along the free variables (inside, or at zero with a negative gradient): the others are held at
        zero by the step and have theta = 0 in the df, so their rows and columns are never used (left 0)."""
        m = x.shape[0]
        h = 1e-6 * np.maximum(x, 1e-2)                                   # (m, K)
        ks, rows = np.nonzero(((x > 0) | (g < 0)).T)                     # the (variable, study) steps taken
        xp = x[rows].copy()
        xp[np.arange(rows.size), ks] += h[rows, ks]
        hess = np.zeros((m, kk, kk))                                     # (m, i, k): d grad_i / d u_k
        if rows.size:
            big = sub.take(rows)
            gp = grad_u(big, evaluate(big, to_gamma(xp), True), xp)
            hess[rows, :, ks] = (gp - g[rows]) / h[rows, ks][:, None]
        return (hess + np.swapaxes(hess, 1, 2)) / 2

    u = np.log1p(np.maximum(gamma, 0.0) * scale)
    last = evaluate(bt, to_gamma(u), True)
    dev, grad = last.dev.copy(), grad_u(bt, last, u)
    done = np.zeros(n, bool)
    converged = np.zeros(n, bool)
    iterations = np.zeros(n, int)
    exact = np.full(n, hess0 is None)
    hess_u = np.full((n, kk, kk), np.nan) if hess0 is None else np.repeat(np.asarray(hess0)[None], n, axis=0)
    for _ in range(2 * max_iter + 2):
        idx = np.flatnonzero(~done)
        if not idx.size:
            break
        sub = bt.take(idx) if idx.size < n else bt
        x, g, d0 = u[idx], grad[idx], dev[idx]
        fresh = exact[idx]
        if fresh.any():
            f = np.flatnonzero(fresh)
            hess_u[idx[f]] = fd_hessian(sub.take(f) if f.size < idx.size else sub, x[f], g[f])
        hess = hess_u[idx]
        free = (x > 0) | (g < 0)
        mask = free[:, :, None] & free[:, None, :]
        hm = np.where(mask, hess, 0.0) + np.where(~free, 1.0, 0.0)[:, :, None] * eye
        gf = np.where(free, g, 0.0)
        w, v = np.linalg.eigh(hm)
        w = np.maximum(np.abs(w), 1e-10 * np.maximum(np.abs(w).max(1, keepdims=True), 1.0))
        step = -np.einsum("sij,sj->si", v, np.einsum("sji,sj->si", v, gf) / w)
        step *= np.minimum(1.0, MAX_STEP / np.maximum(np.abs(step).max(1), 1e-300))[:, None]
        small = -(gf * step).sum(1) < tol
        conv = small & fresh
        converged[idx[conv]] = True
        done[idx[conv]] = True
        exact[idx[small & ~fresh]] = True  # check with the exact Hessian before calling it converged
        todo = np.flatnonzero(~small)
        if not todo.size:
            continue
        if iterations[idx[todo]].max() >= max_iter:
            over = iterations[idx[todo]] >= max_iter
            done[idx[todo[over]]] = True
            todo = todo[~over]
            if not todo.size:
                continue
        iterations[idx[todo]] += 1
        sub2 = sub.take(todo) if todo.size < idx.size else sub
        x, g, d0, step = x[todo], g[todo], d0[todo], step[todo]
        new_x, new_dev, new_grad, accepted, pieces = _line_search(sub2, x, g, d0, step, to_gamma, grad_u)
        for local, piece, sel in pieces:
            scatter_point(last, idx[todo[local]], piece, sel)
        done[idx[todo[~accepted]]] = True  # no progress possible: judged below by the first-order conditions
        moved = idx[todo[accepted]]
        if moved.size:
            s_vec, y_vec = new_x[accepted] - x[accepted], new_grad[accepted] - g[accepted]
            u[moved], dev[moved], grad[moved] = new_x[accepted], new_dev[accepted], new_grad[accepted]
            quasi = ~exact[moved]
            if quasi.any():  # BFGS update where the curvature condition holds
                hb, sv, yv = hess_u[moved[quasi]], s_vec[quasi], y_vec[quasi]
                sy = (sv * yv).sum(1)
                bs = np.einsum("sij,sj->si", hb, sv)
                sbs = (sv * bs).sum(1)
                ok = (sy > 1e-12 * np.linalg.norm(sv, axis=1) * np.linalg.norm(yv, axis=1)) & (sbs > 0)
                upd = (yv[:, :, None] * yv[:, None, :] / np.where(ok, sy, 1.0)[:, None, None]
                       - bs[:, :, None] * bs[:, None, :] / np.where(ok, sbs, 1.0)[:, None, None])
                hess_u[moved[quasi]] = hb + np.where(ok[:, None, None], upd, 0.0)
    stale = ~converged  # the exact Hessian at the final point (for the df), where not already at hand
    if stale.any():
        idx = np.flatnonzero(stale)
        hess_u[idx] = fd_hessian(bt.take(idx), u[idx], grad[idx])
    gamma = to_gamma(u)
    # a study that stalled is still converged if it satisfies the first-order conditions closely
    c = np.exp(u) / scale                                  # d gamma / d u
    g_gamma = grad / c
    pg = projected_gradient(gamma, g_gamma)
    converged |= pg <= 1e-6
    diag = np.where(eye.astype(bool), (g_gamma * c)[:, :, None], 0.0)
    hess_gamma = (hess_u - diag) / (c[:, :, None] * c[:, None, :])
    free = (u > 0) | (grad < 0)  # the Hessian in u where known (NaN along the variables held at zero)
    return gamma, converged, iterations, hess_gamma, np.where(free[:, :, None] & free[:, None, :], hess_u, np.nan), last


def _line_search(bt: AnyBatch, x: np.ndarray, g: np.ndarray, d0: np.ndarray, step: np.ndarray, to_gamma, grad_u
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list]:
    """Armijo backtracking along the projected arc; the full step is tried with the gradient at once.

    Returns the new points, their deviance and gradient, whether a step was
    accepted, and the gradient evaluations at the new points as
    (rows, evaluation, rows of the evaluation) pieces.
    """
    m = x.shape[0]
    new_x, new_dev, new_grad = x.copy(), d0.copy(), g.copy()

    def armijo(dv: np.ndarray, rows: np.ndarray, trial: np.ndarray) -> np.ndarray:
        return np.isfinite(dv) & (dv <= d0[rows] + 1e-4 * (g[rows] * (trial - x[rows])).sum(1)
                                  + 1e-11 * np.maximum(np.abs(d0[rows]), 1.0))

    trial = np.maximum(x + step, 0.0)
    pt = evaluate(bt, to_gamma(trial), True)
    accepted = armijo(pt.dev, np.arange(m), trial)
    new_x[accepted], new_dev[accepted] = trial[accepted], pt.dev[accepted]
    new_grad[accepted] = grad_u(bt, pt, trial)[accepted]
    first = np.flatnonzero(accepted)
    pieces: list = [(first, pt, first)]
    alpha = np.full(m, 0.5)
    late = np.zeros(m, bool)
    tried = 0
    while tried < HALVINGS:
        rows = np.flatnonzero(~accepted)
        if not rows.size:
            break
        # the first halving alone; then the next few at once (one evaluation of stacked copies of the rows)
        r = 1 if tried == 0 else min(STACKED_HALVINGS, HALVINGS - tried)
        tried += r
        a = alpha[rows] * 0.5 ** np.arange(r)[:, None]                  # (r, rows): copy j tries alpha / 2^j
        trial = np.maximum(x[rows][None] + a[:, :, None] * step[rows][None], 0.0)
        sub = bt.take(rows)
        flat = trial.reshape(r * rows.size, -1)
        dv = evaluate(stacked(sub, r) if r > 1 else sub, to_gamma(flat), False).dev.reshape(r, rows.size)
        ok = armijo(dv.ravel(), np.tile(rows, r), flat).reshape(r, rows.size)
        first = np.where(ok.any(0), ok.argmax(0), -1)                   # the largest step accepted
        hit = first >= 0
        j, pick = first[hit], rows[hit]
        accepted[pick] = late[pick] = True
        new_x[pick], new_dev[pick] = trial[j, hit], dv[j, hit]
        alpha[rows[~hit]] *= 0.5 ** r
    rows = np.flatnonzero(late)
    if rows.size:
        sub = bt.take(rows)
        pt = evaluate(sub, to_gamma(new_x[rows]), True)
        new_grad[rows] = grad_u(sub, pt, new_x[rows])
        pieces.append((rows, pt, None))
    return new_x, new_dev, new_grad, accepted, pieces
