"""C of Algorithm 3's passes after the sweep (seed 000: eq. (18) forward over N, the chains (19),
the assembly (13) of the blocks into each lane's state of the output) and of the batch entry
point sd_pvo_lanes (c_pv_osimr_source's module doc): kernels/pv_osimr_numba._state's statements
from "lines 16-17" on, on vd values."""

FORWARD = r"""
/* lines 16-28 for one group, into its Lambda^-1, Ob (m x m, lanes) */
static void forward(const Prog *P, const vd *Rst, const vd *Om, vd *Om0, vd *Kst, vd *Wst,
                    vd *Ob)
{
  long s, a, c, k, l, col, t, w, M = P->m;
  for (s = 0; s < P->ns; s++) {                       /* eq. (18), forward over N */
    a = P->a_slot[s];
    c = P->rows[s];
    if (a < 0) {
      for (k = 0; k < c; k++)
        for (l = k; l < c; l++) B6(Om0, s, k, l) = B6(Om0, s, l, k) = B6(Om, s, k, l);
      continue;
    }
    vd Tm[36];
    for (k = 0; k < c; k++) {                         /* T = R Om0[A(d)] */
      vd x0 = B6(Rst, s, k, 0), x1 = B6(Rst, s, k, 1), x2 = B6(Rst, s, k, 2);
      vd x3 = B6(Rst, s, k, 3), x4 = B6(Rst, s, k, 4), x5 = B6(Rst, s, k, 5);
      for (col = 0; col < 6; col++)
        Tm[k * 6 + col] = (x0 * B6(Om0, a, 0, col) + x1 * B6(Om0, a, 1, col) + x2 * B6(Om0, a, 2, col)
                           + x3 * B6(Om0, a, 3, col) + x4 * B6(Om0, a, 4, col) + x5 * B6(Om0, a, 5, col));
    }
    for (k = 0; k < c; k++) {                         /* Om0 = Om + T R^T */
      vd x0 = Tm[k * 6], x1 = Tm[k * 6 + 1], x2 = Tm[k * 6 + 2];
      vd x3 = Tm[k * 6 + 3], x4 = Tm[k * 6 + 4], x5 = Tm[k * 6 + 5];
      for (l = k; l < c; l++)
        B6(Om0, s, k, l) = B6(Om0, s, l, k) = B6(Om, s, k, l)
            + (x0 * B6(Rst, s, l, 0) + x1 * B6(Rst, s, l, 1) + x2 * B6(Rst, s, l, 2)
               + x3 * B6(Rst, s, l, 3) + x4 * B6(Rst, s, l, 4) + x5 * B6(Rst, s, l, 5));
    }
  }
  for (t = 0; t < P->nkc; t++) {                      /* eq. (19) */
    long dst = P->kc_dst[t], src = P->kc_src[t], rs = P->kc_rslot[t];
    if (src < 0) {
      for (k = 0; k < 36; k++) Kst[dst * 36 + k] = Rst[rs * 36 + k];
      continue;
    }
    for (k = 0; k < P->pair_rows[dst]; k++) {
      vd x0 = B6(Kst, src, k, 0), x1 = B6(Kst, src, k, 1), x2 = B6(Kst, src, k, 2);
      vd x3 = B6(Kst, src, k, 3), x4 = B6(Kst, src, k, 4), x5 = B6(Kst, src, k, 5);
      for (col = 0; col < 6; col++)
        B6(Kst, dst, k, col) = (x0 * B6(Rst, rs, 0, col) + x1 * B6(Rst, rs, 1, col)
                                + x2 * B6(Rst, rs, 2, col) + x3 * B6(Rst, rs, 3, col)
                                + x4 * B6(Rst, rs, 4, col) + x5 * B6(Rst, rs, 5, col));
    }
  }
  for (k = 0; k < P->ne; k++) {                       /* line 28: diagonal blocks */
    long o0 = P->offsets[k], e = P->ee_slot[k];
    c = P->rows[e];
    for (a = 0; a < c; a++)
      for (l = 0; l < c; l++)
        Ob[(o0 + a) * M + o0 + l] = B6(Om0, e, a, l);
  }
  for (w = 0; w < P->nw; w++) {                       /* 0Om_c cK_e2^T once per (c, e2) */
    long oc = P->w_slot[w], pr = P->w_pair[w];
    for (k = 0; k < 6; k++) {
      vd x0 = B6(Om0, oc, k, 0), x1 = B6(Om0, oc, k, 1), x2 = B6(Om0, oc, k, 2);
      vd x3 = B6(Om0, oc, k, 3), x4 = B6(Om0, oc, k, 4), x5 = B6(Om0, oc, k, 5);
      for (l = 0; l < P->pair_rows[pr]; l++)
        B6(Wst, w, k, l) = (x0 * B6(Kst, pr, l, 0) + x1 * B6(Kst, pr, l, 1) + x2 * B6(Kst, pr, l, 2)
                            + x3 * B6(Kst, pr, l, 3) + x4 * B6(Kst, pr, l, 4) + x5 * B6(Kst, pr, l, 5));
    }
  }
  for (t = 0; t < P->nblk; t++) {                     /* lines 25-26, eq. (13) */
    long k1 = P->blk_k1[t], k2 = P->blk_k2[t], p1 = P->blk_p1[t], bw = P->blk_w[t];
    long o1 = P->offsets[k1], o2 = P->offsets[k2];
    for (a = 0; a < P->offsets[k1 + 1] - o1; a++) {
      vd x0 = B6(Kst, p1, a, 0), x1 = B6(Kst, p1, a, 1), x2 = B6(Kst, p1, a, 2);
      vd x3 = B6(Kst, p1, a, 3), x4 = B6(Kst, p1, a, 4), x5 = B6(Kst, p1, a, 5);
      for (l = 0; l < P->offsets[k2 + 1] - o2; l++) {
        vd acc = (x0 * B6(Wst, bw, 0, l) + x1 * B6(Wst, bw, 1, l) + x2 * B6(Wst, bw, 2, l)
                  + x3 * B6(Wst, bw, 3, l) + x4 * B6(Wst, bw, 4, l) + x5 * B6(Wst, bw, 5, l));
        Ob[(o1 + a) * M + o2 + l] = Ob[(o2 + l) * M + o1 + a] = acc;
      }
    }
  }
}

/* out[b + s] = lane s of Ob (entries x lanes -> lanes x entries): 4 x 4 blocks transposed in
   registers, each state's entries stored 4 at a time (scattered scalar stores, each value into
   the vector's states' matrices m^2 doubles apart, cost as much as the arithmetic) */
typedef double v4 __attribute__((vector_size(32)));
typedef double v4u __attribute__((vector_size(32), aligned(8)));
static void store_states(const vd *Ob, long MM, double *out, long m)
{
  long e, h, s, whole = m == LN && LN %% 4 == 0 ? MM - MM %% 4 : 0;
  for (e = 0; e < whole; e += 4)
    for (h = 0; h < LN; h += 4) {
      v4 x0 = *(const v4 *)&Ob[e][h], x1 = *(const v4 *)&Ob[e + 1][h];
      v4 x2 = *(const v4 *)&Ob[e + 2][h], x3 = *(const v4 *)&Ob[e + 3][h];
      *(v4u *)(out + (h + 0) * MM + e) = (v4){x0[0], x1[0], x2[0], x3[0]};
      *(v4u *)(out + (h + 1) * MM + e) = (v4){x0[1], x1[1], x2[1], x3[1]};
      *(v4u *)(out + (h + 2) * MM + e) = (v4){x0[2], x1[2], x2[2], x3[2]};
      *(v4u *)(out + (h + 3) * MM + e) = (v4){x0[3], x1[3], x2[3], x3[3]};
    }
  for (e = whole; e < MM; e++)                        /* the rest, and partial groups */
    for (s = 0; s < m; s++) out[s * MM + e] = Ob[e][s];
}

void sd_pvo_lanes(long B, const double *q, double *out, long *status, double *work,
                  const void *const *arr, const long *dims, double tol)
{
  Prog P;
  long b, s, c, m, M = dims[8];
  vd *IA, *Rst, *Om, *Om0, *Kst, *Wst, *qv, *Ob;
  vl st;
  const void *const *x = arr;
%(unpack)s  P.nb = dims[0]; P.ns = dims[1]; P.npairs = dims[2]; P.nw = dims[3]; P.ne = dims[4];
  P.nkc = dims[5]; P.nblk = dims[6]; P.nq = dims[7]; P.m = dims[8]; P.tol = tol;
  IA = (vd *)work; Rst = IA + 36 * P.nb; Om = Rst + 36 * P.ns; Om0 = Om + 36 * P.ns;
  Kst = Om0 + 36 * P.ns; Wst = Kst + 36 * P.npairs; qv = Wst + 36 * P.nw; Ob = qv + P.nq;
  for (c = 0; c < M * M; c++) Ob[c] = (vd){0.0};   /* blocks of no common ancestor stay 0 */
  for (b = 0; b < B; b += LN) {
    m = B - b < LN ? B - b : LN;
    for (s = 0; s < LN; s++)                          /* idle lanes repeat the first state */
      for (c = 0; c < P.nq; c++) qv[c][s] = q[(b + (s < m ? s : 0)) * P.nq + c];
    st = (vl){0} - 1;
    backward(&P, qv, IA, Rst, Om, &st);
    forward(&P, Rst, Om, Om0, Kst, Wst, Ob);
    store_states(Ob, M * M, out + b * M * M, m);
    for (s = 0; s < m; s++) status[b + s] = st[s];
  }
}
"""
