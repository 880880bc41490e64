# R side of the clmm backend (humaneval_power/fitting/clmm_r.py): one ordinal::clmm fit.
# data: y (integer ratings), x1..xp (numeric design columns), g1..gm (grouping factors).
# levels: the scale's ratings (all of them, in order); tight: tighter optimiser tolerances
# (inner gradTol 1e-8, nlminb rel.tol 1e-12) than clmm's defaults; hess: clmm's Hessian (the covariance);
# without it the estimates and likelihood are the same and the covariance NA (~35% of a fit saved).

suppressPackageStartupMessages(library(ordinal))

hepower_fit_clmm <- function(data, formula, levels, link, tight, hess = TRUE) {
  data$y <- factor(data$y, levels = levels, ordered = TRUE)
  for (g in grep("^g[0-9]+$", names(data), value = TRUE)) data[[g]] <- factor(data[[g]])
  ctrl <- if (tight) clmm.control(gradTol = 1e-8, rel.tol = 1e-12) else clmm.control()
  warnings <- character(0)
  m <- withCallingHandlers(
    clmm(as.formula(formula), data = data, link = link, Hess = hess, control = ctrl),
    warning = function(w) {
      warnings <<- c(warnings, conditionMessage(w))
      invokeRestart("muffleWarning")
    })
  fe <- c(names(m$alpha), names(m$beta))
  V <- if (hess) vcov(m) else matrix(NA_real_, length(fe), length(fe), dimnames = list(fe, fe))
  st <- paste0("ST", seq_along(m$ST))  # vcov has the SDs not at the boundary, named ST<k> in the order of m$ST
  sd_var <- vapply(st, function(k) if (k %in% rownames(V)) V[k, k] else NA_real_, 0)
  list(alpha = unname(m$alpha), beta = unname(m$beta), beta_names = names(m$beta),
       sd = vapply(m$ST, function(s) s[1, 1], 0), sd_names = names(m$ST),
       sd_var = unname(sd_var), loglik = as.numeric(logLik(m)), vcov = V[fe, fe, drop = FALSE],
       convergence = m$optRes$convergence, message = m$optRes$message,
       max_grad = max(abs(m$gradient)), niter = m$optRes$iterations, warnings = warnings,
       version = as.character(packageVersion("ordinal")))
}
