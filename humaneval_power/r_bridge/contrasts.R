# lme4 + lmerTest refits for one contrast vector L (not only one named coefficient), with the
# REML/ML criterion, so that a fast solver can be checked against lme4 study by study.
# Loaded on demand (tests, benchmarks) after refit.R, whose .hepower_loop it reuses.

suppressPackageStartupMessages({
  library(lme4)
  library(lmerTest)
})

# Fit `formula` to every column of Y. `L`: contrast over the fixed effects (model-matrix order).
# `varying`: NULL, or a named list of N x S integer matrices, each replacing that column of
# `data` (as a factor) study by study (e.g. a random worker assignment drawn anew per study).
# `start`: NULL, or a K x S matrix of relative SDs to start lme4 from, row k for the random term
# on grouping column g{k-1} (lme4 orders its terms by number of levels; mapped here).
# Returns an S x 8 matrix: estimate, se, df, singular, criterion (REMLcrit or deviance),
# sigma, failed, warned.
hepower_refit_contrast <- function(data, Y, formula, L, reml, varying = NULL, start = NULL) {
  form <- as.formula(formula)
  j <- 0
  fit_one <- function(d) {
    if (is.null(start)) {
      m <- lme4::lmer(form, data = d, REML = reml)
    } else {
      terms <- names(lme4::lFormula(form, data = d, REML = reml)$reTrms$cnms)
      theta <- start[as.integer(sub("^g", "", terms)) + 1, j]
      m <- lme4::lmer(form, data = d, REML = reml, start = list(theta = theta))
    }
    ct <- lmerTest::contest1D(lmerTest::as_lmerModLmerTest(m), L, ddf = "Satterthwaite")
    crit <- if (reml) lme4::REMLcrit(m) else deviance(m)
    c(ct[["Estimate"]], ct[["Std. Error"]], ct[["df"]], lme4::isSingular(m), crit, sigma(m))
  }
  cols <- c("estimate", "se", "df", "singular", "criterion", "sigma")
  if (is.null(varying) && is.null(start)) return(.hepower_loop(data, Y, cols, fit_one))
  out <- NULL
  for (j in seq_len(ncol(Y))) {
    for (name in names(varying)) data[[name]] <- factor(varying[[name]][, j])
    row <- .hepower_loop(data, Y[, j, drop = FALSE], cols, fit_one)
    out <- rbind(out, row)
  }
  out
}
