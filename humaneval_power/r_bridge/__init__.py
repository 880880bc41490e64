"""The R side of the lme4 backend: R sources loaded into R through rpy2 (package data).

``fit.R`` fits pilot data (lmer/glmer + lmerTest); ``refit.R`` is the batched
refit loop of the simulation tiers. The R packages they need are listed in the
repository's ``r_bridge/DEPENDENCIES`` (Debian package names).
"""
