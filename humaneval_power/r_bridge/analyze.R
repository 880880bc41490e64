# R side of `hepower analyze` with the lme4 backend: one REML fit by lmerTest, returned with
# everything lmerTest's contest1D / contestMD use, so that the contrasts, the F test and their
# Satterthwaite df are computed from the same quantities in Python (for either backend).
# With kenward_roger = TRUE also pbkrtest's adjusted covariance (vcovAdj, what emmeans'
# lmer.df = "kenward-roger" and lmerTest's ddf = "Kenward-Roger" use) with its P list and W matrix,
# from which Python computes pbkrtest's Lb_ddf and KRmodcomp.
# Loaded on demand by humaneval_power/completed_study/backends.py (lme4_inference), after fit.R.

hepower_analyze_lmm <- function(data, formula, kenward_roger = FALSE) {
  warns <- new.env()
  assign("w", character(0), envir = warns)
  m <- .hepower_quiet(lmerTest::lmer(as.formula(formula), data = data, REML = TRUE), warns)
  out <- hepower_extract_lmm(m, "none", 0L, 0L, warns)
  out$beta <- as.numeric(m@beta)
  out$vcov_beta <- as.numeric(as.matrix(m@vcov_beta))
  out$jac <- as.numeric(unlist(lapply(m@Jac_list, as.numeric)))
  out$n_jac <- length(m@Jac_list)
  if (kenward_roger) {
    adj <- pbkrtest::vcovAdj(m)
    out$vcov_adj <- as.numeric(as.matrix(adj))
    out$kr_p <- as.numeric(unlist(lapply(attr(adj, "P"), function(x) as.numeric(as.matrix(x)))))
    out$kr_w <- as.numeric(as.matrix(attr(adj, "W")))
    out$kr_n <- length(attr(adj, "P"))
  }
  out
}
