"""What every compiled plan shares: the protocol (problem, model, stats, solve, save) and the
checks of the online arguments every solve takes (backend, threads), written once.

A plan is the offline half of a problem (its pattern, orderings and programs, read-only after
compile) and `solve` its online half: batched states in, a result out. Plan (inverse / forward
dynamics), LoopPlan, EstimationPlan, ConstrainedPlan, DelassusPlan and MassMatrixPlan derive
from PlanBase; a new problem kind's plan is one more subclass.
"""
from __future__ import annotations

import numpy as np

from ..kernels.parallel import MIN_STATES_PER_THREAD, default_threads

#: every backend name a solve accepts ("auto": the plan picks per call)
ONLINE_BACKENDS = ("auto", "c", "numba", "numpy")


class PlanBase:
    """The plan protocol: `problem`, `model`, `stats` (dict), `solve(...)`, `save(path)`."""

    #: the backends this kind of plan runs (a subclass narrows it)
    backends = ONLINE_BACKENDS

    def __init__(self, problem, model=None):
        self.problem = problem
        self.model = problem.model if model is None else model

    @property
    def stats(self):
        """Offline facts of the plan (sizes, orderings, counted flops per state)."""
        raise NotImplementedError

    def solve(self, *args, **kwargs):
        """The online computation for one state or a batch."""
        raise NotImplementedError

    def save(self, path):
        """Write the plan to a versioned file, atomically (the kinds that can be stored)."""
        raise NotImplementedError(f"{type(self).__name__}: this kind of plan is not stored; "
                                  f"compile it again")

    # ------------------------------------------------------------------ online arguments
    @classmethod
    def check_backend(cls, backend, default="auto"):
        """`backend` (None: `default`) if this kind of plan runs it, else ValueError naming the
        choices (a classmethod: a function that plans on demand checks before planning)."""
        backend = default if backend is None else backend
        if backend not in cls.backends:
            raise ValueError(f"backend: expected one of {cls.backends}, got {backend!r}")
        return backend

    @staticmethod
    def check_threads(threads):
        """`threads` as an int in 1..NUMBA_NUM_THREADS (None: numba's current count)."""
        import numba
        available = numba.config.NUMBA_NUM_THREADS
        if threads is None:
            return numba.get_num_threads()
        if isinstance(threads, (bool, np.bool_)) or not isinstance(threads, (int, np.integer)) \
                or not 1 <= threads <= available:
            raise ValueError(f"threads: expected an integer in 1..{available} "
                             f"(NUMBA_NUM_THREADS), got {threads!r}")
        return int(threads)

    def threads_for(self, threads, B, cap=True):
        """The threads a call on B states uses: by default no more than the cores idle at the
        call and MIN_STATES_PER_THREAD states each (default_threads); `threads` given: checked,
        and with `cap` lowered to MIN_STATES_PER_THREAD states each too (a thread with fewer
        states costs more to start than it saves)."""
        if threads is None:
            return default_threads(B, self.check_threads(None))
        threads = self.check_threads(threads)
        if cap and B < MIN_STATES_PER_THREAD * threads:
            threads = max(1, B // MIN_STATES_PER_THREAD)
        return threads

    def __repr__(self):
        s = self.stats
        facts = ", ".join(f"{k} {s[k]!r}" for k in ("ordering", "flops") if k in s)
        return f"{type(self).__name__}({self.problem!r}{': ' + facts if facts else ''})"
