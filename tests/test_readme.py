"""The README's quick start runs as written, and what it prints is right: inverse dynamics
equals Pinocchio's, forward dynamics returns the accelerations it started from, and the
estimate recovers the torques the sensor readings were simulated from."""
import os
import re

import numpy as np

from oracles import pin, pin_fext, pin_model, rel_err, to_pin_q


def test_readme_quick_start_runs():
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")
    with open(path, encoding="utf-8") as fh:
        code = re.search(r"```python\n(.*?)```", fh.read(), re.S).group(1)
    ns = {}
    exec(compile(code, "README.md", "exec"), ns)
    model, q, v, a, w = ns["model"], ns["q"], ns["v"], ns["a"], ns["w"]
    pm = pin_model(ns["models"].HUMANOID_URDF, True)
    pdata = pm.createData()
    tau_id = ns["plan"].solve(q[:3], v[:3], qdd=a[:3], f_ext=w)["tau"]
    for b in range(3):
        ref = pin.rnea(pm, pdata, to_pin_q(model, pm, q[b]), v[b], a[b], pin_fext(model, pm, w))
        assert rel_err(tau_id[b], ref) <= 1e-10
    assert ns["est"].ok.all()
    assert rel_err(ns["est"]["tau"], ns["tau"]) <= 1e-8          # the torques behind the readings
    assert ns["Lam_inv"].shape == (len(q), 12, 12)
    M = pin.crba(pm, pdata, to_pin_q(model, pm, q[0]))
    M = np.triu(M) + np.triu(M, 1).T                              # Pinocchio fills the upper part
    assert rel_err(ns["M"][0], M) <= 1e-10 and rel_err(ns["dtau_da"][0], M) <= 1e-10
    assert ns["res"]["qdd"].shape == (len(q), model.nv) and np.isfinite(ns["res"]["lambda"]).all()


def test_readme_per_sample_estimation_runs():
    """The per-sample section's block, run after the quick start: torques right, the lifted
    foot's wrench exactly zero."""
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")
    with open(path, encoding="utf-8") as fh:
        blocks = re.findall(r"```python\n(.*?)```", fh.read(), re.S)
    block = next(b for b in blocks if "per_sample=True" in b)
    ns = {}
    exec(compile(blocks[0], "README.md", "exec"), ns)
    exec(compile(block, "README.md", "exec"), ns)
    est, r_down = ns["est"], ns["r_down"]
    assert est.ok.all()
    assert rel_err(est["tau"], ns["tau"]) <= 1e-8
    assert np.all(est.wrench("r_foot")[~r_down] == 0.0)
