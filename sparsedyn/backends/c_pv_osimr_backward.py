"""C of the backward sweep of Algorithm 3 (seed 000, lines 2-15 with the span recursions (16)-(17))
for one group of LANES states (c_pv_osimr_source's module doc): kernels/pv_osimr_numba._state's
body loop statement by statement on vd values (its comments give the equations: Featherstone
eq. 4.29 for the joint transforms, seed eq. (7)-(9) for the pivots, spatial.inertia_to_parent and
spatial.rows_times_transform for the congruences). A pivot <= tol marks its lane's status with
the body (the first in sweep order) instead of stopping: the lane's outputs are then
meaningless, the other lanes' unaffected."""

BACKWARD = r"""
/* lines 2-15 for one group; st: per lane -1 or the first body whose pivot failed */
static void backward(const Prog *P, const vd *q, vd *IA, vd *Rst, vd *Om, vl *st)
{
  vd E[9], RJ[9], pJ[3], U[36], D[36], Dinv[36], V[36], RS[36], RSD[36], T[36];
  vd r0, r1, r2, e00, e01, e02, e10, e11, e12, e20, e21, e22, dinv;
  const vl zero = {0};
  long i, k, a, b, row, col, t, u, blk;
  for (i = 0; i < P->nb * 36; i++) IA[i] = (vd){0.0} + P->inertia[i];        /* line 2 */
  for (k = 0; k < P->ne; k++)                                                  /* line 4 */
    for (a = 0; a < 36; a++) {
      Rst[P->ee_slot[k] * 36 + a] = (vd){0.0} + P->K0[k * 36 + a];
      Om[P->ee_slot[k] * 36 + a] = (vd){0.0};
    }
  for (i = P->nb - 1; i >= 0; i--) {                                           /* line 5 */
    long jt = P->jtype[i], n = P->nvj[i], p = P->parent[i], h = P->half[i], d, c;
    const double *XR = P->XT_R + 9 * i, *XP = P->XT_p + 3 * i, *ax = P->axis + 3 * i;
    const long *Si = P->S_idx + i * 18, *nz = P->S_nnz + i * 6;
    const double *Sv = P->S_val + i * 18;
    vl bad;
    k = P->qidx[i];
    pJ[0] = pJ[1] = pJ[2] = (vd){0.0};
    if (jt == REVOLUTE || jt == PLANAR) {
      double a0 = 0.0, a1 = 0.0, a2 = 1.0;
      vd th, sn, cs, c1;
      if (jt == REVOLUTE) { a0 = ax[0]; a1 = ax[1]; a2 = ax[2]; th = q[k]; }
      else { th = q[k + 2]; pJ[0] = q[k]; pJ[1] = q[k + 1]; }
      sd_sincos(th, &sn, &cs);
      c1 = 1.0 - cs;
      RJ[0] = 1.0 - c1 * (a1 * a1 + a2 * a2);
      RJ[4] = 1.0 - c1 * (a0 * a0 + a2 * a2);
      RJ[8] = 1.0 - c1 * (a0 * a0 + a1 * a1);
      RJ[1] = -sn * a2 + c1 * a0 * a1;
      RJ[3] = sn * a2 + c1 * a0 * a1;
      RJ[2] = sn * a1 + c1 * a0 * a2;
      RJ[6] = -sn * a1 + c1 * a0 * a2;
      RJ[5] = -sn * a0 + c1 * a1 * a2;
      RJ[7] = sn * a0 + c1 * a1 * a2;
    } else if (jt == PRISMATIC) {
      for (a = 0; a < 9; a++) RJ[a] = (vd){0.0} + (a % 4 == 0 ? 1.0 : 0.0);
      for (a = 0; a < 3; a++) pJ[a] = q[k] * ax[a];
    } else if (jt == SPHERICAL) {
      quat_rot(q[k], q[k + 1], q[k + 2], q[k + 3], RJ);
    } else {
      quat_rot(q[k + 3], q[k + 4], q[k + 5], q[k + 6], RJ);
      for (a = 0; a < 3; a++) pJ[a] = q[k + a];
    }
    for (a = 0; a < 3; a++) {
      T[a] = XP[a] + XR[a * 3] * pJ[0] + XR[a * 3 + 1] * pJ[1] + XR[a * 3 + 2] * pJ[2];
      for (b = 0; b < 3; b++)
        E[b * 3 + a] = XR[a * 3] * RJ[b] + XR[a * 3 + 1] * RJ[3 + b] + XR[a * 3 + 2] * RJ[6 + b];
    }
    r0 = T[0]; r1 = T[1]; r2 = T[2];
    e00 = E[0]; e01 = E[1]; e02 = E[2]; e10 = E[3]; e11 = E[4]; e12 = E[5];
    e20 = E[6]; e21 = E[7]; e22 = E[8];
    dinv = (vd){0.0};
    if (n == 1) {                                     /* line 8: u = H^A s, d = s^T u */
      double a0 = ax[0], a1 = ax[1], a2 = ax[2];
      vd dd;
      for (row = 0; row < 6; row++)
        U[row * 6] = B6(IA, i, row, h) * a0 + B6(IA, i, row, h + 1) * a1 + B6(IA, i, row, h + 2) * a2;
      dd = U[h * 6] * a0 + U[(h + 1) * 6] * a1 + U[(h + 2) * 6] * a2 + P->armature[i * 6];
      bad = ~(dd > P->tol);
      dinv = 1.0 / dd;
      if (p >= 0)                                     /* lines 10-11 */
        for (row = 0; row < 6; row++) {
          vd v = U[row * 6] * dinv;
          for (col = row; col < 6; col++) {
            B6(IA, i, row, col) -= v * U[col * 6];
            B6(IA, i, col, row) = B6(IA, i, row, col);
          }
        }
    } else {
      bad = pivot(P, n, i, IA, U, D, Dinv);
      for (row = 0; row < 6; row++)                   /* V = U D^-1 */
        for (a = 0; a < n; a++) {
          vd acc = {0.0};
          for (b = 0; b < n; b++) acc += U[row * 6 + b] * Dinv[b * 6 + a];
          V[row * 6 + a] = acc;
        }
      if (p >= 0)                                     /* lines 10-11 */
        for (row = 0; row < 6; row++)
          for (col = row; col < 6; col++) {
            vd acc = {0.0};
            for (a = 0; a < n; a++) acc += V[row * 6 + a] * U[col * 6 + a];
            B6(IA, i, row, col) -= acc;
            B6(IA, i, col, row) = B6(IA, i, row, col);
          }
    }
    bad &= *st < zero;                                /* the first failure of each lane */
    *st = (*st & ~bad) | ((zero + i) & bad);
    if (p >= 0) {                                     /* IA[p] += X^T IA[i] X */
      for (blk = 0; blk < 3; blk++) {                 /* T[0..2] = A1, B1, C1; T[3] scratch */
        long ro = blk == 2 ? 3 : 0, co = blk == 0 ? 0 : 3;
        for (a = 0; a < 3; a++) {
          vd x0 = B6(IA, i, ro + a, co), x1 = B6(IA, i, ro + a, co + 1), x2 = B6(IA, i, ro + a, co + 2);
          T[27 + a * 3] = x0 * e00 + x1 * e10 + x2 * e20;
          T[27 + a * 3 + 1] = x0 * e01 + x1 * e11 + x2 * e21;
          T[27 + a * 3 + 2] = x0 * e02 + x1 * e12 + x2 * e22;
        }
        for (b = 0; b < 3; b++) {
          vd w0 = T[27 + b], w1 = T[30 + b], w2 = T[33 + b];
          T[blk * 9 + b] = e00 * w0 + e10 * w1 + e20 * w2;
          T[blk * 9 + 3 + b] = e01 * w0 + e11 * w1 + e21 * w2;
          T[blk * 9 + 6 + b] = e02 * w0 + e12 * w1 + e22 * w2;
        }
      }
      for (a = 0; a < 3; a++) {                       /* T[3] = B2 = B1 + rx C1 */
        vd c0 = T[18 + a], c1 = T[21 + a], c2 = T[24 + a];
        T[27 + a] = T[9 + a] + r1 * c2 - r2 * c1;
        T[30 + a] = T[12 + a] + r2 * c0 - r0 * c2;
        T[33 + a] = T[15 + a] + r0 * c1 - r1 * c0;
      }
      for (a = 0; a < 3; a++) {
        vd b0 = T[9 + a * 3], b1 = T[9 + a * 3 + 1], b2 = T[9 + a * 3 + 2];
        vd c0 = T[27 + a * 3], c1 = T[27 + a * 3 + 1], c2 = T[27 + a * 3 + 2];
        T[a] += r1 * b2 - r2 * b1;
        T[3 + a] += r2 * b0 - r0 * b2;
        T[6 + a] += r0 * b1 - r1 * b0;
        T[a * 3] += r1 * c2 - r2 * c1;
        T[a * 3 + 1] += r2 * c0 - r0 * c2;
        T[a * 3 + 2] += r0 * c1 - r1 * c0;
      }
      for (a = 0; a < 3; a++)
        for (b = 0; b < 3; b++) {
          B6(IA, p, a, b) += T[a * 3 + b];
          B6(IA, p, a, 3 + b) += T[27 + a * 3 + b];
          B6(IA, p, 3 + b, a) += T[27 + a * 3 + b];
          B6(IA, p, 3 + a, 3 + b) += T[18 + a * 3 + b];
        }
    }
    d = P->d_slot[i];
    if (d < 0) continue;                              /* line 14 */
    c = 6;
    if (P->branching[i] && n == 1) {                  /* lines 7, 15: Om = s s^T / d */
      for (row = 0; row < 6; row++)
        for (col = 0; col < 6; col++) {
          B6(Om, d, row, col) = (vd){0.0};
          B6(Rst, d, row, col) = (vd){0.0} + (row == col ? 1.0 : 0.0);
        }
      for (a = 0; a < 3; a++)
        for (b = 0; b < 3; b++) B6(Om, d, h + a, h + b) = ax[a] * dinv * ax[b];
      if (p >= 0)                                     /* line 13: (1 - s u^T / d) X */
        for (a = 0; a < 3; a++) {
          vd f = ax[a] * dinv;
          for (col = 0; col < 6; col++) B6(Rst, d, h + a, col) -= f * U[col * 6];
        }
    } else if (P->branching[i]) {                     /* line 15: S D^-1 S^T */
      for (row = 0; row < 36; row++) Om[d * 36 + row] = (vd){0.0};
      for (a = 0; a < n; a++)
        for (b = 0; b < n; b++)
          for (t = 0; t < nz[a]; t++)
            for (u = 0; u < nz[b]; u++)
              B6(Om, d, Si[a * 3 + t], Si[b * 3 + u]) += Sv[a * 3 + t] * Dinv[a * 6 + b] * Sv[b * 3 + u];
      if (p >= 0) {                                   /* line 13: (1 - S V^T) X */
        for (row = 0; row < 6; row++)
          for (col = 0; col < 6; col++) B6(Rst, d, row, col) = (vd){0.0} + (row == col ? 1.0 : 0.0);
        for (a = 0; a < n; a++)
          for (t = 0; t < nz[a]; t++)
            for (col = 0; col < 6; col++)
              B6(Rst, d, Si[a * 3 + t], col) -= Sv[a * 3 + t] * V[col * 6 + a];
      }
    } else if (n == 1) {
      double a0 = ax[0], a1 = ax[1], a2 = ax[2];
      c = P->rows[d];
      for (k = 0; k < c; k++)                         /* R s in U's second column */
        U[k * 6 + 1] = B6(Rst, d, k, h) * a0 + B6(Rst, d, k, h + 1) * a1 + B6(Rst, d, k, h + 2) * a2;
      for (k = 0; k < c; k++) {                       /* eq. (16), upper triangle */
        vd f = U[k * 6 + 1] * dinv;
        for (a = k; a < c; a++) B6(Om, d, k, a) += f * U[a * 6 + 1];
      }
      if (p >= 0)                                     /* eq. (17) */
        for (k = 0; k < c; k++) {
          vd f = U[k * 6 + 1] * dinv;
          for (col = 0; col < 6; col++) B6(Rst, d, k, col) -= f * U[col * 6];
        }
    } else {
      c = P->rows[d];
      for (k = 0; k < c; k++) {                       /* RS = R S, RSD = R S D^-1 */
        for (a = 0; a < n; a++) {
          vd acc = {0.0};
          for (t = 0; t < nz[a]; t++) acc += B6(Rst, d, k, Si[a * 3 + t]) * Sv[a * 3 + t];
          RS[k * 6 + a] = acc;
        }
        for (a = 0; a < n; a++) {
          vd acc = {0.0};
          for (b = 0; b < n; b++) acc += RS[k * 6 + b] * Dinv[b * 6 + a];
          RSD[k * 6 + a] = acc;
        }
      }
      for (k = 0; k < c; k++)                         /* eq. (16), upper triangle */
        for (b = k; b < c; b++) {
          vd acc = {0.0};
          for (a = 0; a < n; a++) acc += RSD[k * 6 + a] * RS[b * 6 + a];
          B6(Om, d, k, b) += acc;
        }
      if (p >= 0)                                     /* eq. (17) */
        for (k = 0; k < c; k++)
          for (col = 0; col < 6; col++) {
            vd acc = {0.0};
            for (a = 0; a < n; a++) acc += RSD[k * 6 + a] * U[col * 6 + a];
            B6(Rst, d, k, col) -= acc;
          }
    }
    if (p >= 0)                                       /* R[d, :c] <- R[d, :c] X */
      for (k = 0; k < c; k++) {
        vd x0 = B6(Rst, d, k, 0), x1 = B6(Rst, d, k, 1), x2 = B6(Rst, d, k, 2);
        vd x3 = B6(Rst, d, k, 3), x4 = B6(Rst, d, k, 4), x5 = B6(Rst, d, k, 5);
        vd l0 = x3 * e00 + x4 * e10 + x5 * e20;
        vd l1 = x3 * e01 + x4 * e11 + x5 * e21;
        vd l2 = x3 * e02 + x4 * e12 + x5 * e22;
        B6(Rst, d, k, 0) = x0 * e00 + x1 * e10 + x2 * e20 - (l1 * r2 - l2 * r1);
        B6(Rst, d, k, 1) = x0 * e01 + x1 * e11 + x2 * e21 - (l2 * r0 - l0 * r2);
        B6(Rst, d, k, 2) = x0 * e02 + x1 * e12 + x2 * e22 - (l0 * r1 - l1 * r0);
        B6(Rst, d, k, 3) = l0;
        B6(Rst, d, k, 4) = l1;
        B6(Rst, d, k, 5) = l2;
      }
  }
}
"""
