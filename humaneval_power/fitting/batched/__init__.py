"""Batched (RE)ML fits of many simulated studies of one design: lme4's criterion, lmerTest's Satterthwaite df.

Model: ``y = X b + sum_k Z_k u_k + e``, ``u_k ~ N(0, g_k s^2 I)``, ``e ~ N(0, s^2 I)``,
each ``Z_k`` with one nonzero per row (a random intercept, or a slope on a
covariate). The criterion is lme4's profiled deviance (:mod:`..criterion`, the
one criterion shared with the one-study solver :mod:`..vc_reml`). What differs
is the bookkeeping, chosen so that the cost of one evaluation does not grow
with the number of items:

* the random effects split into *blocks* (one per level of a blocking factor,
  usually the item: its intercept and its item:system effects) and *outer*
  effects (workers, worker:system: a few dozen). ``H_A = I + Z_A G_A Z_A'``
  is block diagonal; the outer effects enter through the Schur complement
  ``S = I + L_C R L_C``, ``R = Z_C' H_A^-1 Z_C``.
* blocks with the same cross-product ``G_b = Z_b'Z_b`` form a *class* (in
  the crowd designs all items form one class). With ``Phi_c = L_b (I + L_b G_b L_b)^-1 L_b``
  every quantity of the deviance and its gradient is a contraction of a few
  small design tensors (``K_c[e,f] = sum_b Z_C'z_be z_bf'Z_C``) and per-study
  tensors (``Q_c``, ``T_c``: sums over blocks of products with ``Z_b'[X y]``)
  with ``Phi_c``: after one pass over the data per study, an evaluation costs
  ``O(t^2 q2^2 + q2^3)``, ``t`` the block size and ``q2`` the outer effects.

All studies are iterated at once: a projected Newton method on the relative
variances ``g >= 0`` (the Hessian by forward differences of the exact
gradient, its K steps of all studies in one stacked evaluation; Armijo
backtracking on the projected arc). Satterthwaite df follow
lmerTest: ``A = 2 H^-1`` (positive eigenvalues of the Hessian of the
deviance in ``varpar = (theta, sigma)``, here by central differences of the
exact gradient), ``df = 2 v^2 / (grad v' A grad v)``; components at zero drop
out because ``v`` depends on ``theta_k`` through ``theta_k^2``.

Designs whose outer levels differ between studies (a random worker
assignment drawn anew per study) are fitted the same way with per-study
design tensors; the blocking factor must then be the same for all studies.

When the classes are many (a pilot's own layout: every item its own class;
missing ratings, given as per-study 0/1 row ``weights`` so that all studies
share one shape) the blocks are evaluated one by one instead, each on its
*support* (the few outer effects its rows touch): ``R`` and ``Z_C'H_A^-1 w``
are scatter-adds of ``t x s`` products, the gradient gathers ``Y`` on the
supports; the evaluation is chosen by an operation count, the blocking
factor (item or worker) by the smaller Schur complement, outer levels that
never occur are dropped, and a large ``S`` is factored by LAPACK's Cholesky.

Limits: the cost grows with
``q2^3`` (worker effects ``W (1 + S)``: fine up to a few hundred); per-study
designs carry ``t^2 q2^2`` numbers per study and cost ~3x a shared design.
Components are independent (no correlated random effects); ``x`` must have
full column rank.

The modules follow lme4's stages: :mod:`.structure` (the components, blocks,
classes and design tensors), :mod:`.deviance` (per-study statistics, the
criterion and its gradient), :mod:`.optimizer` (projected Newton),
:mod:`.inference` (lmerTest's Satterthwaite df of contrasts), :mod:`.driver`
(:func:`fit_many`: chunks of studies through them all) and :mod:`.reference`
(the same fits by lme4 + lmerTest through :func:`..lme4.refit_many`).
"""
from __future__ import annotations

from .driver import SINGULAR_TOL, BatchFit, fit_many
from .reference import lme4_formula, refit_lme4
from .structure import Component, ComponentDesign

__all__ = ["SINGULAR_TOL", "BatchFit", "Component", "ComponentDesign", "fit_many", "lme4_formula", "refit_lme4"]
