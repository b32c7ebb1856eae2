"""A million-sample sensor log through `sparsedyn estimate` (issue #4: logs at scale).

Writes a log of 1,000,000 samples (humanoid; joint accelerations and both ankle F/T sensors;
unknown wrenches at the soles and the chest) as memory-mapped .npy files, runs the
`sparsedyn estimate` command on it, checks every estimated torque against the torques the
readings were simulated from, and prints the wall time and peak RSS of the estimate run.
Inputs are memory-mapped and outputs streamed batch by batch to temporary files, so anonymous
memory stays bounded by the batch size; RSS also counts the file pages the kernel maps in.

    python experiments/million_sample_log.py [--samples 1000000] [--dir /tmp/sparsedyn_log]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

import sparsedyn as sd
from sparsedyn import sensors as S
from sparsedyn.files import atomic_write


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1_000_000)
    ap.add_argument("--dir", default="/tmp/sparsedyn_log")
    args = ap.parse_args()
    model = sd.models.humanoid()
    log = os.path.join(args.dir, "log")
    os.makedirs(log, exist_ok=True)
    rng = np.random.default_rng(0)
    base = min(20000, args.samples)              # distinct true states, tiled over the log
    q = model.random_configuration(rng, batch=base)
    v = rng.normal(size=(base, model.nv))
    w = {link: rng.normal(size=(base, 6)) * 30 for link in ("l_sole", "r_sole", "chest")}
    tau = rng.normal(size=(base, model.nv))
    tau[:, :6] = 0.0                             # unactuated floating base
    qdd = sd.aba(model, q, v, tau, f_ext=w)
    sensors = [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor"), S.ForceTorque("r_foot_ft_sensor")]
    truth = S.ground_truth(model, q, v, qdd, f_ext=w)
    columns = {"q": q, "v": v, **{s.name: s.simulate(model, q, v, truth) for s in sensors}}
    for name, block in columns.items():
        mm = np.lib.format.open_memmap(os.path.join(log, f"{name}.npy"), mode="w+",
                                       shape=(args.samples, block.shape[1]))
        for start in range(0, args.samples, base):
            mm[start:start + base] = block[:min(base, args.samples - start)]
        mm.flush()
        del mm
    spec = {"model": "humanoid", "floating_base": True,
            "sensors": [{"type": "JointAccelerations"}, {"type": "ForceTorque", "joint": "l_foot_ft_sensor"},
                        {"type": "ForceTorque", "joint": "r_foot_ft_sensor"}],
            "unknown_wrenches": list(w)}
    spec_path = os.path.join(args.dir, "spec.json")
    with atomic_write(spec_path, "w") as fh:
        json.dump(spec, fh)
    out = os.path.join(args.dir, "estimates.npz")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sparsedyn", "estimate", spec_path, log, out,
                    "--batch-size", "4096", "--no-progress"], check=True)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    est = np.load(out, mmap_mode="r")
    err = max(np.abs(est["tau"][s:s + base] - tau[:min(base, args.samples - s)]).max()
              for s in range(0, args.samples, base))
    print(f"{args.samples} samples: {wall:.1f} s wall ({1e6 * wall / args.samples:.1f} us/sample incl. I/O), "
          f"peak RSS of the estimate run {peak:.0f} MB, input {sum(os.path.getsize(os.path.join(log, f)) for f in os.listdir(log)) / 2**20:.0f} MB; "
          f"max |tau - truth| = {err:.1e} N m; all ok: {bool(np.all(est['ok']))}")


if __name__ == "__main__":
    main()
