"""The R side of the lme4 backend: R sources loaded into R through rpy2 (package data).

``fit.R`` fits pilot data (lmer/glmer + lmerTest); ``refit.R`` is the refit loop of the
simulation tiers (``hepower_refit``: any contrast, optionally per-study factor columns and
start values; ``hepower_refit_glmm``); ``analyze.R`` and ``clmm.R`` serve the completed-study
analysis and the ordinal fits. The R packages they need are listed in the repository's
``r_bridge/DEPENDENCIES`` (Debian package names).
"""
