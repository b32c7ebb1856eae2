"""Published robots load and solve (issue #16): link inertias that are not positive
semi-definite, massless links (intermediate: solved; leaf: SingularModelError naming them), scale-
aware singularity diagnosis, B = 0 for every public function that takes a state, robots with only
fixed joints, URDF floating joints below the root, inertias too large for double precision.
Oracles: Pinocchio on the same URDF (or on the same parameters), dense NumPy."""
import warnings

import numpy as np
import pytest

import sparsedyn as sd
from oracles import erd_root, pin, pin_model, rel_err, to_pin_q
from sparsedyn import sensors as S
from sparsedyn.errors import ModelWarning
from sparsedyn.model import WORLD, ModelBuilder, RevoluteJoint

TOL = 1e-10

# tiago's base_antenna_left_link (example-robot-data): a near-massless link on a fixed joint whose
# rotational inertia has eigenvalues (-3.5e-8, 3.5e-8, 9.1e-8)
ANTENNA = dict(mass=1e-6, ixx=2.371e-8, ixy=6.119e-8, ixz=1.179e-8, iyy=2.833e-8, iyz=7.74e-9,
               izz=3.849e-8)


def link(name, mass=1.0, com="0 0 0.1", inertia=None, **moments):
    """A <link>; mass=None: no <inertial> at all (a massless link)."""
    if mass is None:
        return f'<link name="{name}"/>'
    m = dict(ixx=0.01, iyy=0.02, izz=0.015, ixy=0.001, ixz=0.0, iyz=0.002)
    m.update(moments)
    attrs = " ".join(f'{k}="{v}"' for k, v in m.items())
    return (f'<link name="{name}"><inertial><origin xyz="{com}"/><mass value="{mass}"/>'
            f'<inertia {attrs}/></inertial></link>')


def joint(name, parent, child, kind="revolute", axis="0 0 1", xyz="0 0 0.3", rpy="0 0 0"):
    limit = '<limit lower="-2" upper="2" effort="10" velocity="1"/>' if kind == "revolute" else ""
    return (f'<joint name="{name}" type="{kind}"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{xyz}" rpy="{rpy}"/><axis xyz="{axis}"/>{limit}</joint>')


def write_urdf(tmp_path, links, joints, name="r"):
    path = tmp_path / f"{name}.urdf"
    path.write_text(f"<robot name='{name}'>" + "".join(links) + "".join(joints) + "</robot>")
    return str(path)


def chain_urdf(tmp_path, masses, name="chain"):
    """base + one revolute link per mass (axes x, y, z, x, ...); None: a link without <inertial>."""
    axes = ("1 0 0", "0 1 0", "0 0 1")
    links = [link("base", 2.0)] + [link(f"l{k}", m) for k, m in enumerate(masses)]
    joints = [joint(f"j{k}", "base" if k == 0 else f"l{k - 1}", f"l{k}", axis=axes[k % 3])
              for k in range(len(masses))]
    return write_urdf(tmp_path, links, joints, name)


def states(model, B=3, seed=0):
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng, batch=B)
    return q, rng.normal(size=(B, model.nv)), rng.normal(size=(B, model.nv))


def pin_batch(fn, model, pmodel, q, *vectors):
    data = pmodel.createData()
    return np.array([fn(pmodel, data, to_pin_q(model, pmodel, q[b]), *(x[b] for x in vectors))
                     for b in range(q.shape[0])])


def pin_mass_matrices(model, pmodel, q):
    M = pin_batch(pin.crba, model, pmodel, q)
    return np.triu(M) + np.swapaxes(np.triu(M, 1), 1, 2)


def fd_error(M, qdd, ref, tau_scale):
    """Backward error |M (qdd - ref)| / tau scale, and the direct relative error where M is well
    conditioned (any double-precision forward dynamics differs by ~cond(M) eps)."""
    err = float(np.abs(np.einsum("bij,bj->bi", M, qdd - ref)).max() / max(1.0, tau_scale))
    if max(np.linalg.cond(Mb) for Mb in M) < 1e6:
        err = max(err, rel_err(qdd, ref))
    return err


