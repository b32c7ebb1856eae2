"""The representative humanoids of the Delassus studies (sparsedyn.models.humanoids) against
Pinocchio's RNEA, ABA and CRBA on the same trees (pin_twin), and their sizes as the papers state
them: ASIMO-like N = 35 bodies (seed 002, Sec. V-C), Atlas-like nv = 36 so that one / two 24-DoF
hands give 60 / 84 DoF (seed 000, Sec. IV-D), EFPA's sparsity figures (56% / 73% zeros in H, 67%
in the hands-and-feet Jacobian)."""
import numpy as np
import pytest

import sparsedyn as sd
from oracles import pin, pin_twin, rel_err, twin_q
from sparsedyn.models import hand
from sparsedyn.models.humanoids import asimo_like, asimo_like_on_one_foot, atlas_like

TOL = 1e-10

MODELS = {
    "asimo": asimo_like,
    "asimo_extra_limbs": lambda: asimo_like(extra_limb_pairs=1),
    "asimo_long_limbs": lambda: asimo_like(arm_dof=8, leg_dof=7),
    "asimo_four_finger": lambda: asimo_like(hand="four-finger"),
    "asimo_one_foot": asimo_like_on_one_foot,
    "atlas": atlas_like,
}


@pytest.mark.parametrize("name", list(MODELS))
def test_dynamics_against_pinocchio(name):
    model = MODELS[name]()
    pm = pin_twin(model)
    pd = pm.createData()
    rng = np.random.default_rng(len(name))
    for _ in range(2):
        q = model.random_configuration(rng)
        v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
        pq = twin_q(model, pm, q)
        tau = sd.rnea(model, q, v, a)
        assert rel_err(tau, pin.rnea(pm, pd, pq, v, a)) <= TOL
        assert rel_err(sd.aba(model, q, v, tau), pin.aba(pm, pd, pq, v, tau)) <= 1e-9
        M = pin.crba(pm, pd, pq)
        M = np.triu(M) + np.triu(M, 1).T
        assert rel_err(sd.crba(model, q), M) <= TOL


def _structural_zeros(model, links):
    """Percent of structural zeros (branch-induced sparsity, seed 002 Sec. V-B) of H and of the 6D
    Jacobian of `links`: H[i, j] != 0 iff one DoF's body supports the other's; J_k's columns are the
    DoFs of the bodies supporting link k."""
    def chain(i):
        out = set()
        while i >= 0:
            out.add(i)
            i = int(model.parents[i])
        return out
    dofs = np.concatenate([[i] * j.nv for i, j in enumerate(model.joints)])
    anc = [chain(i) for i in range(model.nbodies)]
    H = np.array([[a in anc[b] or b in anc[a] for b in dofs] for a in dofs])
    J = np.array([[d in anc[model.frames[f].body] for d in dofs] for f in links])
    return 100 * (1 - H.mean()), 100 * (1 - J.mean())


def test_sizes_and_sparsity_as_the_papers_state():
    asimo = asimo_like()
    assert (asimo.nbodies, asimo.nv, asimo.floating_base) == (35, 40, True)
    assert all(j.kind == "revolute" for j in asimo.joints[1:])
    zh, zj = _structural_zeros(asimo, ("l_hand", "r_hand", "l_sole", "r_sole"))
    assert abs(zh - 56) < 1 and abs(zj - 67) < 1                  # "approximately 67 / 56 percent"
    assert abs(_structural_zeros(asimo_like(extra_limb_pairs=1), ("l_hand",))[0] - 73) < 1
    assert asimo_like(hand="four-finger").nv == 40 + 2 * (12 - 2)
    foot = asimo_like_on_one_foot()
    assert (foot.nbodies, foot.nv, foot.floating_base) == (34, 34, False)
    atlas = atlas_like()
    assert (atlas.nbodies, atlas.nv) == (31, 36) and atlas.nv + hand().nv == 60 and atlas.nv + 2 * hand().nv == 84


def test_bad_variant_is_refused():
    with pytest.raises(ValueError, match="arm_dof"):
        asimo_like(arm_dof=5)
