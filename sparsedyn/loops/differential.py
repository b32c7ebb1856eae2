"""Differential drive: two rotors driving two links (seed 003, Fig. 1b: the Tello leg's hip and
knee-ankle differentials; a cluster of l = 4 bodies, Sec. VI).

Roles (rotor1, rotor2, link1, link2): both rotors and link1 hang from the cluster's parent,
link2 from link1. The rotors turn at N times their cranks, u_i = q_ri / N. The sum of the crank
angles turns link1 (a bevel differential); their difference turns a crank of length a on the
parent that drives link2 through a rod of length b attached at radius c from link2's joint, the
two pivots a distance g apart (a crank-rocker four-bar written in the joint angles):

    phi_1 = q_l1 - (u_1 + u_2) / 2
    phi_2 = |a e(theta) - g x - c e(psi)|^2 - b^2,   theta = theta_0 + (u_1 - u_2) / 2,
                                                     psi = psi_0 + q_l2,  e(t) = (cos t, sin t)

theta_0 closes the loop at psi_0 (assembly mode: crank ahead of the pivot line). The links are
the independent coordinates y (so the reflected-inertia approximation keeps a tree of links);
the rotors are dependent: K_z = d phi / d q_rotors is invertible away from the crank's dead
points. K = d phi / dq and k = -Kdot qd are analytic (eq. 2; checked by finite differences in
tests/test_loops.py).
"""
from __future__ import annotations

import numpy as np

from ..model.joints import RevoluteJoint
from ..opcount import charge
from .submechanisms import ImplicitConstraint


class DifferentialDrive(ImplicitConstraint):
    kind = "differential"
    rotor_roles = (0, 1)

    def __init__(self, rotor1, rotor2, link1, link2, ratio, crank=0.04, rod=0.2, rocker=0.05,
                 ground=0.2, psi0=np.pi / 2, name=None):
        N, a, b, c, g = float(ratio), float(crank), float(rod), float(rocker), float(ground)
        self.ratio, self.lengths, self.psi0 = N, (a, b, c, g), float(psi0)
        # theta_0: |a e(theta) - R| = b with R = g x + c e(psi_0) (law of cosines about R's angle)
        R = np.array([g + c * np.cos(psi0), c * np.sin(psi0)])
        rho, alpha = np.hypot(*R), np.arctan2(R[1], R[0])
        self.theta0 = alpha + np.arccos((a * a + rho * rho - b * b) / (2 * a * rho))

        def angles(q):
            return self.theta0 + (q[:, 0] - q[:, 1]) / (2 * N), self.psi0 + q[:, 3]

        def e(q):
            th, ps = angles(q)
            return th, ps, a * np.cos(th) - g - c * np.cos(ps), a * np.sin(th) - c * np.sin(ps)

        def phi(q):
            _, _, ex, ey = e(q)
            return np.stack((q[:, 2] - (q[:, 0] + q[:, 1]) / (2 * N), ex * ex + ey * ey - b * b), 1)

        def K(q):
            th, ps, ex, ey = e(q)
            d_th = 2 * a * (ey * np.cos(th) - ex * np.sin(th)) / (2 * N)    # d phi_2 / d q_r1
            d_ps = 2 * c * (ex * np.sin(ps) - ey * np.cos(ps))               # d phi_2 / d q_l2
            charge(11, 8, kind="differential K")
            one, zero = np.ones_like(th), np.zeros_like(th)
            return np.stack((np.stack((-one / (2 * N), -one / (2 * N), one, zero), 1),
                             np.stack((d_th, -d_th, zero, d_ps), 1)), 1)

        def k(q, qd):
            th, ps, ex, ey = e(q)
            w_th, w_ps = (qd[:, 0] - qd[:, 1]) / (2 * N), qd[:, 3]
            # second derivatives of phi_2 in (theta, psi); k = -Kdot qd = -(w^T Hess(phi_2) w)
            f_tt = 2 * a * (a - ey * np.sin(th) - ex * np.cos(th))
            f_tp = -2 * a * c * np.cos(th - ps)
            f_pp = 2 * c * (c + ex * np.cos(ps) + ey * np.sin(ps))
            charge(20, 14, kind="differential k")
            return np.stack((np.zeros_like(th), -(w_th * w_th * f_tt + 2 * w_th * w_ps * f_tp
                                                   + w_ps * w_ps * f_pp)), 1)

        super().__init__(name or f"differential:{link1}+{link2}", (rotor1, rotor2, link1, link2),
                         [2, 3], phi, K, k, z_guess=(0.0, 0.0))

        # G at the nominal assembly (q = 0), role order: the transmission ratios that the
        # reflected-inertia approximation (seed 003, Sec. II-C) charges to the links
        K0 = K(np.zeros((1, 4)))[0]
        G = np.zeros((4, 2))
        G[2:, :] = np.eye(2)
        G[:2, :] = -np.linalg.solve(K0[:, :2], K0[:, 2:])
        self.G_role = G

    def _check_model(self, model):
        self._require_1dof(model, (RevoluteJoint,))


__all__ = ["DifferentialDrive"]