def assert_dynamics_match_pinocchio(model, pmodel, fd=("aba",)):
    """rnea and crba equal Pinocchio's; forward dynamics by each method in `fd` ("aba", or a
    plan ordering such as "auto") equals pin.aba."""
    q, v, a = states(model)
    assert rel_err(sd.rnea(model, q, v, a), pin_batch(pin.rnea, model, pmodel, q, v, a)) <= TOL
    M = pin_mass_matrices(model, pmodel, q)
    assert rel_err(sd.crba(model, q), M) <= TOL
    ref = pin_batch(pin.aba, model, pmodel, q, v, a)
    scale = np.abs(a).max()
    for method in fd:
        qdd = (sd.aba(model, q, v, a) if method == "aba" else
               sd.compile(sd.forward_dynamics(model), ordering=method).solve(q, v, tau=a)["qdd"])
        assert fd_error(M, qdd, ref, scale) <= TOL, method


# ------------------------------------------------------------------ inertias that are not PSD


def test_warning_class_is_exported():
    assert sd.ModelWarning is ModelWarning and issubclass(ModelWarning, UserWarning)
    assert "ModelWarning" in sd.__all__


@pytest.mark.parametrize("floating_base", [False, True])
def test_non_psd_inertia_of_massless_fixed_link_loads_with_warning(tmp_path, floating_base):
    links = [link("base", 2.0), link("antenna", **ANTENNA), link("l1"), link("l2", 0.5)]
    joints = [joint("antenna_joint", "base", "antenna", "fixed", xyz="0.1 0 0.2"),
              joint("j1", "base", "l1", axis="0 1 0"), joint("j2", "l1", "l2", axis="1 0 0")]
    path = write_urdf(tmp_path, links, joints)
    with pytest.warns(ModelWarning, match=r"'antenna'.*not positive semi-definite.*-3\.53"):
        model = sd.load_urdf(path, floating_base=floating_base)
    assert_dynamics_match_pinocchio(model, pin_model(path, floating_base), fd=("aba", "auto"))
    with pytest.raises(sd.ModelError, match=r"'antenna'.*-3\.53"):
        sd.load_urdf(path, floating_base=floating_base, strict=True)


def test_non_psd_moving_link_warns_and_matches_pinocchio(tmp_path):
    """Every link is checked once, wherever it ends up (moving body, merged, root)."""
    links = [link("base", 2.0, ixy=0.5), link("l1", ixy=0.03)]
    path = write_urdf(tmp_path, links, [joint("j1", "base", "l1", axis="0 1 0")])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = sd.load_urdf(path)
    named = sorted(str(w.message).split("'")[1] for w in caught if w.category is ModelWarning)
    assert named == ["base", "l1"]
    assert_dynamics_match_pinocchio(model, pin_model(path))


def test_point_mass_link_round_off_does_not_warn(tmp_path):
    """A point mass (zero inertia about its COM) placed off the origin: the round-off of
    I_O - m c c^T is no defect (tiago's arm_tool_link)."""
    links = [link("base"), link("l1"), link("tool", 0.1, com="0.001 0.2 0", ixx=0, iyy=0, izz=0,
                                            ixy=0, ixz=0, iyz=0)]
    joints = [joint("j1", "base", "l1"), joint("tool_joint", "l1", "tool", "fixed", xyz="0.3 0.1 0",
                                               rpy="0 1.57079632679 0")]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sd.load_urdf(write_urdf(tmp_path, links, joints))


