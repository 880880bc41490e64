# Quickstart: `make demo` (power sweep on the built-in card2020-high preset)
# and `make test`. Both set everything up first, idempotently.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.hepower-installed
R_PACKAGES := r-base-dev $(shell grep -v "^#" r_bridge/DEPENDENCIES)
# CI (CI=true) runs the slow real-fit tests too; locally they are opt-in (`make test-all`).
PYTEST_SELECT ?= $(if $(CI),,-m "not slow")
PYTEST_JOBS ?= 2

.PHONY: setup r-setup sparse-setup chromium-setup latex-setup demo lint test test-all bench example wheel-check clean

# R + lme4 + lmerTest from Debian packages when possible; otherwise say why and go on
# (the lme4 backend and its tests then skip with that reason).
r-setup:
	@if Rscript -e 'quit(status = !all(sapply(c("lme4", "lmerTest", "emmeans", "pbkrtest", "ordinal", "psych", "multcompView"), requireNamespace, quietly = TRUE)))' >/dev/null 2>&1; then \
	  echo "R with lme4, lmerTest, emmeans, pbkrtest, ordinal, psych and multcompView: present"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "installing $(R_PACKAGES) with apt-get"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(R_PACKAGES) >/dev/null; \
	else \
	  echo "NOTE: cannot install R here (needs apt-get as root): the lme4 backend will be unavailable"; \
	fi

# SuiteSparse headers for scikit-sparse (CHOLMOD: the no-R backend's sparse path for large crossed designs);
# without them designs with more than vc_reml.SPARSE_ABOVE effects outside the largest factor need --backend lme4.
sparse-setup:
	@if [ -f /usr/include/suitesparse/cholmod.h ]; then echo "libsuitesparse-dev: present"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "installing libsuitesparse-dev with apt-get"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libsuitesparse-dev >/dev/null) \
	    || echo "NOTE: could not install libsuitesparse-dev: the no-R sparse path will be unavailable"; \
	else \
	  echo "NOTE: cannot install libsuitesparse-dev here (needs apt-get as root): the no-R sparse path will be unavailable"; \
	fi

# Debian's chromium for the browser tests of `hepower serve` (Playwright drives it; nothing is downloaded
# by Playwright itself); without it those tests skip with that reason.
chromium-setup:
	@if command -v chromium >/dev/null 2>&1; then echo "chromium: present"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "installing chromium with apt-get"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null) \
	    || echo "NOTE: could not install chromium: the browser tests will skip"; \
	else \
	  echo "NOTE: cannot install chromium here (needs apt-get as root): the browser tests will skip"; \
	fi

# Debian's pdflatex (texlive-latex-base + -recommended for booktabs) to check that `analyze --latex` tables
# compile; without it that one test skips with the reason.
latex-setup:
	@if command -v pdflatex >/dev/null 2>&1; then echo "pdflatex: present"; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
	  echo "installing texlive-latex-base texlive-latex-recommended with apt-get"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends texlive-latex-base texlive-latex-recommended >/dev/null) \
	    || echo "NOTE: could not install pdflatex: the LaTeX compile test will skip"; \
	else \
	  echo "NOTE: cannot install pdflatex here (needs apt-get as root): the LaTeX compile test will skip"; \
	fi

$(STAMP): pyproject.toml
	$(MAKE) --no-print-directory r-setup
	$(MAKE) --no-print-directory sparse-setup
	$(MAKE) --no-print-directory chromium-setup
	$(MAKE) --no-print-directory latex-setup
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,bayes,serve,dask]'
	@if command -v R >/dev/null 2>&1; then $(PY) -m pip install -q -e '.[r]'; \
	  else echo "NOTE: R not found: rpy2 not installed, lme4 backend unavailable"; fi
	@if [ -f /usr/include/suitesparse/cholmod.h ]; then $(PY) -m pip install -q -e '.[sparse]' \
	  || echo "NOTE: scikit-sparse did not build: the no-R sparse path is unavailable"; \
	  else echo "NOTE: SuiteSparse not found: scikit-sparse not installed, the no-R sparse path unavailable"; fi
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	mkdir -p out
	$(VENV)/bin/hepower likert power --preset card2020-high --workers 3 5 10 \
	  --items 25 50 100 200 400 800 --effect 0.1 0.2 0.3 0.4 --sims 2000 --seed 1 \
	  --out out/demo_power.csv --plot out/demo_power.png

# Quality gates (CI runs them): ruff and mypy on the package, configured in pyproject.toml.
lint: setup
	$(VENV)/bin/ruff check humaneval_power tests benchmarks examples
	$(VENV)/bin/mypy humaneval_power

test: setup
	$(PY) -m pytest -q --durations=25 -n $(PYTEST_JOBS) --dist loadgroup $(PYTEST_SELECT) tests --doctest-modules humaneval_power

test-all: setup
	$(MAKE) --no-print-directory test PYTEST_SELECT=

bench: setup
	$(PY) benchmarks/bench_cli.py
	$(PY) benchmarks/bench_likert.py
	$(PY) benchmarks/bench_fit.py
	$(PY) benchmarks/bench_h2h.py
	$(PY) benchmarks/bench_accuracy.py
	$(PY) benchmarks/bench_bleu.py
	$(PY) benchmarks/bench_crowd.py
	$(PY) benchmarks/bench_budget.py
	$(PY) benchmarks/bench_analyze.py
	$(PY) benchmarks/bench_scaleout.py

example: setup
	$(PY) examples/fig6_card2020.py
	$(PY) examples/fit_then_plan.py
	$(PY) examples/gsm8k_accuracy.py
	$(PY) examples/wmt23_bleu.py
	$(PY) examples/plan_crowd_amt.py
	$(PY) examples/plan_with_assurance.py
	$(PY) examples/analyze_dialsummeval.py

# Build the wheel and run it from a fresh venv outside the repository (CI runs this too).
wheel-check: setup
	PYTHON=$(PY) bash .ci/wheel-check

clean:
	rm -rf $(VENV) out .pytest_cache
