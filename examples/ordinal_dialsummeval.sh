#!/usr/bin/env bash
# The worked example of docs/ordinal_example.md: DialSummEval expert relevance ratings of
# A (reference), F (BART), H (UniLM), K (MV-BART) -> ordinal and Gaussian fits -> a crowd plan
# -> both analyses of the full expert data. Exactly the doc's commands, in its order.
# Run from the repository root:  bash examples/ordinal_dialsummeval.sh
# (HEPOWER_DATA: the data folder, default ../shared/data; OUT: where files go;
#  SIMS: simulated studies per plan cell, default 200 as in the doc; the test uses fewer;
#  BOOTSTRAP: the first ordinal analysis's Bartlett bootstrap draws, default the doc's (the CLI's 200);
#  the test uses fewer: it checks that analysis's contrasts, which do not depend on them)
# ~6 min on a loaded 2-core machine, nearly all of it the ordinal plan.
set -euo pipefail
SIMS=${SIMS:-200}

# --- the doc's commands (docs/ordinal_example.md) ---
DATA=${HEPOWER_DATA:-../shared/data}
RATINGS=$DATA/dialsummeval_expert/ratings.csv
OUT=${OUT:-/tmp/hepower-ordinal-example}; mkdir -p "$OUT"
PILOT="--where dimension=relevance --systems A F H K --baseline F"

# 1. fit
hepower fit "$RATINGS" --family ordinal $PILOT --backend laplace -o "$OUT/ordinal.json"
hepower fit "$RATINGS" $PILOT --backend statsmodels -o "$OUT/gaussian.json"

# 2. the latent scale in rating points
python - "$OUT/ordinal.json" <<'PY'
import sys
from humaneval_power.ordinal_process import OrdinalProcess
from humaneval_power.params import load_ordinal_params
p = OrdinalProcess.from_params(load_ordinal_params(sys.argv[1]))
print(f"mean rating of F for a new worker and item: {p.mean_rating(0.0):.3f}")
print(f"latent shift 0.44 = a mean-rating difference of {p.mean_difference(0.44):.3f}")
print(f"mean-rating difference 0.19 = a latent shift of {p.latent_shift(0.19):.3f}")
PY

# 3. plan a crowd study: 15 workers, 3 per item, 2 systems
hepower likert power --params "$OUT/ordinal.json" --comparison K --systems 2 --workers 15 \
    --ratings-per-item 3 --items 100 200 --effect 0.497 --sims "$SIMS" --seed 1
hepower likert power --params "$OUT/gaussian.json" --comparison K --systems 2 --workers 15 \
    --ratings-per-item 3 --items 100 200 --effect 0.19 --sims "$SIMS" --seed 1

# 4. analyse the full expert data both ways
hepower analyze "$RATINGS" --family ordinal --backend laplace $PILOT --out "$OUT/ordinal_contrasts.csv"${BOOTSTRAP:+ --bootstrap "$BOOTSTRAP"}
hepower analyze "$RATINGS" --backend statsmodels $PILOT --out "$OUT/gaussian_contrasts.csv"
python - "$OUT/gaussian_contrasts.csv" <<'PY'
import sys
import pandas as pd
from scipy.stats import norm
from humaneval_power.multiplicity import adjust_pvalues
c = pd.read_csv(sys.argv[1])
c["p_z"] = 2 * norm.sf(c.t.abs())
c["p_z_holm"] = adjust_pvalues(c.p_z.to_numpy(), "holm")
print(c[["system", "versus", "t", "df", "p_adjusted", "p_z", "p_z_holm"]].round(4).to_string(index=False))
PY

hepower analyze "$RATINGS" --family ordinal --backend laplace $PILOT --df asymptotic --bootstrap 0 \
    --out "$OUT/ordinal_contrasts_z.csv"

# 5. when is the linear model good enough: observed spread and end categories per system
python - "$RATINGS" <<'PY'
import sys
import pandas as pd
r = pd.read_csv(sys.argv[1])
r = r[(r.dimension == "relevance") & r.system.isin(["A", "F", "H", "K"])]
shares = pd.crosstab(r.system, r.score, normalize="index")
print(pd.concat([r.groupby("system").score.agg(["mean", "std"]), shares], axis=1).round(3).to_string())
PY