def test_model_builder_is_strict_unless_told():
    bad = np.array([[2.371e-8, 6.119e-8, 1.179e-8], [6.119e-8, 2.833e-8, 7.74e-9],
                    [1.179e-8, 7.74e-9, 3.849e-8]])
    with pytest.raises(sd.ModelError, match="'l1'"):
        ModelBuilder().add_body("l1", WORLD, RevoluteJoint("j1", [0, 0, 1]), mass=1e-6, inertia=bad)
    b = ModelBuilder(strict=False)
    with pytest.warns(ModelWarning, match="'l1'"):
        b.add_body("l1", WORLD, RevoluteJoint("j1", [0, 0, 1]), mass=1e-6, inertia=bad)


@pytest.mark.parametrize("floating_base", [False, True])
def test_tiago_loads_and_matches_pinocchio(floating_base):
    path = erd_root() + "/tiago_description/robots/tiago.urdf"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = sd.load_urdf(path, floating_base=floating_base)
    named = sorted(str(w.message).split("'")[1] for w in caught if w.category is ModelWarning)
    assert named == ["base_antenna_left_link", "base_antenna_right_link"]
    assert_dynamics_match_pinocchio(model, pin_model(path, floating_base))


@pytest.mark.parametrize("value,needle", [("1e308", "exceed"), ("1e400", "finite")])
@pytest.mark.parametrize("what", ["mass", "ixx"])
def test_inertias_too_large_for_double_precision_are_refused(tmp_path, value, needle, what):
    big = {"mass": value} if what == "mass" else {"ixx": value}
    links = [link("base"), link("heavy", **big)]
    with pytest.raises(sd.ModelError, match=f"'heavy'.*{needle}"):
        sd.load_urdf(write_urdf(tmp_path, links, [joint("j1", "base", "heavy")]))


# ------------------------------------------------------------------ massless links


@pytest.mark.parametrize("floating_base", [False, True])
def test_massless_intermediate_link_is_planned(tmp_path, floating_base):
    """A URDF link without <inertial> between two massive ones: no pivot-safe matching exists
    on D's always-nonzero entries, but the mass matrix is regular; the planner skips the
    orderings that need that matching and plans Nori's ABA order (as pin.aba solves it)."""
    path = chain_urdf(tmp_path, [1.0, None, 1.0, 1.0])
    model = sd.load_urdf(path, floating_base=floating_base)
    pmodel = pin_model(path, floating_base)
    assert_dynamics_match_pinocchio(model, pmodel, fd=("aba", "auto"))
    plan = sd.compile(sd.forward_dynamics(model))
    notes = {row["name"]: row["note"] for row in plan.table}
    assert plan.stats["ordering"] == "aba"
    assert all("skipped" in notes[name] for name in ("natural", "amd", "colamd", "markowitz"))
    with pytest.raises(ValueError, match="'amd'"):
        sd.compile(sd.forward_dynamics(model), ordering="amd")
    q, v, a = states(model)
    tau = sd.compile(sd.inverse_dynamics(model)).solve(q, v, qdd=a)["tau"]
    assert rel_err(tau, pin_batch(pin.rnea, model, pmodel, q, v, a)) <= TOL


def test_model_builder_chain_with_massless_intermediate_body():
    """ModelBuilder chain with masses [1, 0, 1, 1] against Pinocchio built from the same data."""
    b, pm = ModelBuilder("chain"), pin.Model()
    parent, pid = WORLD, 0
    for k, mass in enumerate([1.0, 0.0, 1.0, 1.0]):
        axis, T = np.eye(3)[k % 3], np.eye(4)
        T[:3, 3] = [0.0, 0.0, 0.3 * (k > 0)]
        com, Ic = np.array([0.05, 0.0, 0.15]), np.diag([0.02, 0.03, 0.01]) * mass
        parent = b.add_body(f"l{k}", parent, RevoluteJoint(f"j{k}", axis), placement=T,
                            mass=mass, com=com, inertia=Ic)
        pid = pm.addJoint(pid, pin.JointModelRevoluteUnaligned(axis), pin.SE3(np.eye(3), T[:3, 3]),
                          f"j{k}")
        pm.appendBodyToJoint(pid, pin.Inertia(mass, com, Ic), pin.SE3.Identity())
    model, pd = b.build(), pm.createData()
    q, v, tau = states(model, B=4)
    ref = np.array([pin.aba(pm, pd, q[i], v[i], tau[i]) for i in range(4)])
    for ordering in ("auto", "aba"):
        qdd = sd.compile(sd.forward_dynamics(model), ordering=ordering).solve(q, v, tau=tau)["qdd"]
        assert rel_err(qdd, ref) <= TOL
    assert rel_err(sd.aba(model, q, v, tau), ref) <= TOL


