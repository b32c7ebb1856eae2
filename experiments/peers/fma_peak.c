/* The core's peak of double-precision FMAs: independent FMA chains on registers (vectorised by
 * -O3 -march=native), one thread. Usage: fma_peak [iterations]. Prints "gflops <best of 5>"
 * (2 flops per FMA per lane) for experiments/bench_peers.py. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CHAINS 12
#define LANES 8

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 20000000L;
  double best = 0.0, sink = 0.0;
  for (int rep = 0; rep < 5; ++rep) {
    double x[CHAINS][LANES], m[LANES], c[LANES];
    for (int l = 0; l < LANES; ++l) {
      m[l] = 0.9999999 + 1e-9 * l;
      c[l] = 1e-7 * (l + rep);
      for (int k = 0; k < CHAINS; ++k) x[k][l] = 1.0 + 0.01 * k + 0.001 * l;
    }
    double t0 = now();
    for (long i = 0; i < iters; ++i) {
      for (int k = 0; k < CHAINS; ++k)
        for (int l = 0; l < LANES; ++l) x[k][l] = __builtin_fma(x[k][l], m[l], c[l]);
      __asm__ volatile("" : : : "memory");
    }
    double dt = now() - t0;
    for (int k = 0; k < CHAINS; ++k)
      for (int l = 0; l < LANES; ++l) sink += x[k][l];
    double g = 2.0 * CHAINS * LANES * (double)iters / dt * 1e-9;
    if (g > best) best = g;
  }
  printf("gflops %.3f\nsink %g\n", best, sink);
  return 0;
}
