"""iDynTree BERDY (BerdyHelper + BerdySparseMAPSolver) as an independent oracle / benchmark peer
for sensor-based joint-torque and contact-wrench estimation, plus Pinocchio-side helpers that
produce consistent sensor readings WITHOUT using iDynTree.

Conventions (checked in experiments/berdy_probe.py, summarised in experiments/berdy_notes.md):
 * every 6-vector here (wrench, spatial acceleration) is LINEAR-FIRST [f; mu] / [a_lin; a_ang],
   as in iDynTree and Pinocchio (the paper writes angular-first);
 * external wrenches: {link: wrench applied ON the link, expressed in the link frame};
 * F/T readings: {sensor name: wrench as iDynTree's URDF <sensor type="force_torque"> defines it}.
   For iCub (<frame>child</frame>, <measure_direction>child_to_parent</measure_direction>) that
   is the wrench the CHILD link exerts on the PARENT link, expressed in the child link frame,
   i.e. MINUS Pinocchio's data.f (wrench parent->child subtree) in the child frame;
 * joint vectors are in `joint_names` order (default: Pinocchio's order for the same URDF, which
   differs from iDynTree's DOF order), or dicts {joint name: value}.

Environment problems (idyntree missing, API changed, model/sensors not loadable) raise
pytest.skip so that tests using the oracle never fail because of the oracle's environment.
"""
from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

GRAVITY = np.array([0.0, 0.0, -9.81])

_REQUIRED = {
    "ModelLoader": ("loadModelFromFile", "loadReducedModelFromString", "model"),
    "BerdyOptions": ("berdyVariant", "includeAllNetExternalWrenchesAsDynamicVariables",
                     "includeAllJointAccelerationsAsSensors", "includeAllJointTorquesAsSensors",
                     "includeAllNetExternalWrenchesAsSensors", "baseLink", "checkConsistency"),
    "BerdyHelper": ("init", "getNrOfDynamicVariables", "getNrOfDynamicEquations",
                    "getNrOfSensorsMeasurements", "getSensorsOrdering",
                    "getDynamicVariablesOrdering", "extractJointTorquesFromDynamicVariables",
                    "extractLinkNetExternalWrenchesFromDynamicVariables", "getRangeLinkVariable"),
    "BerdySparseMAPSolver": ("setDynamicsConstraintsPriorCovariance",
                             "setDynamicsRegularizationPriorCovariance",
                             "setDynamicsRegularizationPriorExpectedValue",
                             "setMeasurementsPriorCovariance", "initialize",
                             "updateEstimateInformationFixedBase",
                             "updateEstimateInformationFloatingBase", "doEstimate",
                             "getLastEstimate"),
    "SparseMatrixColMajor": ("setValue",),
    "VectorDynSize": ("FromPython", "toNumPy"),
    "JointPosDoubleArray": ("FromPython",),
    "JointDOFsDoubleArray": ("FromPython",),
    "LinkWrenches": ("__call__",),
}


def import_idyntree():
    """The SWIG module (idyntree.bindings is a plain re-export of idyntree.swig in 15.x)."""
    mod = None
    for name in ("idyntree.swig", "idyntree.bindings"):
        try:
            mod = __import__(name, fromlist=["*"])
            break
        except Exception:  # noqa: BLE001 - any import problem means "not usable"
            continue
    if mod is None:
        pytest.skip("BERDY oracle: idyntree (SWIG bindings) is not importable")
    missing = [f"{cls}.{attr}" for cls, attrs in _REQUIRED.items() for attr in (("",) + attrs)
               if not hasattr(mod, cls) or (attr and not hasattr(getattr(mod, cls), attr))]
    for enum in ("ORIGINAL_BERDY_FIXED_BASE", "BERDY_FLOATING_BASE", "SIX_AXIS_FORCE_TORQUE",
                 "DOF_ACCELERATION_SENSOR", "NET_EXT_WRENCH_SENSOR", "NET_EXT_WRENCH",
                 "LINK_BODY_PROPER_CLASSICAL_ACCELERATION"):
        if not hasattr(mod, enum):
            missing.append(enum)
    if missing:
        pytest.skip("BERDY oracle: the installed idyntree lacks " + ", ".join(sorted(set(missing))))
    return mod