@pytest.mark.parametrize("floating_base", [False, True])
def test_published_robot_with_massless_intermediate_links(floating_base):
    """example-robot-data's human.urdf: 19 massless 'virtual' links between massive ones."""
    path = erd_root() + "/human_description/robots/human.urdf"
    model = sd.load_urdf(path, floating_base=floating_base)
    assert any(not model.inertias[i].any() and model.inertias[model.subtree(i)].any()
               for i in range(model.nbodies))
    assert_dynamics_match_pinocchio(model, pin_model(path, floating_base), fd=("aba", "auto"))


def test_massless_leaf_is_singular_named_by_body(tmp_path):
    model = sd.load_urdf(chain_urdf(tmp_path, [1.0, 1.0, 1.0, None]))
    q, v, tau = states(model)
    with pytest.raises(sd.SingularModelError) as err:
        sd.compile(sd.forward_dynamics(model))
    assert err.value.bodies == ("l3",)
    message = str(err.value)
    assert "'j3'" in message and "'l3'" in message and "massless" in message
    assert "row" not in message and "column" not in message
    with pytest.raises(sd.SingularModelError, match="'l3'.*massless") as err:
        sd.aba(model, q, v, tau)
    assert err.value.bodies == ("l3",) and err.value.batch_indices == (0, 1, 2)
    with pytest.raises(sd.SingularModelError, match="'l3'"):
        sd.delassus(model, q, [sd.Contact("l2", "6d")], method="sparse")
    sd.compile(sd.inverse_dynamics(model))          # inverse dynamics stays well posed


def test_published_robot_with_massless_leaf_links():
    """example-robot-data's romeo.urdf: fingers without inertia (pin.aba returns NaN there)."""
    model = sd.load_urdf(erd_root() + "/romeo_description/urdf/romeo.urdf")
    massless = {model.link_names[i] for i in range(model.nbodies)
                if not model.inertias[model.subtree(i)].any()}
    with pytest.raises(sd.SingularModelError) as err:
        sd.compile(sd.forward_dynamics(model))
    assert set(err.value.bodies) == massless and "LFinger21Link" in str(err.value)
    q, v, tau = states(model, B=2)
    with pytest.raises(sd.SingularModelError, match="massless") as err:
        sd.aba(model, q, v, tau)
    assert set(err.value.bodies) <= massless


# ------------------------------------------------------------------ scale-aware diagnosis


def heavy_tree_urdf(tmp_path):
    """Two three-link branches off the base; the tip of branch a weighs 1e12 kg, branch b 0.1 kg
    per link."""
    axes = ("1 0 0", "0 1 0", "0 0 1")
    heavy = dict(ixx=1e10, iyy=1.2e10, izz=0.9e10)
    links = ([link("base")] + [link(f"a{k}", 1e12, **heavy) if k == 2 else link(f"a{k}")
                               for k in range(3)] + [link(f"b{k}", 0.1) for k in range(3)])
    joints = []
    for branch, side in (("a", "0.2 0 0"), ("b", "-0.2 0 0")):
        for k in range(3):
            joints.append(joint(f"j{branch}{k}", "base" if k == 0 else f"{branch}{k - 1}",
                                f"{branch}{k}", axis=axes[k], xyz=side if k == 0 else "0 0 0.3"))
    return write_urdf(tmp_path, links, joints, "heavy")


