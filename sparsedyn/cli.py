"""The `sparsedyn` command line. Errors are one clear line on stderr and a non-zero exit code."""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _timeit(fn, repeat=3):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def cmd_demo(args):
    """End-to-end demo on the embedded humanoid: recursive algorithms, compared with Pinocchio."""
    import sparsedyn as sd
    from sparsedyn import models

    model = models.humanoid()
    B = args.batch
    rng = np.random.default_rng(args.seed)
    q = model.random_configuration(rng, batch=B)
    v = rng.normal(size=(B, model.nv))
    a = rng.normal(size=(B, model.nv))
    f_ext = {"l_sole": rng.normal(size=(B, 6)), "r_sole": rng.normal(size=(B, 6))}
    print(f"model: {model}  ({len(model.frames)} link frames; batch of {B} random states)")

    tau, t_rnea = _timeit(lambda: sd.rnea(model, q, v, a, f_ext=f_ext))
    qdd, t_aba = _timeit(lambda: sd.aba(model, q, v, tau, f_ext=f_ext))
    M, t_crba = _timeit(lambda: sd.crba(model, q))
    print(f"rnea  {1e6 * t_rnea / B:8.1f} us/state   tau[0, :6] = {np.array2string(tau[0, :6], precision=3)}")
    print(f"aba   {1e6 * t_aba / B:8.1f} us/state   max |aba(rnea(a)) - a| = {np.abs(qdd - a).max():.2e}")
    print(f"crba  {1e6 * t_crba / B:8.1f} us/state   min eig(M) = {np.linalg.eigvalsh(M)[:, 0].min():.3e}")
    with sd.count_operations() as ops:
        sd.rnea(model, q[0], v[0], a[0])
    print(f"rnea operation count (per state): {ops.mul} mul, {ops.add} add")

    try:
        import pinocchio as pin
    except ImportError:
        print("pinocchio is not installed: skipping the comparison (pip install -e .[test])")
        return 0
    pm = (pin.buildModelFromUrdf(models.HUMANOID_URDF, pin.JointModelFreeFlyer()))
    pd = pm.createData()

    def pin_q(qb):
        out = np.zeros(pm.nq)
        for i, joint in enumerate(model.joints):
            pj = pm.joints[pm.getJointId(joint.name)]
            qi = qb[model.q_slice(i)]
            out[pj.idx_q:pj.idx_q + pj.nq] = (np.cos(qi[0]), np.sin(qi[0])) if pj.nq == 2 and joint.nq == 1 else qi
        return out

    def pin_fext(b):
        fext = [pin.Force.Zero() for _ in range(pm.njoints)]
        for name, w in f_ext.items():
            fr = pm.frames[pm.getFrameId(name, pin.BODY)]
            fext[fr.parentJoint] += fr.placement.act(pin.Force(w[b]))
        return fext

    pqs = [pin_q(q[b]) for b in range(B)]
    fexts = [pin_fext(b) for b in range(B)]
    tau_p, tp_rnea = _timeit(lambda: np.array([pin.rnea(pm, pd, pqs[b], v[b], a[b], fexts[b]) for b in range(B)]))
    qdd_p, tp_aba = _timeit(lambda: np.array([pin.aba(pm, pd, pqs[b], v[b], tau[b], fexts[b]) for b in range(B)]))
    M_p, tp_crba = _timeit(lambda: np.array([pin.crba(pm, pd, pqs[b]) for b in range(B)]))
    M_p = np.triu(M_p) + np.swapaxes(np.triu(M_p, 1), 1, 2)

    def rel(x, y):
        return np.abs(x - y).max() / max(1.0, np.abs(y).max())
    print("\ncomparison with Pinocchio (per-call from Python, same states):")
    print(f"  rnea  max rel err {rel(tau, tau_p):.1e}   time ratio sparsedyn/pinocchio {t_rnea / tp_rnea:6.2f}")
    print(f"  aba   max rel err {rel(qdd, qdd_p):.1e}   time ratio sparsedyn/pinocchio {t_aba / tp_aba:6.2f}")
    print(f"  crba  max rel err {rel(M, M_p):.1e}   time ratio sparsedyn/pinocchio {t_crba / tp_crba:6.2f}")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="sparsedyn", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("demo", help="end-to-end demo on the embedded humanoid")
    p.add_argument("--batch", type=int, default=256, help="number of random states (default 256)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, KeyError, OSError, ArithmeticError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"sparsedyn {args.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
