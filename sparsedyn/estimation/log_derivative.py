"""Joint accelerations from the velocities of a log (spec "accelerations", issue #17 item 6): a
stage of estimate_log between the reader (and log_align's alignment) and the solver, taking and
yielding chunks (first row, header, block (B, width), valid (B,)) with the derivative of the
velocity columns appended, the same for every row whatever the chunking (the last `window` rows
are kept for the next chunk, and a row is held back until the `window` rows after it are in).

Savitzky-Golay (Savitzky & Golay 1964; scipy.signal.savgol_coeffs): the least-squares
polynomial of `order` through `window` consecutive rows, differentiated once at the row, with
the time column's step dt. The step must be uniform: every step between consecutive good rows
within `tolerance` (relative) of the log's first one, else a LogTimeError naming the rows.
Runs of good rows (valid, finite velocities and time) are filtered separately. A row at least
window // 2 rows inside its run uses the centred window; in a run's first and last window // 2
rows the polynomial of the run's first / last window is evaluated off centre, as
scipy.signal.savgol_filter(mode="interp") does; a row of a run shorter than the window is
flagged (valid False, reason in `errors`).
"""
from __future__ import annotations

import numpy as np

from .log_align import LogTimeError, _concat


class _Steps:
    """The uniform-step check, carried across chunks: the log's first step dt and the last row
    seen."""

    def __init__(self, tolerance):
        self.tolerance, self.dt, self.last = tolerance, None, None

    def check(self, start, t, good):
        rows = start + np.arange(len(t))
        if self.last is not None:                  # the previous chunk's last row
            rows, t, good = (np.r_[self.last[k], x] for k, x in enumerate((rows, t, good)))
        pair = good[:-1] & good[1:]                        # consecutive good rows
        steps = np.diff(t)[pair]
        if steps.size and self.dt is None:
            self.dt = steps[0]
        if steps.size:
            off = np.flatnonzero(~(np.abs(steps - self.dt) <= self.tolerance * abs(self.dt))
                                 | (steps <= 0))
            if off.size:
                at = rows[:-1][pair][off]
                raise LogTimeError(
                    f"spec['accelerations']: the time step is not uniform (tolerance "
                    f"{self.tolerance:g} of the first step, {self.dt:g} s): rows "
                    + ", ".join(f"{r}->{r + 1} ({s:g} s)" for r, s in zip(at[:5], steps[off]))
                    + (" ..." if off.size > 5 else ""), at + 1)
        if len(rows):
            self.last = (rows[-1], t[-1], good[-1])


def differentiate(chunks, v_columns, time_col, window, order, tolerance, errors):
    """Yield the chunks with the derivatives of the v_columns appended (module docstring)."""
    from scipy.signal import savgol_coeffs
    steps = _Steps(tolerance)
    kept, held, coefficients = None, None, None
    for start, header, block, valid in chunks:
        good = valid & np.isfinite(block[:, v_columns]).all(axis=1) & np.isfinite(
            block[:, time_col])
        steps.check(start, block[:, time_col], good)
        held = _concat([held, (start, header, block, valid.copy(), good)])
        if coefficients is None and steps.dt is not None:
            # row p of C: the derivative at position p of a window (use="dot": C[p] @ window)
            coefficients = np.array([savgol_coeffs(window, order, deriv=1, delta=steps.dt,
                                                   pos=p, use="dot") for p in range(window)])
        n_kept = 0 if kept is None else len(kept[3])
        buffer = _concat([kept, held])
        ready = len(buffer[3]) - window - n_kept     # rows with `window` rows after them
        if ready > 0:
            yield _emit(buffer, n_kept, ready, v_columns, window, coefficients, errors)
            done = n_kept + ready
            keep_from = max(0, done - window)
            kept = (buffer[0] + keep_from, header, *(a[keep_from:done] for a in buffer[2:]))
            held = (buffer[0] + done, header, *(a[done:] for a in buffer[2:]))
    if held is not None and len(held[3]):
        n_kept = 0 if kept is None else len(kept[3])
        yield _emit(_concat([kept, held]), n_kept, len(held[3]), v_columns, window,
                    coefficients, errors)


def _emit(buffer, first, n, v_columns, window, coefficients, errors):
    """Rows first..first+n-1 of the buffer with their derivatives appended. The buffer holds
    the `window` rows before them (or every row from the log's start) and the `window` rows
    after them (or every row to the log's end), so a run's start a and end b clipped to the
    buffer decide the window as on the whole log."""
    start, header, block, valid, good = buffer
    size = len(good)
    idx = np.arange(size)
    begins = good & ~np.r_[False, good[:-1]]
    ends = good & ~np.r_[good[1:], False]
    a = np.maximum.accumulate(np.where(begins, idx, -1))          # run start of each row
    b = np.minimum.accumulate(np.where(ends, idx, size)[::-1])[::-1]   # run end
    rows = np.arange(first, first + n)
    out = np.full((n, len(v_columns)), np.nan)
    ok = good[rows] & (b[rows] - a[rows] + 1 >= window)
    for r in rows[good[rows] & ~ok]:
        errors.append((start + int(r), f"spec['accelerations']: in a run of {b[r] - a[r] + 1} "
                                       f"good rows, shorter than the window ({window})"))
    valid = valid[rows] & (ok | ~good[rows])
    r = rows[ok]
    h = window // 2
    s = np.clip(r - h, a[r], b[r] - window + 1)       # the window's first row
    if r.size:
        C = coefficients[r - s]                       # (m, window): the row's position in it
        v = block[:, v_columns]
        acc = np.zeros((r.size, len(v_columns)))
        for k in range(window):                       # sum_k C[p, k] v[s + k], fixed order
            acc += C[:, k, None] * v[s + k]
        out[ok] = acc
    return start + first, header, np.column_stack([block[rows], out]), valid
