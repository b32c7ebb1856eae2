"""Reading what `sparsedyn estimate` / estimate_log wrote, CSV or NPZ, for the tests."""
from __future__ import annotations

import numpy as np


def read_estimate(path, nv, wrench_link=None):
    """{"tau" (rows, nv), "ok", "row" (if written), "wrench" (rows, 6) of wrench_link}."""
    path = str(path)
    if path.endswith(".npz"):
        res = np.load(path)
        out = {"tau": res["tau"], "ok": res["ok"]}
        if "row" in res.files:
            out["row"] = res["row"]
        if wrench_link is not None:
            out["wrench"] = res[f"wrench_{wrench_link}"]
        return out
    res = np.genfromtxt(path, delimiter=",", names=True)
    out = {"tau": np.column_stack([res[f"tau_{k}"] for k in range(nv)]), "ok": res["ok"]}
    if "row" in res.dtype.names:
        out["row"] = res["row"]
    if wrench_link is not None:
        out["wrench"] = np.column_stack([res[f"{wrench_link}_wrench_{k}"] for k in range(6)])
    return out
