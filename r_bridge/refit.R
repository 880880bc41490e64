# R side of the lme4 backend: a refit loop that runs entirely inside R, so a
# power simulation costs one Python -> R call per chunk of simulated studies.
# Loaded by humaneval_power/fitting/lme4.py through rpy2.

suppressPackageStartupMessages({
  library(lme4)
  library(lmerTest)
})

# Fit `formula` to the first usable column of Y, then refit() it to every
# column. Returns an S x 6 matrix: estimate, se, df, singular, failed, warned
# for the coefficient named `coef`. df is Satterthwaite's (lmerTest) when
# `satterthwaite` is TRUE, else NA. Warnings are counted, never printed.
hepower_refit <- function(data, Y, formula, coef, reml, satterthwaite) {
  S <- ncol(Y)
  out <- matrix(NA_real_, nrow = S, ncol = 6,
                dimnames = list(NULL, c("estimate", "se", "df", "singular", "failed", "warned")))
  form <- as.formula(formula)
  fit <- NULL
  for (j in seq_len(S)) {
    warned <- FALSE
    res <- tryCatch(
      withCallingHandlers({
        if (is.null(fit)) {
          data$y <- Y[, j]
          m <- lme4::lmer(form, data = data, REML = reml)
        } else {
          m <- lme4::refit(fit, newresp = Y[, j])
        }
        if (satterthwaite) {
          ct <- lmerTest::contest1D(lmerTest::as_lmerModLmerTest(m),
                                    as.numeric(names(lme4::fixef(m)) == coef),
                                    ddf = "Satterthwaite")
          row <- c(ct[["Estimate"]], ct[["Std. Error"]], ct[["df"]])
        } else {
          row <- c(lme4::fixef(m)[[coef]], sqrt(vcov(m)[coef, coef]), NA_real_)
        }
        list(model = m, row = c(row, lme4::isSingular(m)))
      }, warning = function(w) {
        warned <<- TRUE
        invokeRestart("muffleWarning")
      }, message = function(msg) invokeRestart("muffleMessage")),
      error = function(e) NULL)
    if (is.null(res)) {
      out[j, "failed"] <- 1
    } else {
      if (is.null(fit)) fit <- res$model
      out[j, 1:4] <- res$row
      out[j, "failed"] <- 0
    }
    out[j, "warned"] <- as.numeric(warned)
  }
  out
}

hepower_versions <- function() {
  c(R = paste(R.version$major, R.version$minor, sep = "."),
    lme4 = as.character(packageVersion("lme4")),
    lmerTest = as.character(packageVersion("lmerTest")))
}
