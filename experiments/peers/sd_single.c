/* The exported sparsedyn plans called from C, one state per call, over stored states.
   Usage: sd_single <states.bin> <B> <rounds>; states.bin holds B x (q, v, a, tau) in sparsedyn's
   layout (nq, nv, nv, nv doubles each; SD_NQ / SD_NV given at compile time). Prints
   "id <min us> <median us>" and "fd <min us> <median us>" per call and the largest errors
   against the stored tau (ID) and a (FD). */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "plan_id.h"
#include "plan_fd.h"

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int cmp(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

int main(int argc, char **argv) {
  static double work_id[PLAN_ID_WORK_DOUBLES], work_fd[PLAN_FD_WORK_DOUBLES];
  int B, rounds, b, r, k, row = SD_NQ + 3 * SD_NV;
  double *buf, out[SD_NV], err_id = 0.0, err_fd = 0.0, *t_id, *t_fd, t0, t1, t2, sink = 0.0;
  FILE *f;
  if (argc < 4) return 2;
  B = atoi(argv[2]); rounds = atoi(argv[3]);
  buf = malloc(sizeof(double) * (size_t)B * row);
  t_id = malloc(sizeof(double) * rounds); t_fd = malloc(sizeof(double) * rounds);
  f = fopen(argv[1], "rb");
  if (!f || fread(buf, sizeof(double), (size_t)B * row, f) != (size_t)B * row) return 3;
  fclose(f);
  for (b = 0; b < B; b++) {
    double *q = buf + b * row, *v = q + SD_NQ, *a = v + SD_NV, *tau = a + SD_NV;
    if (plan_id_outputs(q, v, a, out, work_id)) return 4;
    for (k = 0; k < SD_NV; k++) err_id = fmax(err_id, fabs(out[k] - tau[k]));
    if (plan_fd_outputs(q, v, tau, out, work_fd)) return 5;
    for (k = 0; k < SD_NV; k++) err_fd = fmax(err_fd, fabs(out[k] - a[k]));
  }
  for (r = 0; r < rounds; r++) {
    t0 = now_us();
    for (b = 0; b < B; b++) {
      double *q = buf + b * row, *v = q + SD_NQ, *a = v + SD_NV;
      plan_id_outputs(q, v, a, out, work_id); sink += out[0];
    }
    t1 = now_us();
    for (b = 0; b < B; b++) {
      double *q = buf + b * row, *v = q + SD_NQ, *tau = v + 2 * SD_NV;
      plan_fd_outputs(q, v, tau, out, work_fd); sink += out[0];
    }
    t2 = now_us();
    t_id[r] = (t1 - t0) / B; t_fd[r] = (t2 - t1) / B;
  }
  qsort(t_id, rounds, sizeof(double), cmp); qsort(t_fd, rounds, sizeof(double), cmp);
  printf("id %.4f %.4f\nfd %.4f %.4f\nerr %.3e %.3e\nsink %g\n", t_id[0], t_id[rounds / 2],
         t_fd[0], t_fd[rounds / 2], err_id, err_fd, sink);
  return 0;
}