def test_heavy_leaf_does_not_make_light_branches_singular(tmp_path):
    """Pivots are judged against the inertia of the bodies their joint moves: a 1e12 kg link on
    one branch leaves the 0.1 kg branch regular (Pinocchio solves it)."""
    path = heavy_tree_urdf(tmp_path)
    model, pmodel = sd.load_urdf(path), pin_model(path)
    q, v, tau = states(model)
    ref = pin_batch(pin.aba, model, pmodel, q, v, tau)
    assert rel_err(sd.aba(model, q, v, tau), ref) <= TOL
    M = pin_mass_matrices(model, pmodel, q)
    L = sd.ltl(model, M)
    assert rel_err(np.swapaxes(L, 1, 2) @ L, M) <= TOL
    contacts = [sd.Contact("b2", "6d"), sd.Contact("a2", "3d")]
    J = np.concatenate([sd.frame_jacobian(model, q, "b2"), sd.frame_jacobian(model, q, "a2")[:, :3]], 1)
    dense = J @ np.linalg.solve(M, np.swapaxes(J, 1, 2))
    for method in ("pv-osimr", "pv-osim", "efpa", "kjr", "ltl-osim"):
        assert rel_err(sd.delassus(model, q, contacts, method=method), dense) <= TOL, method


def test_heavy_leaf_on_floating_base_names_the_mass_ratio(tmp_path):
    """On a floating base the root pivot mixes the 1e12 kg and the 1 kg bodies: numerically
    singular, and the message says why (not "massless")."""
    model = sd.load_urdf(heavy_tree_urdf(tmp_path), floating_base=True)
    q, v, tau = states(model)
    with pytest.raises(sd.SingularModelError) as err:
        sd.aba(model, q, v, tau)
    message = str(err.value)
    assert "'root_joint'" in message and "'a2'" in message and "1e+12 kg" in message
    assert "differ" in message and "massless" not in message
    with pytest.raises(sd.SingularModelError, match=r"'root_joint'.*differ.*'a2'") as err:
        sd.ltl(model, sd.crba(model, q))


def test_light_robot_is_not_singular():
    """Masses of 1e-9 kg (a micro-robot) are regular: no absolute floor on the pivots."""
    b, pm = ModelBuilder("micro"), pin.Model()
    parent, pid = WORLD, 0
    for k in range(4):
        axis, T = np.eye(3)[k % 3], np.eye(4)
        T[:3, 3] = [0.0, 0.0, 1e-3 * (k > 0)]
        com, Ic = np.array([0.0, 0.0, 5e-4]), np.diag([2.0, 3.0, 1.0]) * 1e-16
        parent = b.add_body(f"l{k}", parent, RevoluteJoint(f"j{k}", axis), placement=T,
                            mass=1e-9, com=com, inertia=Ic)
        pid = pm.addJoint(pid, pin.JointModelRevoluteUnaligned(axis), pin.SE3(np.eye(3), T[:3, 3]),
                          f"j{k}")
        pm.appendBodyToJoint(pid, pin.Inertia(1e-9, com, Ic), pin.SE3.Identity())
    model, pd = b.build(), pm.createData()
    q, v, tau = states(model, B=2)
    tau *= 1e-12
    ref = np.array([pin.aba(pm, pd, q[i], v[i], tau[i]) for i in range(2)])
    assert rel_err(sd.aba(model, q, v, tau), ref) <= TOL
    M = np.array([pin.crba(pm, pd, q[i]) for i in range(2)])
    M = np.triu(M) + np.swapaxes(np.triu(M, 1), 1, 2)
    L = sd.ltl(model, M)
    assert np.abs(np.swapaxes(L, 1, 2) @ L - M).max() <= TOL * np.abs(M).max()
    # the worst-case pattern keeps such small inertias (no absolute floor on structural zeros)
    ref = np.array([pin.rnea(pm, pd, q[i], v[i], tau[i]) for i in range(2)])
    tau_plan = sd.compile(sd.inverse_dynamics(model)).solve(q, v, qdd=tau)["tau"]
    assert np.abs(tau_plan - ref).max() <= TOL * np.abs(ref).max()


