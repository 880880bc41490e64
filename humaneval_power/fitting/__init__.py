"""Model fitting backends (lme4 through rpy2; statsmodels)."""
