# R side of `hepower analyze` with the lme4 backend: one REML fit by lmerTest, returned with
# everything lmerTest's contest1D / contestMD use, so that the contrasts, the F test and their
# Satterthwaite df are computed from the same quantities in Python (for either backend).
# Loaded on demand by humaneval_power/fitting/lmer_inference.py, after fit.R.

hepower_analyze_lmm <- function(data, formula) {
  warns <- new.env()
  assign("w", character(0), envir = warns)
  m <- .hepower_quiet(lmerTest::lmer(as.formula(formula), data = data, REML = TRUE), warns)
  out <- hepower_extract_lmm(m, "none", 0L, 0L, warns)
  out$beta <- as.numeric(m@beta)
  out$vcov_beta <- as.numeric(as.matrix(m@vcov_beta))
  out$jac <- as.numeric(unlist(lapply(m@Jac_list, as.numeric)))
  out$n_jac <- length(m@Jac_list)
  out
}