# ------------------------------------------------------------------ B = 0


def _tree_cases():
    """A small floating-base tree with an F/T sensor (a fixed joint) and two feet."""
    links = [link("base", 2.0)] + [link(f"{s}{k}") for s in "lr" for k in range(2)]
    joints = [joint(f"{s}{k}_joint", "base" if k == 0 else f"{s}0", f"{s}{k}", axis="0 1 0")
              for s in "lr" for k in range(2)]
    links += [link("l_foot", 0.3), link("r_foot", 0.3)]
    joints += [joint("l_ft", "l1", "l_foot", "fixed"), joint("r_ft", "r1", "r_foot", "fixed")]
    m = sd.load_urdf("<robot name='tree'>" + "".join(links) + "".join(joints) + "</robot>",
                     floating_base=True)
    feet = [sd.Contact("l_foot", "6d"), sd.Contact("r_foot", "3d")]
    q, z = np.zeros((0, m.nq)), np.zeros((0, m.nv))
    idp = sd.compile(sd.inverse_dynamics(m, f_ext=["l_foot"]))
    fdp = sd.compile(sd.forward_dynamics(m))
    sensors = [S.JointAccelerations(), S.ForceTorque("l_ft"), S.Accelerometer("r_foot")]
    problem = sd.EstimationProblem(m, sensors, unknown_wrenches=["l_foot", "r_foot"])
    truth = S.ground_truth(m, q, z, z)
    readings = {s.name: s.simulate(m, q, z, truth) for s in sensors}
    nv, nb = m.nv, m.nbodies
    cases = {
        "rnea": (lambda: sd.rnea(m, q, z, z, f_ext={"l_foot": np.zeros((0, 6))}), (nv,)),
        "aba": (lambda: sd.aba(m, q, z, z), (nv,)),
        "crba": (lambda: sd.crba(m, q), (nv, nv)),
        "ltl": (lambda: sd.ltl(m, np.zeros((0, nv, nv))), (nv, nv)),
        "ltdl": (lambda: sd.ltdl(m, np.zeros((0, nv, nv)))[1], (nv,)),
        "yamane": (lambda: sd.yamane_forward_dynamics(m, q, z, z), (nv,)),
        "placements": (lambda: sd.forward_kinematics(m, q, z).placements, (nb, 4, 4)),
        "velocities": (lambda: sd.forward_kinematics(m, q, z).velocities, (nb, 6)),
        "frame_placement": (lambda: sd.forward_kinematics(m, q).frame_placement("l_foot"), (4, 4)),
        "frame_jacobian": (lambda: sd.frame_jacobian(m, q, "l_foot"), (6, nv)),
        "contact_jacobian": (lambda: sd.contact_jacobian(m, q, feet), (9, nv)),
        "random_configuration": (lambda: m.random_configuration(0, batch=0), (m.nq,)),
        "integrate": (lambda: m.integrate(q, z), (m.nq,)),
        "id plan": (lambda: idp.solve(q, z, qdd=z, f_ext={"l_foot": np.zeros((0, 6))})["tau"], (nv,)),
        "id plan numpy": (lambda: idp.solve(q, z, qdd=z, backend="numpy")["tau"], (nv,)),
        "id plan link": (lambda: idp.solve(q, z, qdd=z, outputs="all")["a", "l_foot"], (6,)),
        "fd plan": (lambda: fdp.solve(q, z, tau=z)["qdd"], (nv,)),
        "fd plan link": (lambda: fdp.solve(q, z, tau=z)["f", "l_foot"], (6,)),
        "estimation exact": (lambda: sd.compile(problem).solve(q, z, readings)["tau"], (nv,)),
        "estimation map": (lambda: sd.compile_estimation(problem, method="map")
                           .solve(q, z, readings)["tau"], (nv,)),
        "ground_truth": (lambda: S.ground_truth(m, q, z, z).blocks[("a", 0)], (6,)),
    }
    fact, n = fdp.factorization, fdp.factorization.program.n
    values = np.zeros((0, fact.program.nnz))
    cases["Factorization.solve"] = (lambda: fact.solve(values, np.zeros((0, n))), (n,))
    cases["Factorization.solve k"] = (lambda: fact.solve(values, np.zeros((0, n, 2))), (n, 2))
    chol = sd.SparseCholesky(fact.pattern.T @ fact.pattern)
    cases["SparseCholesky.solve_batch"] = (
        lambda: chol.solve_batch(np.zeros((0, chol.pattern.nnz)), np.zeros((0, n))), (n,))
    for method in ("pv-osimr", "pv-osim", "efpa", "kjr", "ltl-osim", "dense", "sparse"):
        for backend in ("numpy", None):
            if backend is None or method in ("pv-osimr", "sparse"):
                cases[f"delassus {method} {backend}"] = (
                    lambda method=method, backend=backend: sd.delassus(m, q, feet, method=method,
                                                                       backend=backend), (9, 9))
    return cases


