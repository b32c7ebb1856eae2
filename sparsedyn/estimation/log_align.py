"""Streams logged at their own rates, aligned to the log's rows (spec "streams", issue #17
item 6): a stage of estimate_log between the reader and the solver (log_derivative.py, the
accelerations from the velocities, may follow it). It takes and yields chunks (first row,
header, block (B, width) floats, valid (B,) bool) and gives every row the same values whatever
the chunking: the last sample of each stream is carried across chunks, and a row that needs the
next sample of a "linear" stream is held back until it has arrived (so a linear stream that
stops holds every later row in memory until the log ends). A row the stage cannot give values
is flagged: valid False and (row, why) in `errors`; a time column that goes back is a
LogTimeError naming the rows.

Alignment (spec "streams"): in a row where a slower stream has no new sample its columns are
empty (NaN); "last" holds the stream's last sample (zero-order hold), "linear" interpolates
between the samples before and after by the time column, y = y0 + (t - t0) / (t1 - t0) (y1 - y0)
(a quaternion along the shorter arc, then renormalised: nlerp). Rows before a stream's first
sample, and for "linear" after its last, are flagged: never extrapolated. A sample with only
some of its columns is a bad row.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..errors import SparsedynError


class LogTimeError(SparsedynError, ValueError):
    """The log's time column does not allow the spec's processing (it goes back, or its step
    is not uniform); `rows` holds the data rows at fault."""

    def __init__(self, message, rows=()):
        super().__init__(message)
        self.rows = tuple(rows)


#: A stream to align: its input name, its columns in the block, "last" or "linear", and the
#: column groups that are unit quaternions (renormalised after interpolation).
Stream = namedtuple("Stream", "name columns mode quaternions")


def _concat(parts):
    """Chunks (start, header, block, valid, *extra arrays) joined, or None for no parts."""
    parts = [p for p in parts if p is not None]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return (parts[0][0], parts[0][1]) + tuple(np.concatenate([p[k] for p in parts])
                                              for k in range(2, len(parts[0])))


def _check_increasing(start, t, valid, carried, what):
    """LogTimeError naming the rows where the time of a good row is not after the previous good
    row's; returns the (row, time) of the last good row, carried to the next chunk."""
    rows = start + np.flatnonzero(valid)
    times = t[valid]
    if carried is not None:
        rows, times = np.r_[carried[0], rows], np.r_[carried[1], times]
    back = np.flatnonzero(np.diff(times) <= 0)
    if back.size:
        pairs = ", ".join(f"{rows[k]}->{rows[k + 1]}" for k in back[:5])
        raise LogTimeError(f"{what}: the time column does not increase at rows {pairs}",
                           rows[back + 1])
    return (rows[-1], times[-1]) if rows.size else carried


def align_streams(chunks, streams, time_col, errors):
    """Yield the chunks with every stream's empty rows filled (module docstring)."""
    state = {s.name: None for s in streams}        # last sample before the held rows: (t, y)
    linear = [s for s in streams if s.mode == "linear"]
    held, last_time = None, None
    for start, header, block, valid in chunks:
        valid = valid.copy()
        samples = {}
        why = {}
        for s in streams:
            y = block[:, s.columns]
            present, absent = np.isfinite(y).all(axis=1), np.isnan(y).all(axis=1)
            for r in np.flatnonzero(valid & ~present & ~absent):
                why.setdefault(r, f"stream {s.name!r}: a sample with empty or non-finite columns")
            samples[s.name] = present
        if linear:
            for r in np.flatnonzero(valid & ~np.isfinite(block[:, time_col])):
                why.setdefault(r, "no timestamp (linear alignment interpolates by time)")
        for r, text in why.items():
            errors.append((start + int(r), text))
            valid[r] = False
        if linear:
            last_time = _check_increasing(start, block[:, time_col], valid, last_time,
                                          "spec['streams'] (linear)")
        marks = np.column_stack([samples[s.name] & valid for s in streams])
        held = _concat([held, (start, header, block, valid, marks)])
        n = len(held[3])
        for k, s in enumerate(streams):
            if s.mode == "linear":
                got = np.flatnonzero(held[4][:, k])
                # rows after the last sample wait for the next one (unless there was none yet:
                # then every row so far is before the first one)
                n = min(n, got[-1] + 1 if got.size else (0 if state[s.name] else n))
        if n:
            yield _fill(held, n, streams, state, time_col, errors)
            held = None if n == len(held[3]) else (held[0] + n, held[1], *(a[n:] for a in held[2:]))
    if held is not None:
        yield _fill(held, len(held[3]), streams, state, time_col, errors)


def _fill(held, n, streams, state, time_col, errors):
    """The first n held rows with every stream's values (the samples before and after are in
    `state` or in these rows); updates `state` to each stream's last sample among them."""
    start, header, block, valid, marks = held
    block, valid, marks = block[:n].copy(), valid[:n].copy(), marks[:n]
    t = block[:, time_col] if time_col is not None else np.full(n, np.nan)
    rows = np.arange(n)
    why = {}
    for k, s in enumerate(streams):
        mark = marks[:, k]
        prev = np.maximum.accumulate(np.where(mark, rows, -1))       # last sample at or before
        y = block[:, s.columns]
        t0 = np.where(prev >= 0, t[np.maximum(prev, 0)], np.nan)
        y0 = y[np.maximum(prev, 0)]
        if state[s.name] is not None:                  # before this chunk's first sample
            t0[prev < 0], y0[prev < 0] = state[s.name]
        elif (valid & ~mark & (prev < 0)).any():
            for r in np.flatnonzero(valid & ~mark & (prev < 0)):
                why.setdefault(r, f"before the first sample of stream {s.name!r}")
        fill = valid & ~mark & ((prev >= 0) | (state[s.name] is not None))
        if s.mode == "linear":
            nxt = np.minimum.accumulate(np.where(mark, rows, n)[::-1])[::-1]   # first at/after
            after = fill & (nxt == n)      # only in the last rows of the log (final)
            for r in np.flatnonzero(after):
                why.setdefault(r, f"after the last sample of stream {s.name!r} (linear "
                                  f"alignment does not extrapolate)")
            fill &= ~after
            t1, y1 = t[np.minimum(nxt, n - 1)], y[np.minimum(nxt, n - 1)]
            w = ((t - t0) / np.where(fill, t1 - t0, 1.0))[:, None]
            for g in s.quaternions:     # q and -q are one rotation: take the shorter arc
                y1[:, g] *= np.where((y0[:, g] * y1[:, g]).sum(axis=1) < 0, -1.0, 1.0)[:, None]
            value = y0 + w * (y1 - y0)
            for g in s.quaternions:                    # nlerp: back onto the unit sphere
                value[:, g] /= np.linalg.norm(value[:, g], axis=1, keepdims=True)
        else:
            value = y0
        block[np.ix_(fill, s.columns)] = value[fill]
        if mark.any():
            last = np.flatnonzero(mark)[-1]
            state[s.name] = (t[last], y[last].copy())
    for r, text in why.items():
        errors.append((start + int(r), text))
        valid[r] = False
    return start, header, block, valid
