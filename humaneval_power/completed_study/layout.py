"""How a completed study's ratings are laid out: what the model refuses to analyse, and the design table."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import InputError
from ..fitting.ratings import PilotData


def check_data(data: PilotData) -> None:
    """Refuse what the model cannot analyse (beyond :func:`~humaneval_power.fitting.ratings.read_ratings`' checks)."""
    f = data.frame
    per_system = f.groupby("system").size()
    single = sorted(per_system.index[per_system < 2])
    if single:
        raise InputError(f"system(s) with a single rating: {', '.join(single)}; a system needs several ratings")
    if f["score"].nunique() == 1:
        raise InputError(f"every score is {f['score'].iloc[0]:g}: constant scores have no variance to analyse")
    groups = _connected_groups(f)
    if len(groups) > 1:
        raise InputError("the system comparison is disconnected: no item or worker links "
                         + " | ".join(", ".join(g) for g in groups)
                         + "; their differences would rest on between-item comparisons alone")


def _connected_groups(frame: pd.DataFrame) -> list[list[str]]:
    """Systems grouped by the items and workers they share (one group: the comparison is connected)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    sys_codes, systems = pd.factorize(frame["system"], sort=True)
    k = len(systems)
    nodes = [sys_codes]
    offset = k
    for role in ("item", "worker"):
        codes, levels = pd.factorize(frame[role])
        nodes.append(codes + offset)
        offset += len(levels)
    rows = np.concatenate([sys_codes, sys_codes])
    cols = np.concatenate(nodes[1:])
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(offset, offset))
    _, labels = connected_components(graph, directed=False)
    out: dict[int, list[str]] = {}
    for s, lab in zip(systems, labels[:k]):
        out.setdefault(int(lab), []).append(str(s))
    return list(out.values())


def design_summary(data: PilotData) -> pd.DataFrame:
    """How the ratings are laid out: counts, ratings per item / worker / output, crossing, connectedness."""
    f = data.frame

    def spread(counts: pd.Series) -> str:
        return f"{counts.min()}-{counts.max()} (median {counts.median():g})"

    k = len(data.systems)
    per_output = f.groupby(["item", "system"]).size()
    items_per_system = f.groupby("system")["item"].nunique()
    systems_per_worker = f.groupby("worker")["system"].nunique()
    repeats = int(f.duplicated(["worker", "item", "system"]).sum())  # --duplicates keep
    if len(f) - repeats == f["worker"].nunique() * f["item"].nunique() * k:
        crossing = "fully crossed: every worker rated every system on every item"
    elif (systems_per_worker == k).all():
        crossing = "every worker rated every system, but not every item"
    else:
        crossing = (f"{int((systems_per_worker > 1).sum())} of {len(systems_per_worker)} workers rated more than "
                    "one system")
    if repeats:
        crossing += f"; {repeats} repeated ratings of a (worker, item, system), kept as independent ratings"
    by_items = len(_connected_groups(f.assign(worker=f["item"])))  # items alone
    rows = [
        ("ratings", len(f)), ("systems", k), ("workers", f["worker"].nunique()), ("items", f["item"].nunique()),
        ("ratings per item", spread(f.groupby("item").size())),
        ("ratings per worker", spread(f.groupby("worker").size())),
        ("ratings per item x system output", spread(per_output)),
        ("workers per item", spread(f.groupby("item")["worker"].nunique())),
        ("systems per worker", spread(systems_per_worker)),
        ("items per system", spread(items_per_system)),
        ("crossing", crossing),
        ("connected", "yes" + (" (through shared items)" if by_items == 1 else " (through shared workers only)")),
    ]
    return pd.DataFrame({"name": [r[0] for r in rows], "value": [str(r[1]) for r in rows]})