def _loop_cases():
    from sparsedyn.loops.builders import four_bar, geared_chain
    from sparsedyn.problems import loop_forward_dynamics
    cases = {}
    for name, cm in (("geared", geared_chain(4)), ("four_bar", four_bar())):
        q, qd, y = np.zeros((0, cm.model.nq)), np.zeros((0, cm.model.nv)), np.zeros((0, cm.ny))
        tip = cm.model.link_names[-1]
        cases.update({
            f"{name} c_rnea": (lambda cm=cm, q=q, y=y: sd.c_rnea(cm, q, y, y), (cm.ny,)),
            f"{name} c_aba": (lambda cm=cm, q=q, y=y: sd.c_aba(cm, q, y, y), (cm.ny,)),
            f"{name} c_efpa": (lambda cm=cm, q=q, tip=tip: sd.c_efpa(cm, q, [tip]), (6, 6)),
            f"{name} projected_rnea": (lambda cm=cm, q=q, y=y: sd.projected_rnea(cm, q, y, y), (cm.ny,)),
            f"{name} projection_fd": (lambda cm=cm, q=q, y=y: sd.projection_fd(cm, q, y, y), (cm.ny,)),
            f"{name} lagrange_fd": (lambda cm=cm, q=q, qd=qd, y=y: sd.lagrange_fd(cm, q, qd, y)[0],
                                    (cm.ny,)),
            f"{name} random_state": (lambda cm=cm: cm.random_state(0, batch=0)[0], (cm.model.nq,)),
            f"{name} loop plan": (lambda cm=cm, q=q, qd=qd, y=y: sd.compile(
                loop_forward_dynamics(cm)).solve(q, qd, y)["ydd"], (cm.ny,)),
        })
    return cases


@pytest.fixture(scope="module")
def empty_batch_cases():
    return {**_tree_cases(), **_loop_cases()}


def test_empty_batch_everywhere(empty_batch_cases):
    """Every public function that takes a state returns empty results of shape (0, ...) for
    B = 0 (the same trailing shape as for B > 0)."""
    failures = {}
    for name, (fn, tail) in empty_batch_cases.items():
        try:
            out = np.asarray(fn())
        except Exception as exc:                                   # report them all at once
            failures[name] = f"{type(exc).__name__}: {exc}"
            continue
        if out.shape != (0,) + tail:
            failures[name] = f"shape {out.shape}, expected {(0,) + tail}"
    assert not failures, failures


# ------------------------------------------------------------------ unusual trees


