"""What a background compile runs (sparsedyn.jit starts a subprocess running
`compile_now("sparsedyn.jit_warm:<function>")`; `sparsedyn warmup` runs them all, ALL), one
function per family of numba kernels: each runs its kernels once on the embedded humanoid, on
one thread and on two, which compiles them into numba's on-disk cache for every plan (their
argument types do not depend on the model)."""
from __future__ import annotations

import numpy as np

from . import models


#: a proper prior on every variable: what the augmented MAP form needs
PRIOR = {"prior": {"tau": 1e3, "fx": 1e4, "a": 1e2, "f": 1e4, "qdd": 1e2}}


def fused_kernels():
    """The fused assembly + LU kernel of inverse and forward dynamics and exact estimation."""
    from .kernels.input_copies import copy_checked
    from .problems import compile, forward_dynamics
    compile(forward_dynamics(models.humanoid())).kernel("numba").compile_kernels()
    copy_checked(np.zeros((2, 3)), np.empty((2, 3)), 0, 2)     # plan.solve's input copies


def map_kernels():
    """The MAP estimation kernel (normal form), with the plan's and with per-sample numbers."""
    _estimation_kernels("normal", (False, True))


def augmented_kernels():
    """The MAP estimation kernel in the augmented (quasi-definite) form."""
    _estimation_kernels("augmented", (False,))


def _estimation_kernels(form, per_sample_options):
    from .estimation import EstimationProblem, compile_estimation
    from .sensors import ForceTorque, JointAccelerations
    model = models.humanoid()
    sensors = [JointAccelerations(), ForceTorque("l_foot_ft_sensor"), ForceTorque("r_foot_ft_sensor")]
    problem = EstimationProblem(model, sensors, unknown_wrenches=["l_foot", "r_foot"])
    B = 64                         # two groups of lanes: the parallel kernel runs too
    q = np.tile(model.neutral_configuration(), (B, 1))
    v, readings = np.zeros((B, model.nv)), {s.name: np.zeros((B, s.size)) for s in sensors}
    y = problem.rows.readings_vector(problem.check_readings(readings, B), B)
    for per_sample in per_sample_options:
        plan = compile_estimation(problem, method="map", map_form=form, per_sample=per_sample,
                                  covariances=PRIOR if form == "augmented" else None)
        for threads in (1, 2):             # (two groups run on one core too)
            plan.route("numba").run(q, v, y, threads=threads)


def mass_matrix_kernels():
    """The compiled CRBA and L^T L, every output form (dense and packed)."""
    from .ir.mass_matrix import MassMatrixProgram
    from .kernels import crba_numba
    model = models.humanoid()
    program = MassMatrixProgram(model)
    q = np.tile(model.neutral_configuration(), (64, 1))
    for threads in (1, 2):
        for packed in (False, True):
            for factor in (False, True):
                crba_numba.run(program, q, factor=factor, threads=threads, packed=packed)


def pv_osimr_kernels():
    """The compiled PV-OSIMr Delassus matrix, serial and parallel, and its C library on vectors
    (backends/c_pv_osimr.py; where a C compiler exists)."""
    from .backends.c_pv_osimr import library
    from .contacts import Contact, resolve_contacts
    from .kernels.pv_osimr_numba import program_for, run
    library()
    model = models.humanoid()
    q = np.tile(model.neutral_configuration(), (64, 1))
    contacts = [Contact("l_sole", "6d"), Contact("r_index_tip", "3d")]
    program = program_for(model, resolve_contacts(model, contacts))
    run(program, q, parallel=False)
    run(program, q, parallel=True)


def derivative_kernels():
    """The analytical derivatives' tangent right-hand sides and multi-right-hand-side LU: the
    pruned substitutions on a group of states below PRUNED_MIN_STATES and on one from it on,
    the unpruned ones (plans whose factorization checks its accuracy) on their own."""
    from .kinematics import joint_transforms
    from .problems import compile, forward_dynamics
    from .problems.derivative_solves import PRUNED_MIN_STATES, solve_many
    model = models.humanoid()
    plan = compile(forward_dynamics(model))
    for B in (1, PRUNED_MIN_STATES):
        q = np.tile(model.neutral_configuration(), (B, 1))
        v = np.zeros((B, model.nv))
        plan.solve(q, v, tau=v, derivatives=True, backend="numba")
    values = plan.system.values(joint_transforms(model, q[:1]))
    solve_many(plan.factorization, values, np.zeros((1, plan.factorization.program.n, 2)))


def assembly_lu_kernels():
    """The compiled assembly of D, b and the LU program run apart (Nori's system for the Delassus
    matrix; a Factorization's numba backend; an estimation plan's check of its sensor rows)."""
    from .contacts import Contact
    from .delassus import delassus
    from .estimation import EstimationProblem
    from .estimation.compiled_rows import sensor_assembly
    from .sensors import ForceTorque, JointAccelerations
    model = models.humanoid()
    q = np.tile(model.neutral_configuration(), (2, 1))
    delassus(model, q, [Contact("l_sole", "6d"), Contact("r_index_tip", "3d")], method="sparse",
             backend="numba")
    sensor_assembly(EstimationProblem(model, [JointAccelerations(), ForceTorque("l_foot_ft_sensor")],
                                      unknown_wrenches=["l_foot"]))


def planner_kernels():
    """The planner's structural counts and the dependency levels of its programs."""
    from .problems import compile, forward_dynamics
    compile(forward_dynamics(models.humanoid()))


#: every family, in the order `sparsedyn warmup` compiles them
ALL = (planner_kernels, fused_kernels, map_kernels, augmented_kernels, mass_matrix_kernels,
       pv_osimr_kernels, assembly_lu_kernels, derivative_kernels)
