"""A batch function of a generated C unit split over an OpenMP team: the source of
`P_threads(B, threads, work_stride, <the batch function's arguments>)`, which runs the batch
function on `threads` ranges of whole lane groups, thread t on work + t work_stride, and of
`P_openmp()`, 1 where the unit was compiled with OpenMP (generated_c.openmp_flags) and 0 where
it was not (P_threads then runs the whole batch on the calling thread).

One ctypes call hands the ranges over: an OpenMP team's threads wait spinning a moment between
calls, where the package's Python pool (generated_c.split_run) costs ~0.1 ms a call
(experiments/kernel_design.md, "Input copies in the kernels; C's batches on an OpenMP team").
"""
from __future__ import annotations

from typing import NamedTuple

#: the includes a unit with a team function starts with
TEAM_HEADER = "#ifdef _OPENMP\n#include <omp.h>\n#endif\n"


class Param(NamedTuple):
    """One argument of a batch function after B: its C declaration and name, and what a range
    starting at state lo passes: `per_state` elements further (an int or a C expression; None:
    the argument as is; "work": this thread's stretch of the work array); `nullable`: a NULL
    pointer stays NULL."""
    decl: str
    name: str
    per_state: object = None
    nullable: bool = False


def team_function(prefix, batch, params, lanes):
    """C source of P_threads and P_openmp (the module doc) for the batch function `batch` whose
    arguments after B are `params` (Params), on ranges of whole groups of `lanes` states."""
    def passed(p):
        if p.per_state is None:
            return p.name
        if p.per_state == "work":
            return "work + t * work_stride"
        moved = f"{p.name} + lo * {p.per_state}" if p.per_state != 1 else f"{p.name} + lo"
        return f"{p.name} ? {moved} : 0" if p.nullable else moved
    decls = ", ".join(p.decl + ("" if p.decl.endswith("*") else " ") + p.name for p in params)
    return [f"int {prefix}_openmp(void)", "{", "#ifdef _OPENMP", "  return 1;", "#else",
            "  return 0;", "#endif", "}", "",
            f"void {prefix}_threads(long B, int threads, long work_stride, {decls})", "{",
            "#ifdef _OPENMP", "  #pragma omp parallel num_threads(threads)", "  {",
            "    long t = omp_get_thread_num(), T = omp_get_num_threads();",
            "#else", "  {", "    long t = 0, T = 1;", "    (void)threads;", "#endif",
            f"    long per = (((B + {lanes - 1}) / {lanes}) + T - 1) / T * {lanes};",
            "    long lo = t * per < B ? t * per : B, hi = lo + per < B ? lo + per : B;",
            f"    if (lo < hi) {batch}(hi - lo, {', '.join(passed(p) for p in params)});",
            "  }", "}"]
