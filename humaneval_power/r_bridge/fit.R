# R side of `hepower fit` with the lme4 backend: one fit of a crossed mixed
# model, returned as plain vectors (rpy2 needs no converters for them).
# Loaded by humaneval_power/fitting/lme4.py.

.hepower_quiet <- function(expr, warns) {
  # Evaluate expr, collecting warnings (never printed) and muffling messages.
  withCallingHandlers(expr,
    warning = function(w) {
      assign("w", c(get("w", envir = warns), conditionMessage(w)), envir = warns)
      invokeRestart("muffleWarning")
    },
    message = function(msg) invokeRestart("muffleMessage"))
}

.hepower_varcorr <- function(m) {
  vc <- as.data.frame(lme4::VarCorr(m))
  list(grp = as.character(vc$grp),
       var1 = ifelse(is.na(vc$var1), "", as.character(vc$var1)),
       var2 = ifelse(is.na(vc$var2), "", as.character(vc$var2)),
       sdcor = as.numeric(vc$sdcor))
}

.hepower_ci <- function(m, intervals, nboot, seed) {
  if (intervals == "profile") {
    ci <- confint(m, parm = "theta_", method = "profile", oldNames = FALSE)
  } else if (intervals == "boot") {
    ci <- confint(m, parm = "theta_", method = "boot", nsim = nboot, oldNames = FALSE, seed = seed)
  } else {
    return(NULL)
  }
  list(name = rownames(ci), lower = as.numeric(ci[, 1]), upper = as.numeric(ci[, 2]))
}

# Gaussian LMM, REML or ML, Satterthwaite tests (lmerTest).
hepower_fit_lmm <- function(data, formula, reml, intervals, nboot, seed) {
  warns <- new.env()
  assign("w", character(0), envir = warns)
  m <- .hepower_quiet(lmerTest::lmer(as.formula(formula), data = data, REML = reml), warns)
  .hepower_extract_lmm(m, intervals, nboot, seed, warns)
}

# Everything `hepower fit` reports from a fitted lmerMod (also one fitted elsewhere, e.g. by pymer4).
hepower_extract_lmm <- function(m, intervals, nboot, seed, warns = NULL) {
  if (is.null(warns)) {
    warns <- new.env()
    assign("w", character(0), envir = warns)
  }
  if (!inherits(m, "lmerModLmerTest")) m <- .hepower_quiet(lmerTest::as_lmerModLmerTest(m), warns)
  reml <- lme4::isREML(m)
  co <- summary(m)$coefficients
  ci <- .hepower_quiet(.hepower_ci(m, intervals, nboot, seed), warns)
  vv <- m@vcov_varpar
  list(
    coef_names = rownames(co),
    coef = as.numeric(co),  # column-major: Estimate, Std. Error, df, t value, Pr(>|t|)
    varcorr = .hepower_varcorr(m),
    theta = as.numeric(lme4::getME(m, "theta")),
    theta_names = names(lme4::getME(m, "theta")),
    sigma = sigma(m),
    vcov_varpar = if (length(vv)) as.numeric(vv) else numeric(0),
    singular = lme4::isSingular(m),
    warnings = get("w", envir = warns),
    criterion = as.numeric(if (reml) lme4::REMLcrit(m) else deviance(m)),
    ci = ci
  )
}

.hepower_extract_lmm <- hepower_extract_lmm

# Logistic GLMM (Laplace), z tests. Scores of 1/2 (split ties) are fitted as
# cbind(2 * score, 2 - 2 * score) with prior weight 1/2: the log-likelihood of a
# judgment is then score * eta - log(1 + exp(eta)) (a tie = half a win plus half a
# loss), which glmer computes exactly; 0/1 rows with weights 1/2 would not (its
# binomial deviance rounds non-integer counts). The criterion drops the binomial
# coefficient log(2)/2 per tie, so it is -2 * that weighted log-likelihood.
hepower_fit_glmm <- function(data, formula, intervals, nboot, seed) {
  warns <- new.env()
  assign("w", character(0), envir = warns)
  n_half <- sum(data$score != round(data$score))
  f <- as.formula(formula)
  if (n_half > 0) {
    data$hepower_s2 <- 2 * data$score
    data$hepower_half <- rep(0.5, nrow(data))
    f <- update(f, cbind(hepower_s2, 2 - hepower_s2) ~ .)
    m <- .hepower_quiet(lme4::glmer(f, data = data, family = binomial, weights = hepower_half), warns)
  } else {
    m <- .hepower_quiet(lme4::glmer(f, data = data, family = binomial), warns)
  }
  # quasi-separation shows as conditional fitted probabilities at 0 or 1 (|eta| > 13.8)
  extreme <- sum(pmin(fitted(m), 1 - fitted(m)) < 1e-6)
  if (extreme > 0) {
    assign("w", c(get("w", envir = warns), sprintf(
      "%d of %d fitted probabilities numerically 0 or 1 (within 1e-6)", extreme, nrow(data))), envir = warns)
  }
  co <- summary(m)$coefficients  # Estimate, Std. Error, z value, Pr(>|z|)
  ci <- .hepower_quiet(.hepower_ci(m, intervals, nboot, seed), warns)
  list(
    coef_names = rownames(co),
    coef = as.numeric(co),
    varcorr = .hepower_varcorr(m),
    theta = as.numeric(lme4::getME(m, "theta")),
    theta_names = names(lme4::getME(m, "theta")),
    singular = lme4::isSingular(m),
    warnings = get("w", envir = warns),
    criterion = -2 * (as.numeric(logLik(m)) - n_half * log(2) / 2),
    ci = ci
  )
}