def test_robot_with_only_fixed_joints(tmp_path):
    links = [link("base"), link("arm"), link("tool", 0.2)]
    joints = [joint("j1", "base", "arm", "fixed"), joint("j2", "arm", "tool", "fixed", xyz="0.1 0 0")]
    path = write_urdf(tmp_path, links, joints)
    model = sd.load_urdf(path)
    assert (model.nq, model.nv, model.joint_names) == (0, 0, ())
    q = np.zeros((3, 0))
    assert sd.rnea(model, q, q, q, f_ext={"tool": np.ones(6)}).shape == (3, 0)
    assert sd.aba(model, q, q, q).shape == (3, 0)
    assert sd.crba(model, q).shape == (3, 0, 0)
    kin = sd.forward_kinematics(model, q)
    assert kin.placements.shape == (3, 0, 4, 4)
    T = np.eye(4)
    T[:3, 3] = [0.1, 0.0, 0.3]
    assert np.allclose(kin.frame_placement("tool"), T)
    assert sd.frame_jacobian(model, q, "tool").shape == (3, 6, 0)
    assert sd.delassus(model, q, [sd.Contact("tool")]).shape == (3, 6, 6)
    for problem in (sd.inverse_dynamics(model), sd.forward_dynamics(model)):
        plan = sd.compile(problem)
        given = {problem.given: q}
        assert plan.solve(q, q, **given)[problem.outputs[0]].shape == (3, 0)
        assert plan.solve(np.zeros(0), np.zeros(0), **{problem.given: np.zeros(0)})[
            problem.outputs[0]].shape == (0,)
        plan.save(tmp_path / f"{problem.name}.npz")
        loaded = sd.load_plan(tmp_path / f"{problem.name}.npz", model)
        assert loaded.solve(q, q, **given)[problem.outputs[0]].shape == (3, 0)
    floating = sd.load_urdf(path, floating_base=True)
    assert_dynamics_match_pinocchio(floating, pin_model(path, True), fd=("aba", "auto"))


@pytest.mark.parametrize("first", [True, False], ids=["floating-first", "floating-second"])
@pytest.mark.parametrize("floating_base", [False, True])
def test_urdf_floating_joint_below_the_root(tmp_path, first, floating_base):
    """A URDF `floating` joint is a listed free-flyer joint, as in Pinocchio (q: p, quat xyzw)."""
    links = [link("a"), link("b"), link("c", 0.5)]
    kinds = ("floating", "revolute") if first else ("revolute", "floating")
    joints = [joint("j1", "a", "b", kinds[0]), joint("j2", "b", "c", kinds[1], axis="0 1 0")]
    path = write_urdf(tmp_path, links, joints)
    model, pmodel = sd.load_urdf(path, floating_base=floating_base), pin_model(path, floating_base)
    assert list(model.joint_names) == list(pmodel.names[2 if floating_base else 1:])
    assert (model.nq, model.nv) == (pmodel.nq, pmodel.nv)
    assert_dynamics_match_pinocchio(model, pmodel, fd=("aba", "auto"))
    q = model.neutral_configuration()
    q[model.q_slice(model.joint_index("j1" if first else "j2"))][3:] = [0.0, 0.0, 0.0, 2.0]
    with pytest.raises(ValueError, match="quaternion"):
        sd.rnea(model, q, np.zeros(model.nv), np.zeros(model.nv))


def test_a_binary_file_or_a_foreign_object_is_not_read_as_a_urdf(tmp_path):
    """A saved plan passed as a URDF, a directory, or a Pinocchio model: typed errors naming
    what was passed, never UnicodeDecodeError or a bytes-like-object TypeError."""
    binary = tmp_path / "plan.npz"
    binary.write_bytes(b"PK\x03\x04\xff\xfe\x00binary")
    with pytest.raises(sd.ModelError, match="not UTF-8"):
        sd.load_urdf(binary)
    with pytest.raises(sd.ModelError, match="directory"):
        sd.load_urdf(str(tmp_path))
    with pytest.raises(TypeError, match="path_or_xml"):
        sd.load_urdf(pin.Model())
