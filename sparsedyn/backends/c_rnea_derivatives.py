"""C statements of inverse dynamics' derivatives for one state: dtau/dq (Pinocchio's tangent
space), dtau/dv and dtau/dqdd = M, by Carpentier and Mansard's recursion in one frame
("Analytical derivatives of rigid body dynamics algorithms", RSS 2018; Pinocchio's
computeRNEADerivatives), written over the compiled mass matrix's program (ir/mass_matrix.py,
c_mass_matrix._forward: placements, inertias I_i and DoF motions J_k in the root's frame).

The root's frame, held where it is at this instant, is an inertial frame: the formulas below
are the world-frame ones, with gravity turned into it (a_0 = E_root a_0^world, angular-first,
Nori Sec. IV-A). Per body i (parent p; a root's v_p = 0, a_p = a_0), forward:

    v_i = v_p + sum_k J_k qd_k,      a_i = a_p + sum_k J_k qdd_k + v_i x (v_i - v_p)
    h_i = I_i v_i,                   f_i = I_i a_i + v_i x* h_i                       (RNEA)
    B_i x = I_i (x x v_i) + x x* h_i + v_i x* (I_i x)
    per DoF j of i:  dv_j = v_p x J_j,  u_j = a_p x J_j + v_p x dv_j,  c_j = (v_i + v_p) x J_j

Why: a direction q_j turns body(j)'s subtree rigidly about J_j, every attached vector by
J_j x (.), but not v_p nor a_p; turning everything leaves every tau unchanged, so what remains
is the subtree's velocities moving by dv_j = -J_j x v_p and its accelerations by
u_j + dv_j x v_k (k in the subtree), and f_k by I_k u_j + B_k dv_j. A direction qd_j moves
the subtree's velocities by J_j and accelerations by J_j x v_k + c_j: f_k by B_k J_j + I_k c_j.
Backward (children first), the composite sums over subtree(i): I^c_i, B^c_i, F_i; per DoF j:

    a_j = I^c_i J_j,   b_j = B^c_i^T J_j,
    dF^q_j = J_j x* F_i + I^c_i u_j + B^c_i dv_j,   dF^v_j = B^c_i J_j + I^c_i c_j
    m in body(j)'s subtree (J_m turns too, which cancels J_j x* F: tau's invariance):
        dtau_m/dq_j = a_m . u_j + b_m . dv_j,     dtau_m/dv_j = b_m . J_j + a_m . c_j
    m a strict ancestor:  dtau_m/dq_j = J_m . dF^q_j,   dtau_m/dv_j = J_m . dF^v_j
    M_jm = J_m . a_j (+ armature on the diagonal; Featherstone Table 6.2)

so a (DoF, DoF) pair costs a few 6-vector dot products and each body a few 6x6 products
(Carpentier and Mansard's O(n d)). Writes: `dq(m, j)` and `dv(m, j)` through the caller's
`store(kind, m, j, expr)` (structurally zero pairs are not written), M's packed nonzeros to
`pk[e]` (the program's pair order). The folds' precondition (c_fold) holds as in
c_mass_matrix: every output is checked finite by the unit.
"""
from __future__ import annotations

from typing import NamedTuple


from .c_fold import Locals, fadd, fmul, fsub, fsum, lit
from .c_mass_matrix import _forward, _Slots
from .c_source import _transform


def _cross3(a, b):
    return [fsub(fmul(a[(k + 1) % 3], b[(k + 2) % 3], lit),
                 fmul(a[(k + 2) % 3], b[(k + 1) % 3], lit), lit) for k in range(3)]


def mcross(x, y):
    """x x y of two motions (angular-first): [w_x x w_y; w_x x v_y + v_x x w_y]."""
    return _cross3(x[:3], y[:3]) + [fadd(s, t, lit) for s, t in
                                    zip(_cross3(x[:3], y[3:]), _cross3(x[3:], y[:3]))]


def fcross(x, h):
    """x x* h, motion x on force h (angular-first): [w x n + v x f; w x f]."""
    return [fadd(s, t, lit) for s, t in zip(_cross3(x[:3], h[:3]), _cross3(x[3:], h[3:]))] \
        + _cross3(x[:3], h[3:])


