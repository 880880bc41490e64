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

# Logistic GLMM (Laplace), z tests; optional prior weights (tie splitting).
hepower_fit_glmm <- function(data, formula, weighted, intervals, nboot, seed) {
  warns <- new.env()
  assign("w", character(0), envir = warns)
  fit <- function() {
    if (weighted) lme4::glmer(as.formula(formula), data = data, family = binomial, weights = w)
    else lme4::glmer(as.formula(formula), data = data, family = binomial)
  }
  m <- .hepower_quiet(fit(), warns)
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
    criterion = -2 * as.numeric(logLik(m)),
    ci = ci
  )
}
