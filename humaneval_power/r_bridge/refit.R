# R side of the lme4 backend: a fitting loop that runs entirely inside R, so a
# power simulation costs one Python -> R call per chunk of simulated studies.
# Loaded by humaneval_power/fitting/lme4.py through rpy2.
#
# Why lmer() per response and not lme4::refit(): with lme4 1.1-31 and the
# (1 + x || worker) + (1 + x || item) model, refit(newresp = y) returned a
# different optimum (REML criterion 59.74 vs 60.71, SE 0.07326 vs 0.07297)
# than lmer() on the same data, and lmerTest rebuilds its deviance function
# from the model call, i.e. from the *original* response. tests/test_lme4.py
# checks every fit of this loop against the closed-form REML/ML fit.

suppressPackageStartupMessages({
  library(lme4)
  library(lmerTest)
})

# The loop shared by every simulation backend: for each column of Y, put it in
# data$y, call fit_one(data) (which returns the first columns of the row) and
# record failures (errors) and warnings (counted, never printed).
.hepower_loop <- function(data, Y, columns, fit_one) {
  S <- ncol(Y)
  k <- length(columns)
  out <- matrix(NA_real_, nrow = S, ncol = k + 2, dimnames = list(NULL, c(columns, "failed", "warned")))
  for (j in seq_len(S)) {
    warned <- FALSE
    data$y <- Y[, j]
    res <- tryCatch(
      withCallingHandlers(fit_one(data), warning = function(w) {
        warned <<- TRUE
        invokeRestart("muffleWarning")
      }, message = function(msg) invokeRestart("muffleMessage")),
      error = function(e) NULL)
    if (is.null(res)) {
      out[j, "failed"] <- 1
    } else {
      out[j, seq_len(k)] <- res
      out[j, "failed"] <- 0
    }
    out[j, "warned"] <- as.numeric(warned)
  }
  out
}

# Fit `formula` (Gaussian LMM) to every column of Y: the one refit path of the lme4 tier.
# `L`: a coefficient's name, or a contrast over the fixed effects (model-matrix order); the estimate,
# SE and (when `satterthwaite`) lmerTest's Satterthwaite df of L'b, else df NA.
# `varying`: NULL, or a named list of N x S integer matrices, each replacing that column of `data`
# (as a factor) study by study (e.g. a random worker assignment drawn anew per study).
# `start`: NULL, or a K x S matrix of relative SDs to start lme4 from, row k for the random term on
# grouping column g{k-1} (lme4 orders its terms by number of levels; mapped here).
# Returns an S x 8 matrix: estimate, se, df, singular, criterion (REMLcrit or deviance), sigma,
# failed, warned.
hepower_refit <- function(data, Y, formula, L, reml, satterthwaite, varying = NULL, start = NULL) {
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
    if (is.character(L)) L <- as.numeric(names(lme4::fixef(m)) == L)
    if (satterthwaite) {
      ct <- lmerTest::contest1D(lmerTest::as_lmerModLmerTest(m), L, ddf = "Satterthwaite")
      row <- c(ct[["Estimate"]], ct[["Std. Error"]], ct[["df"]])
    } else {
      row <- c(sum(lme4::fixef(m) * L), sqrt(drop(t(L) %*% as.matrix(vcov(m)) %*% L)), NA_real_)
    }
    crit <- if (reml) lme4::REMLcrit(m) else deviance(m)
    c(row, lme4::isSingular(m), crit, sigma(m))
  }
  cols <- c("estimate", "se", "df", "singular", "criterion", "sigma")
  if (is.null(varying) && is.null(start)) return(.hepower_loop(data, Y, cols, fit_one))
  out <- NULL
  for (j in seq_len(ncol(Y))) {
    for (name in names(varying)) data[[name]] <- factor(varying[[name]][, j])
    out <- rbind(out, .hepower_loop(data, Y[, j, drop = FALSE], cols, fit_one))
  }
  out
}

# Logistic GLMM y ~ 1 + (1 | worker) + (1 | item) fitted to every column of Y.
# Returns an S x 6 matrix: estimate, se, p_lrt (NA unless lrt), singular, failed, warned.
# The LRT compares with the model whose intercept is fixed at 0 (log-odds 0: no preference).
# A judgment's y is 1 (B won), 0 (lost), NA (a dropped tie) or 1/2 (a split tie: half a win and half a
# loss, the weighted likelihood of fit.R: cbind(2y, 2 - 2y) at prior weight 1/2).
hepower_refit_glmm <- function(data, Y, lrt) {
  .hepower_loop(data, Y, c("estimate", "se", "p_lrt", "singular"), function(d) {
    glmm <- function(f) {
      if (!any(d$y == 0.5, na.rm = TRUE)) return(lme4::glmer(f, data = d, family = binomial))
      d$hepower_s2 <- 2 * d$y
      d$hepower_half <- rep(0.5, nrow(d))
      lme4::glmer(update(f, cbind(hepower_s2, 2 - hepower_s2) ~ .), data = d, family = binomial,
                  weights = hepower_half)
    }
    m <- glmm(y ~ 1 + (1 | worker) + (1 | item))
    p <- NA_real_
    if (lrt) {
      m0 <- glmm(y ~ 0 + (1 | worker) + (1 | item))
      stat <- max(2 * (as.numeric(logLik(m)) - as.numeric(logLik(m0))), 0)
      p <- pchisq(stat, df = 1, lower.tail = FALSE)
    }
    c(lme4::fixef(m)[[1]], sqrt(vcov(m)[1, 1]), p, lme4::isSingular(m))
  })
}

hepower_versions <- function() {
  c(R = paste(R.version$major, R.version$minor, sep = "."),
    lme4 = as.character(packageVersion("lme4")),
    lmerTest = as.character(packageVersion("lmerTest")))
}