def inertia_times(I, x):
    """I x for I as 10 numbers (m, h = m c, Ibar's xx xy xz yy yz zz): [Ibar w + h x v;
    m v - h x w] (c_mass_matrix._backward's F)."""
    m, h, (xx, xy, xz, yy, yz, zz) = I[0], I[1:4], I[4:]
    Ib = [[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]
    hv, hw = _cross3(h, x[3:]), _cross3(h, x[:3])
    return [fadd(fsum([fmul(Ib[a][b], x[b], lit) for b in range(3)], lit), hv[a], lit)
            for a in range(3)] + [fsub(fmul(m, x[3 + a], lit), hw[a], lit) for a in range(3)]


def add(x, y):
    return [fadd(s, t, lit) for s, t in zip(x, y)]


def dot(x, y):
    return fsum([fmul(s, t, lit) for s, t in zip(x, y)], lit)


def combine(columns, x):
    """sum_c columns[c] x_c (a 6x6 matrix stored by columns times x)."""
    return [fsum([fmul(columns[c][r], x[c], lit) for c in range(6)], lit) for r in range(6)]


def _rotate(R, x):
    """R x for R's 9 row-major entries."""
    return [fsum([fmul(R[3 * r + c], x[c], lit) for c in range(3)], lit) for r in range(3)]


def _unit(c):
    return [1.0 if r == c else 0.0 for r in range(6)]


class DerivativeStatements(NamedTuple):
    """pieces: per body the lines of its forward step, then of its backward one; n_slots: the
    work slots w[]; checked: slots whose finiteness stands for the folds' (c_mass_matrix);
    mul, add: the operations as generated (opcount's convention)."""
    pieces: list
    n_slots: int
    checked: list
    mul: int
    add: int


def derivative_statements(program, a0, store, fx_bodies=()):
    """The module doc's steps for a MassMatrixProgram, reading q[], v[], a[] (qdd), gravity a0
    (6, angular-first, in the world) and, on the bodies fx_bodies, external wrenches x[6 e ..]
    (body frame, angular-first, e: the body's place in fx_bodies), writing through
    store(kind, m, j, expr) -> line (kind "dq" or "dv") and pk[e] (M packed)."""
    jt, mm, N, nv = program.joints, program.arrays, program.nbodies, program.nv
    W = _Slots()
    R, P, IC, J = [None] * N, [None] * N, [None] * N, [None] * nv
    ov, oa, Bc, F = [None] * N, [None] * N, [None] * N, [None] * N
    dvj, uj, cj = [None] * nv, [None] * nv, [None] * nv
    parent = [int(p) for p in jt.parent]
    dofs = [range(int(f), int(f) + int(c)) for f, c in mm.body_dofs]
    anc = []                                   # strict ancestor DoFs of body i, root first
    for i in range(N):
        anc.append([] if parent[i] < 0 else anc[parent[i]] + list(dofs[parent[i]]))
    last = {i: max([c for c in range(N) if parent[c] == i], default=i) for i in range(N)}
    put = (lambda V, xs: [W.put(V, x) for x in xs])
    pieces = []
    for i in range(N):
        out = [f"  /* body {i} forward */"]
        V = Locals(out, lit)
        p = parent[i]
        if p < 0:                              # a_0 in the root's frame: E a_0 (E: its joint's)
            _transform(i, jt, V, out)
            E = [V[f"E{e}"] for e in range(9)]
            vp, ap = [0.0] * 6, put(V, _rotate(E, [float(x) for x in a0[:3]])
                                    + _rotate(E, [float(x) for x in a0[3:]]))
        else:
            vp, ap = ov[p], oa[p]
        _forward(i, jt, mm, W, R, P, IC, J, out)
        Jv = [fsum([fmul(J[k][r], f"v[{k}]", lit) for k in dofs[i]], lit) for r in range(6)]
        ov[i] = put(V, add(vp, Jv))
        Ja = [fsum([fmul(J[k][r], f"a[{k}]", lit) for k in dofs[i]], lit) for r in range(6)]
        Jv = [fsub(s, t, lit) for s, t in zip(ov[i], vp)]
        oa[i] = put(V, add(add(ap, Ja), mcross(ov[i], Jv)))
        h = put(V, inertia_times(IC[i], ov[i]))
        f = add(inertia_times(IC[i], oa[i]), fcross(ov[i], h))
        if i in fx_bodies:
            # f_i -= the body-frame wrench (n, f) in the root's frame, [R n + p x R f; R f]:
            # attached to body i, it turns with the subtree as f_i does
            e = 6 * fx_bodies.index(i)
            Rn = _rotate(R[i], [f"x[{e + r}]" for r in range(3)])
            Rf = _rotate(R[i], [f"x[{e + 3 + r}]" for r in range(3)])
            f = [fsub(s, t, lit) for s, t in zip(f, add(Rn, _cross3(P[i], Rf)) + Rf)]
        F[i] = put(V, f)
        Bc[i] = [put(V, add(add(inertia_times(IC[i], mcross(_unit(c), ov[i])),
                                fcross(_unit(c), h)),
                            fcross(ov[i], inertia_times(IC[i], _unit(c)))))
                 for c in range(6)]
        W.release(h)
        for j in dofs[i]:
            dvj[j] = put(V, mcross(vp, J[j]))
            uj[j] = put(V, add(mcross(ap, J[j]), mcross(vp, dvj[j])))
            cj[j] = put(V, mcross(add(ov[i], vp), J[j]))
        if p < 0:
            W.release(ap)
        for b in [b for b in range(i + 1) if last[b] == i and b != i]:   # children all done
            W.release(R[b] + P[b] + ov[b] + oa[b])
        if last[i] == i:                       # a leaf: nothing reads its placement
            W.release(R[i] + ov[i] + oa[i])
        pieces.append(out)
    leaves = [i for i in range(N) if last[i] == i]
    checked = [x for i in leaves for x in P[i] if isinstance(x, str)]
    for i in range(N - 1, -1, -1):
        out = [f"  /* body {i} backward */"]
        V = Locals(out, lit)
        Ic, Bi, Fi = IC[i], Bc[i], F[i]
        aa = {m: put(V, inertia_times(Ic, J[m])) for m in dofs[i]}
        bb = {m: put(V, [dot(Bi[c], J[m]) for c in range(6)]) for m in dofs[i]}
        for m in dofs[i]:                      # m in the subtree of every j in anc(m) U own
            for j in anc[i] + list(dofs[i]):
                out.append(store("dq", m, j, fadd(dot(aa[m], uj[j]), dot(bb[m], dvj[j]),
                                                  lit)))
                out.append(store("dv", m, j, fadd(dot(bb[m], J[j]), dot(aa[m], cj[j]), lit)))
        for j in dofs[i]:
            if anc[i]:
                dFq = put(V, add(add(fcross(J[j], Fi), inertia_times(Ic, uj[j])),
                                 combine(Bi, dvj[j])))
                dFv = put(V, add(combine(Bi, J[j]), inertia_times(Ic, cj[j])))
                for m in anc[i]:
                    out.append(store("dq", m, j, dot(J[m], dFq)))
                    out.append(store("dv", m, j, dot(J[m], dFv)))
                W.release(dFq + dFv)
            for e in range(mm.pair_ptr[j], mm.pair_ptr[j + 1]):       # M_jm, m <= j
                x = dot(J[int(mm.pair_col[e])], aa[j])
                if e == mm.pair_ptr[j + 1] - 1 and mm.armature[j] != 0.0:
                    x = fadd(x, float(mm.armature[j]), lit)
                V.store(f"pk[{e}]", x)
        p = parent[i]
        if p >= 0:                             # composites into the parent's, same frame
            for mine, theirs in [(Ic, IC[p]), (Fi, F[p])] + list(zip(Bi, Bc[p])):
                for c in range(len(mine)):
                    if isinstance(theirs[c], str) and W.refs[theirs[c]] == 1:     # in place
                        V.store(theirs[c], fadd(theirs[c], mine[c], lit))
                    else:
                        x = W.put(V, fadd(theirs[c], mine[c], lit))
                        W.release([theirs[c]])
                        theirs[c] = x
            W.release(Ic + Fi + [x for col in Bi for x in col])
        else:
            checked += [x for x in Ic + Fi if isinstance(x, str)]
        for m in dofs[i]:
            W.release(aa[m] + bb[m] + dvj[m] + uj[m] + cj[m] + J[m])
        pieces.append(out)
    lines = [line for piece in pieces for line in piece]
    mul = sum(line.count(" * ") for line in lines)
    add_ = sum(line.count(" + ") + line.count(" - ") for line in lines)
    return DerivativeStatements(pieces, W.n, checked, mul, add_)
