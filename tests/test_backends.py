"""The backend seam (sparsedyn.backends): every registered backend implements the protocol, runs
a plan's fused program (sparsedyn.ir.fused) through it, and agrees with the NumPy reference
route (NumPy assembly + the LU program in NumPy) and with Pinocchio; the IR is built once and
shared by the backends."""
import numpy as np
import pytest
from oracles import pin_twin, rel_err, twin_q

import sparsedyn as sd
from sparsedyn import backends
from sparsedyn.backends import BACKENDS, BackendUnavailableError
from sparsedyn.ir.fused import FusedProgram, Schedule


def _available():
    names = []
    for name in BACKENDS:
        try:
            backends.backend(name)
            names.append(name)
        except BackendUnavailableError:
            pass
    return names


@pytest.mark.parametrize("name", sorted(BACKENDS))
def test_every_backend_implements_the_protocol(name):
    import importlib
    module = importlib.import_module(BACKENDS[name])
    assert module.NAME == name
    for attr in ("unavailable", "prepare", "run"):
        assert callable(getattr(module, attr)), f"backend {name}: no {attr}()"


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(ValueError, match="backend: expected one of"):
        backends.backend("fortran")


@pytest.mark.parametrize("name", _available())
@pytest.mark.parametrize("kind", ["inverse_dynamics", "forward_dynamics"])
def test_backend_runs_the_ir_like_the_reference_route_and_pinocchio(name, kind):
    import pinocchio as pin
    model = sd.models.humanoid()
    rng = np.random.default_rng(3)
    B = 5
    q = model.random_configuration(rng, batch=B)
    v, y = rng.normal(size=(2, B, model.nv))
    plan = sd.compile(getattr(sd, kind)(model))
    ir = plan._fused_solver().ir
    assert isinstance(ir, FusedProgram) and isinstance(ir.schedule(False), Schedule)
    module = backends.backend(name)
    kernel = module.prepare(ir)
    out, x, broken = module.run(kernel, q, v, y, full=True, threads=1)
    assert not broken.any() and x.shape == (B, plan.system.shape[1])
    given = "qdd" if kind == "inverse_dynamics" else "tau"
    ref = plan.solve(q, v, backend="numpy", outputs="all", **{given: y})
    assert rel_err(x, ref.vector) < 1e-12
    assert np.array_equal(out, x[:, ir.out_columns])
    pmodel = pin_twin(model)
    pdata = pmodel.createData()
    for b in range(B):
        pq = twin_q(model, pmodel, q[b])
        expect = (pin.rnea(pmodel, pdata, pq, v[b], y[b]) if kind == "inverse_dynamics"
                  else pin.aba(pmodel, pdata, pq, v[b], y[b]))
        assert rel_err(out[b], expect) < 1e-10
