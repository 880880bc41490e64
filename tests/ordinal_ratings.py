"""Simulated ordinal ratings shared by the tests of ``analyze --family ordinal``."""
from __future__ import annotations

import numpy as np
import pandas as pd

from humaneval_power.designs import CrowdDesign
from humaneval_power.ordinal_process import OrdinalProcess


def simulated_ratings(seed: int = 26, link: str = "probit", workers: int = 8, items: int = 10) -> pd.DataFrame:
    """Ratings 1-5 of three systems (latent effects 0, 0.5, 0.9), every worker rating every item under each."""
    process = OrdinalProcess((-1.2, -0.3, 0.5, 1.3), link, sd_worker=0.6, sd_worker_system=0.3, sd_item=0.7,
                             sd_item_system=0.3)
    rng = np.random.default_rng(seed)
    layout = CrowdDesign(items=items, workers=workers, systems=3).draw(rng, 1)
    assert not isinstance(layout, list)
    y = process.simulate(layout, np.array([0.0, 0.5, 0.9]), 1, rng)[:, 0]
    worker = np.asarray(layout.worker).reshape(-1)
    return pd.DataFrame({"worker": [f"w{w}" for w in worker], "item": [f"i{i}" for i in layout.item],
                         "system": [f"S{s}" for s in layout.system], "score": y})