# ----------------------------------------------------------------------------- URDF helpers

def _vec(txt, default="0 0 0"):
    return np.array([float(x) for x in (txt or default).split()])


def _rpy(r, p, y):
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array([[cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
                     [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
                     [-sp, cp * sr, cp * cr]])


def urdf_ft_sensors(urdf_path):
    """iDynTree-style top-level <sensor type="force_torque"> elements of a URDF (parsed here,
    not by iDynTree): [{name, joint, parent, child, frame, direction}]. Gazebo <sensor>s inside
    <gazebo> are ignored, as iDynTree ignores them."""
    root = ET.parse(urdf_path).getroot()
    joints = {j.get("name"): j for j in root.findall("joint")}
    out = []
    for s in root.findall("sensor"):
        if s.get("type") != "force_torque":
            continue
        jn = s.find("parent").get("joint")
        ft = s.find("force_torque")
        frame = (ft.findtext("frame") if ft is not None else None) or "child"
        direction = (ft.findtext("measure_direction") if ft is not None else None) or "child_to_parent"
        j = joints[jn]
        out.append(dict(name=s.get("name"), joint=jn, parent=j.find("parent").get("link"),
                        child=j.find("child").get("link"), frame=frame.strip(),
                        direction=direction.strip(), joint_type=j.get("type")))
    return out


def _ft_joints_as_revolute(urdf_text, ft_joints):
    """Fixed F/T joints -> revolute joints (that BERDY's fixed-base variant accepts) that will be
    held at q = qd = qdd = 0: kinematically identical, and the F/T sensor keeps its joint."""
    def one(m):
        s = m.group(0).replace('type="fixed"', 'type="revolute"')
        s = re.sub(r"<axis[^>]*/>", "", s)
        return s.replace("</joint>", '<axis xyz="0 0 1"/><limit effort="0" velocity="0" lower="0" upper="0"/></joint>')
    for jn in ft_joints:
        urdf_text = re.sub(r'<joint\s+name="%s"\s+type="fixed"\s*>.*?</joint>' % re.escape(jn), one,
                           urdf_text, flags=re.S)
    return urdf_text


def _urdf_link_inertias(urdf_path):
    """{link: (mass, com (3,), inertia about com in link axes (3x3))} parsed from the URDF."""
    root = ET.parse(urdf_path).getroot()
    out = {}
    for link in root.findall("link"):
        ine = link.find("inertial")
        if ine is None:
            out[link.get("name")] = (0.0, np.zeros(3), np.zeros((3, 3)))
            continue
        m = float(ine.find("mass").get("value"))
        o = ine.find("origin")
        xyz = _vec(o.get("xyz") if o is not None else None)
        R = _rpy(*_vec(o.get("rpy") if o is not None else None))
        i = ine.find("inertia")
        g = {k: float(i.get(k, 0.0)) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        Ic = np.array([[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]],
                       [g["ixz"], g["iyz"], g["izz"]]])
        out[link.get("name")] = (m, xyz, R @ Ic @ R.T)
    return out


# ------------------------------------------------------------------- Pinocchio-side ground truth

def pin_joint_names(pmodel):
    """Names of the movable joints of a Pinocchio model, in its velocity order (no root joint)."""
    return [pmodel.names[j] for j in range(1, pmodel.njoints)
            if pmodel.joints[j].nv == 1 and pmodel.joints[j].shortname() not in ("JointModelFreeFlyer",)]


def simulate_ft_readings(pmodel, pdata, urdf_path, f_ext=None, sensors=None):
    """F/T readings consistent with the Pinocchio RNEA just run (pin.rnea(pmodel, pdata, q, v, a
    [, fext])) on a model built from `urdf_path` (fixed joints are frames, as Pinocchio does).

    Computed independently of iDynTree: the wrench that the parent side transmits across the
    fixed sensor joint to the child side is, in the child link frame C,
        f_C = sum_{k in fixed cluster of C} X*_{C,k} (I_k a_k + v_k x* I_k v_k - fext_k)
            + sum_{movable joints j hanging from that cluster} X*_{C,j} data.f[j]
    with link inertias read from the URDF and a_k (gravity included, pdata.a_gf), v_k from the
    rigid body that carries C. `f_ext` is {link: linear-first wrench on the link, in its frame}
    and must be the same as the one given to rnea. Returns {sensor name: 6-vector}, with the
    sensor's frame/measure_direction applied (child_to_parent -> -f_C; frame parent -> parent
    link frame).
    """
    pin = pytest.importorskip("pinocchio")
    f_ext = f_ext or {}
    inert = _urdf_link_inertias(urdf_path)
    body = {f.name: i for i, f in enumerate(pmodel.frames) if f.type == pin.FrameType.BODY}

    def frame_of(link):  # placement of the link frame in its parent joint frame
        return pmodel.frames[body[link]]

    out = {}
    for s in (sensors or urdf_ft_sensors(urdf_path)):
        if s["joint_type"] != "fixed":
            raise NotImplementedError(f"F/T sensor {s['name']} on a non-fixed joint")
        C = frame_of(s["child"])
        jC = C.parentJoint
        # fixed cluster below the sensor joint: BODY frames on the same rigid body as C whose
        # parent-frame chain passes through C's frame.
        cluster = []
        for name, fid in body.items():
            f = pmodel.frames[fid]
            if f.parentJoint != jC:
                continue
            k = fid
            while k != 0 and pmodel.frames[k].parentJoint == jC and k != body[s["child"]]:
                k = pmodel.frames[k].parentFrame
            if k == body[s["child"]]:
                cluster.append(name)
        cluster_ids = {body[n] for n in cluster}
        oMC = C.placement  # joint jC -> C
        v_C = oMC.actInv(pdata.v[jC])
        a_C = oMC.actInv(pdata.a_gf[jC])
        f_C = pin.Force.Zero()
        for name in cluster:
            jMk = frame_of(name).placement
            CMk = oMC.actInv(jMk)
            m, com, Ic = inert.get(name, (0.0, np.zeros(3), np.zeros((3, 3))))
            Ik = pin.Inertia(m, com, Ic)
            vk, ak = CMk.actInv(v_C), CMk.actInv(a_C)
            fk = Ik * ak + vk.cross(Ik * vk)
            if name in f_ext:
                fk = fk - pin.Force(np.asarray(f_ext[name], dtype=float))
            f_C += CMk.act(fk)
        for j in range(1, pmodel.njoints):
            jf = [i for i, f in enumerate(pmodel.frames) if f.type == pin.FrameType.JOINT and f.parentJoint == j]
            if pmodel.parents[j] != jC or not jf or pmodel.frames[jf[0]].parentFrame not in cluster_ids:
                continue
            f_C += oMC.actInv(pdata.liMi[j]).act(pdata.f[j])  # liMi includes the joint motion
        w = f_C.vector.copy()
        if s["direction"] == "child_to_parent":
            w = -w
        elif s["direction"] != "parent_to_child":
            raise NotImplementedError(f"measure_direction {s['direction']}")
        if s["frame"] == "parent":
            P = frame_of(s["parent"])
            if P.parentJoint != jC:
                raise NotImplementedError("parent link not on the same rigid body as the child")
            w = P.placement.actInv(C.placement).act(pin.Force(w)).vector
        elif s["frame"] != "child":
            raise NotImplementedError(f"F/T frame {s['frame']}")
        out[s["name"]] = w
    return out


def pin_base_proper_classical_acc(pmodel, pdata, q, v, a, frame="base_link"):
    """[R^T pdd - R^T g; omega_dot_body] of a frame (what BERDY_FLOATING_BASE calls the link's
    body proper classical acceleration), linear-first, from Pinocchio."""
    pin = pytest.importorskip("pinocchio")
    pin.forwardKinematics(pmodel, pdata, q, v, a)
    pin.updateFramePlacements(pmodel, pdata)
    fid = pmodel.getFrameId(frame)
    acc = pin.getFrameClassicalAcceleration(pmodel, pdata, fid, pin.LOCAL).vector.copy()
    R = pdata.oMf[fid].rotation
    acc[:3] -= R.T @ pmodel.gravity.linear
    return acc


# -------------------------------------------------------------------------------- the oracle

def _diag(idyn, values):
    values = np.asarray(values, dtype=float)
    S = idyn.SparseMatrixColMajor(len(values), len(values))
    for i, x in enumerate(values):
        S.setValue(i, i, float(x))
    return S


class BerdyOracle:
    """MAP estimate of joint torques and net external wrenches with iDynTree's BERDY.

    floating_base=False: ORIGINAL_BERDY_FIXED_BASE. That variant rejects 0-DOF joints, so the
      model is loaded reduced to the 1-DOF joints plus the F/T joints, which are turned into
      revolute joints held at q = qd = qdd = 0 (their acceleration sensors read 0, their
      "torque" is an extra estimated quantity). The base link (the URDF root / `base_link`) is
      fixed; gravity is given in its frame.
    floating_base=True: BERDY_FLOATING_BASE on the full model (fixed joints allowed). Inputs are
      the base angular velocity (body frame) instead of a fixed frame; the base proper classical
      acceleration is not measured by any URDF sensor, so pass it (`base_acc`) to pin it through
      a tight regularisation prior, or leave it to the dynamics.

    Covariances (all diagonal, scalars): measurement_cov for F/T, joint accelerations and known
    external wrenches; unknown_wrench_cov for the external-wrench "measurement" of the links in
    `unknown_wrench_links` (the contact wrenches to estimate); prior_cov = Sigma_D (dynamics
    constraints); regularization_cov = Sigma_d (prior on d, mean 0).
    """

    def __init__(self, urdf_path, floating_base=False, ft_sensors=True, base_link=None,
                 measurement_cov=1e-6, prior_cov=1e-8, regularization_cov=1e4,
                 unknown_wrench_links=(), unknown_wrench_cov=1e6, joint_names=None,
                 base_acc_cov=1e-8):
        idyn = self.idyn = import_idyntree()
        self.urdf_path, self.floating_base = urdf_path, floating_base
        self.ft_info = urdf_ft_sensors(urdf_path) if ft_sensors else []
        ft_joints = [s["joint"] for s in self.ft_info]
        text = open(urdf_path).read()
        loader = idyn.ModelLoader()
        if floating_base:
            ok = loader.loadModelFromFile(urdf_path)
            if ok and not ft_sensors:
                loader.model().sensors().removeAllSensorsOfType(idyn.SIX_AXIS_FORCE_TORQUE)
        else:
            full = idyn.ModelLoader()
            if not full.loadModelFromFile(urdf_path):
                pytest.skip(f"BERDY oracle: iDynTree cannot load {urdf_path}")
            fm = full.model()
            keep = [fm.getJointName(j) for j in range(fm.getNrOfJoints()) if fm.getJoint(j).getNrOfDOFs() == 1]
            if any(fm.getJoint(j).getNrOfDOFs() > 1 for j in range(fm.getNrOfJoints())):
                pytest.skip("BERDY oracle: ORIGINAL_BERDY_FIXED_BASE supports 1-DOF joints only")
            ok = loader.loadReducedModelFromString(_ft_joints_as_revolute(text, ft_joints), keep + ft_joints)
            if ok and not ft_sensors:
                loader.model().sensors().removeAllSensorsOfType(idyn.SIX_AXIS_FORCE_TORQUE)
        if not ok:
            pytest.skip(f"BERDY oracle: iDynTree cannot load {urdf_path}")
        self.model = loader.model().copy()
        m = self.model
        self.ft_names = [m.sensors().getSensor(idyn.SIX_AXIS_FORCE_TORQUE, i).getName()
                         for i in range(m.sensors().getNrOfSensors(idyn.SIX_AXIS_FORCE_TORQUE))]
        if ft_sensors and sorted(self.ft_names) != sorted(s["name"] for s in self.ft_info):
            pytest.skip(f"BERDY oracle: iDynTree found F/T sensors {self.ft_names}, the URDF declares "
                        f"{[s['name'] for s in self.ft_info]}")
        self.pseudo_joints = [] if floating_base else list(ft_joints)

        opts = idyn.BerdyOptions()
        opts.berdyVariant = idyn.BERDY_FLOATING_BASE if floating_base else idyn.ORIGINAL_BERDY_FIXED_BASE
        opts.includeAllNetExternalWrenchesAsDynamicVariables = True
        opts.includeAllJointAccelerationsAsSensors = True
        opts.includeAllJointTorquesAsSensors = False
        opts.includeAllNetExternalWrenchesAsSensors = True
        if base_link:
            opts.baseLink = base_link
        if not opts.checkConsistency():
            pytest.skip("BERDY oracle: inconsistent BerdyOptions")
        self.helper = idyn.BerdyHelper()
        if not self.helper.init(m, opts):
            pytest.skip("BERDY oracle: BerdyHelper.init failed (see iDynTree's [ERROR] output)")
        h = self.helper
        self.base_link = m.getLinkName(h.dynamicTraversal().getBaseLink().getIndex())
        self.n_d, self.n_eq, self.n_y = (h.getNrOfDynamicVariables(), h.getNrOfDynamicEquations(),
                                         h.getNrOfSensorsMeasurements())
        self.idyn_dof_names = [m.getJointName(j) for j in range(m.getNrOfJoints()) if m.getJoint(j).getNrOfDOFs() == 1]
        assert len(self.idyn_dof_names) == m.getNrOfDOFs()
        self.real_dof_names = [n for n in self.idyn_dof_names if n not in self.pseudo_joints]
        if joint_names is None:
            try:
                import pinocchio as pin
                pm = (pin.buildModelFromUrdf(urdf_path, pin.JointModelFreeFlyer()) if floating_base
                      else pin.buildModelFromUrdf(urdf_path))
                joint_names = pin_joint_names(pm)
            except ImportError:
                joint_names = self.real_dof_names
        if sorted(joint_names) != sorted(self.real_dof_names):
            raise ValueError(f"joint_names do not match the model's 1-DOF joints: {joint_names}")
        self.joint_names = list(joint_names)
        # user order -> iDynTree DOF index
        self.user_to_idyn = np.array([self.idyn_dof_names.index(n) for n in self.joint_names])

        # sensor slots in y
        self.sensor_slices = {}
        for s in h.getSensorsOrdering():
            self.sensor_slices[(int(s.type), s.id)] = slice(s.range.offset, s.range.offset + s.range.size)
        self.ext_links = [sid for (t, sid) in self.sensor_slices if t == int(idyn.NET_EXT_WRENCH_SENSOR)]

        self.measurement_cov, self.unknown_wrench_cov = measurement_cov, unknown_wrench_cov
        self.solver = idyn.BerdySparseMAPSolver(h)
        # initialize() FIRST: it resets all three covariances to identity and mu_d to 0.
        if not self.solver.initialize():
            pytest.skip("BERDY oracle: BerdySparseMAPSolver.initialize() failed")
        self.solver.setDynamicsConstraintsPriorCovariance(_diag(idyn, np.full(self.n_eq, prior_cov)))
        reg = np.full(self.n_d, regularization_cov)
        if floating_base:
            r = h.getRangeLinkVariable(idyn.LINK_BODY_PROPER_CLASSICAL_ACCELERATION,
                                       m.getLinkIndex(self.base_link))
            self.base_acc_slice = slice(r.offset, r.offset + r.size)
            self._reg_cov_free = reg.copy()
            self._reg_cov_base = reg.copy()
            self._reg_cov_base[self.base_acc_slice] = base_acc_cov
        self.solver.setDynamicsRegularizationPriorCovariance(_diag(idyn, reg))
        self._base_acc_pinned = False
        self.mu_d = np.zeros(self.n_d)
        self.solver.setDynamicsRegularizationPriorExpectedValue(idyn.VectorDynSize.FromPython(self.mu_d))
        self._unknown, self._unknown_names = None, ()
        self.set_unknown_wrench_links(unknown_wrench_links)
        self.frame_index = m.getFrameIndex(self.base_link)

    # --------------------------------------------------------------------------- set-up helpers
    def _ext_link(self, name):
        """(BERDY link, link_X*_frame 6x6) for a link name; links lumped into a parent by the
        reduced model (e.g. l_foot when the F/T joints are not kept) are iDynTree frames."""
        m = self.model
        if name in self.ext_links:
            return name, np.eye(6)
        fi = m.getFrameIndex(name)
        if fi < 0:
            raise ValueError(f"unknown link/frame {name}; links with external wrenches: {self.ext_links}")
        link = m.getLinkName(m.getFrameLink(fi))
        if link not in self.ext_links:
            raise ValueError(f"no external-wrench sensor for {name} (on {link})")
        T = m.getFrameTransform(fi).asHomogeneousTransform().toNumPy()
        R, p = T[:3, :3], T[:3, 3]
        px = np.array([[0, -p[2], p[1]], [p[2], 0, -p[0]], [-p[1], p[0], 0]])
        X = np.zeros((6, 6))
        X[:3, :3] = R
        X[3:, 3:] = R
        X[3:, :3] = px @ R
        return link, X

    def set_unknown_wrench_links(self, links):
        names = tuple(links)
        links = tuple(sorted({self._ext_link(l)[0] for l in links}))
        self._unknown_names = names
        if links == self._unknown:
            return
        cov = self._measurement_cov_vector()
        for l in links:
            cov[self.sensor_slices[(int(self.idyn.NET_EXT_WRENCH_SENSOR), l)]] = self.unknown_wrench_cov
        self.solver.setMeasurementsPriorCovariance(_diag(self.idyn, cov))
        self._unknown = links

    def _measurement_cov_vector(self):
        """measurement_cov per entry of y: a scalar for every sensor, or a dict {"ft": value or
        (6,) [force; torque], "qdd": value, "default": value (the known zero wrenches)}."""
        mc = self.measurement_cov
        if not isinstance(mc, dict):
            return np.full(self.n_y, float(mc))
        cov = np.full(self.n_y, float(mc.get("default", 1e-6)))
        for (kind, _), sl in self.sensor_slices.items():
            if kind == int(self.idyn.SIX_AXIS_FORCE_TORQUE) and "ft" in mc:
                cov[sl] = mc["ft"]
            elif kind == int(self.idyn.DOF_ACCELERATION_SENSOR) and "qdd" in mc:
                cov[sl] = mc["qdd"]
        return cov

    def _joint_vector(self, x, pseudo_value=0.0):
        """user-order array or {name: value} -> iDynTree DOF-order array (pseudo joints = 0)."""
        out = np.full(len(self.idyn_dof_names), pseudo_value, dtype=float)
        if isinstance(x, dict):
            for n, val in x.items():
                out[self.idyn_dof_names.index(n)] = val
        else:
            x = np.asarray(x, dtype=float)
            if x.shape != (len(self.joint_names),):
                raise ValueError(f"expected {len(self.joint_names)} joint values, got {x.shape}")
            out[self.user_to_idyn] = x
        return out

    def measurement_vector(self, ddq, ft=None, ext_wrenches=None):
        """Serialise readings into BERDY's y (numpy), following getSensorsOrdering()."""
        idyn = self.idyn
        y = np.zeros(self.n_y)
        ft = ft or {}
        if self.ft_names and set(ft) != set(self.ft_names):
            raise ValueError(f"F/T readings needed for {self.ft_names}, got {sorted(ft)}")
        for name, w in ft.items():
            y[self.sensor_slices[(int(idyn.SIX_AXIS_FORCE_TORQUE), name)]] = w
        qdd = self._joint_vector(ddq)
        for i, n in enumerate(self.idyn_dof_names):
            y[self.sensor_slices[(int(idyn.DOF_ACCELERATION_SENSOR), n)]] = qdd[i]
        for name, w in (ext_wrenches or {}).items():
            link, X = self._ext_link(name)
            y[self.sensor_slices[(int(idyn.NET_EXT_WRENCH_SENSOR), link)]] += X @ np.asarray(w, float)
        return y

    # ------------------------------------------------------------------------------ estimation
    def update(self, q, dq, y, gravity=GRAVITY, base_omega=None, base_acc=None):
        idyn = self.idyn
        jp = idyn.JointPosDoubleArray.FromPython(self._joint_vector(q))
        jv = idyn.JointDOFsDoubleArray.FromPython(self._joint_vector(dq))
        yv = idyn.VectorDynSize.FromPython(np.asarray(y, dtype=float))
        if self.floating_base:
            pinned = base_acc is not None
            if pinned:
                self.mu_d[self.base_acc_slice] = base_acc
                self.solver.setDynamicsRegularizationPriorExpectedValue(idyn.VectorDynSize.FromPython(self.mu_d))
            if pinned != self._base_acc_pinned:
                self.solver.setDynamicsRegularizationPriorCovariance(
                    _diag(idyn, self._reg_cov_base if pinned else self._reg_cov_free))
                self._base_acc_pinned = pinned
            w = idyn.Vector3.FromPython(np.zeros(3) if base_omega is None else np.asarray(base_omega, float))
            self.solver.updateEstimateInformationFloatingBase(jp, jv, self.frame_index, w, yv)
        else:
            g = idyn.Vector3.FromPython(np.asarray(gravity, dtype=float))
            self.solver.updateEstimateInformationFixedBase(jp, jv, self.frame_index, g, yv)
        return jp

    def estimate(self, q, dq, ddq, ft=None, ext_wrenches=None, unknown_wrench_links=None,
                 gravity=GRAVITY, base_omega=None, base_acc=None):
        """q, dq, ddq: joint vectors (joint_names order or dicts). ft: {sensor: 6-vector}.
        ext_wrenches: known net external wrenches {link: 6-vector in link frame} (others 0).
        Returns dict(tau (joint_names order), tau_by_name, ext_wrenches {link: 6-vector},
        tau_pseudo {F/T joint: 'torque' about the fake axis}, d, y)."""
        idyn = self.idyn
        if unknown_wrench_links is not None:
            self.set_unknown_wrench_links(unknown_wrench_links)
        y = self.measurement_vector(ddq, ft, ext_wrenches)
        jp = self.update(q, dq, y, gravity, base_omega, base_acc)
        if not self.solver.doEstimate():
            raise RuntimeError("BerdySparseMAPSolver.doEstimate() failed")
        d = idyn.VectorDynSize(self.n_d)
        self.solver.getLastEstimate(d)
        tau_v = idyn.VectorDynSize(self.model.getNrOfDOFs())
        if not self.helper.extractJointTorquesFromDynamicVariables(d, jp, tau_v):
            raise RuntimeError("extractJointTorquesFromDynamicVariables failed")
        tau_i = tau_v.toNumPy()
        lw = idyn.LinkWrenches(self.model)
        self.helper.extractLinkNetExternalWrenchesFromDynamicVariables(d, lw)
        ext = {self.model.getLinkName(l): lw(l).toNumPy().copy() for l in range(self.model.getNrOfLinks())}
        for name in self._unknown_names:  # lumped links: report in their own frame too
            if name not in ext:
                link, X = self._ext_link(name)
                ext[name] = np.linalg.solve(X, ext[link])
        return dict(tau=tau_i[self.user_to_idyn],
                    tau_by_name=dict(zip(self.idyn_dof_names, tau_i)),
                    tau_pseudo={n: tau_i[self.idyn_dof_names.index(n)] for n in self.pseudo_joints},
                    ext_wrenches=ext, d=d.toNumPy(), y=y)

    def dynamic_variable_layout(self):
        """[(type name, id, offset, size)] of the dynamic-variable vector d."""
        names = {getattr(self.idyn, k): k for k in ("LINK_BODY_PROPER_ACCELERATION",
                 "NET_INT_AND_EXT_WRENCHES_ON_LINK_WITHOUT_GRAV", "JOINT_WRENCH", "DOF_TORQUE",
                 "NET_EXT_WRENCH", "DOF_ACCELERATION", "LINK_BODY_PROPER_CLASSICAL_ACCELERATION")
                 if hasattr(self.idyn, k)}
        return [(names.get(v.type, v.type), v.id, v.range.offset, v.range.size)
                for v in self.helper.getDynamicVariablesOrdering()]
