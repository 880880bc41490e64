"""lme4 (or lmerTest) typed directly in R on the raw factors of a pilot (no contrast columns of ours): the reference
of the Gaussian fits (``tests/test_fit_multisystem.lmertest``: with ``package="lmerTest"``)."""
from __future__ import annotations

import numpy as np


def lme4_typed_directly(data, formula: str, package: str = "lme4") -> dict:
    """``lme4::lmer(formula)`` (REML) on the pilot's factors: per later system its estimate, SE and t value
    (``package="lmerTest"``: also lmerTest's Satterthwaite df and p-value, from its numerical derivatives); the SDs
    by group (and "Residual"); the REML criterion. ``calc.derivs = FALSE``: lme4's post-fit finite-difference
    derivatives only feed its convergence warnings (the optimum is unchanged)."""
    from humaneval_power.fitting.lme4 import r_data_frame, r_session

    ro = r_session()
    f = data.frame
    codes = {s: k + 1 for k, s in enumerate(data.systems)}  # level "1" (the baseline) sorts first
    ro.globalenv["hp_df"] = r_data_frame({
        "worker": np.unique(f["worker"], return_inverse=True)[1] + 1,
        "item": np.unique(f["item"], return_inverse=True)[1] + 1,
        "system": f["system"].map(codes).to_numpy(int), "score": f["score"].to_numpy(float)})
    ro.r(f"hp_m <- {package}::lmer({formula}, data = hp_df, control = lme4::lmerControl(calc.derivs = FALSE))")
    ro.r("hp_s <- summary(hp_m)$coefficients")
    co = np.array(ro.r("hp_s"))
    names = list(ro.r("rownames(hp_s)"))
    vc = ro.r("as.data.frame(lme4::VarCorr(hp_m))")
    by_system = {data.systems[int(n[len("system"):]) - 1]: row for n, row in zip(names, co) if n.startswith("system")}
    return {"coef": by_system, "sd": dict(zip(vc.rx2("grp"), vc.rx2("sdcor"))),
            "reml": float(ro.r("lme4::REMLcrit(hp_m)")[0])}
