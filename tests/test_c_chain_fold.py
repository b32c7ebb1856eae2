"""backends/c_chain_fold.py: a pair-chain program folded at plan time and compiled as C gives, slot
for slot, what the program's definition (ir/chain_program.py's docstring, evaluated here
directly in Python doubles) gives, up to the sign of zeros; the slots the plan fixes are never
read at run time; a folded value that is not finite is refused."""
import ctypes
import os
import shutil

import numpy as np
import pytest

from sparsedyn.backends.c_chain_fold import ChainFolder
from sparsedyn.backends.generated_c import CFLAGS_LONG, build
from sparsedyn.ir.chain_program import (EPI_ADD, EPI_LIST, EPI_NONE, EPI_RECIP, EPI_SCALE,
                                        ChainArrays)

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                                reason="no C compiler")

ONE, INPUTS, SLOTS = 0, range(1, 6), 40


def _program(rng, n_ins=60):
    """Random instructions over SLOTS slots: slot ONE, run-time inputs 1..5, and targets
    6.. written before they are read; pairs of constant-only operands (ONE, constant chains'
    targets) as well as run-time ones, coefficients +-1 and others, every mode, mid stores."""
    rows, pairs, written = [], [], [ONE, *INPUTS]
    for i in range(n_ins):
        mode = int(rng.choice([EPI_NONE, EPI_SCALE, EPI_RECIP, EPI_ADD, EPI_LIST]))
        t = 6 + int(rng.integers(SLOTS - 8))
        const_only = rng.random() < 0.3
        pool = [ONE] if const_only else written
        k = int(rng.integers(1 if mode == EPI_LIST else 0, 5))
        q = len(pairs)
        for _ in range(k):
            a, b = (int(rng.choice(pool)) for _ in range(2))
            pairs.append((a, b, float(rng.choice([1.0, -1.0, 0.5, -3.0, 1e8]))))
        if mode == EPI_LIST:
            t = min(t, SLOTS - k)
        src = int(rng.choice(written))
        t2 = t if mode in (EPI_SCALE, EPI_NONE) else 6 + int(rng.integers(SLOTS - 8))
        r2 = int(rng.choice(written))
        if mode == EPI_ADD and t2 not in written:
            mode = EPI_NONE
        kmid = int(rng.integers(k + 1)) if rng.random() < 0.3 else -1
        rows.append((t, src, float(rng.choice([0.0, 2.5, -1.0])), int(rng.random() < 0.3),
                     q, k, kmid, 6 + int(rng.integers(SLOTS - 8)), mode, t2, r2))
        written += [t + j for j in range(k)] if mode == EPI_LIST else [t, t2]
        if kmid >= 0:
            written.append(rows[-1][7])
    cols = np.array(rows, dtype=object).T
    ints = [np.array(c, dtype=np.int64) for c in cols]
    pa, pb, pc = (np.array(c) for c in zip(*pairs)) if pairs else ([], [], [])
    return ChainArrays(ins_t=ints[0], ins_src=ints[1], ins_c0=np.array(cols[2], dtype=float),
                       ins_row=ints[3], ins_q=ints[4], ins_k=ints[5], ins_kmid=ints[6],
                       ins_mid=ints[7], ins_mode=ints[8], ins_t2=ints[9], ins_r2=ints[10],
                       pa=np.asarray(pa, dtype=np.int64), pb=np.asarray(pb, dtype=np.int64),
                       pc=np.asarray(pc, dtype=float))


def _reference(ch, w):
    """ir/chain_program.py's definition, instruction by instruction, in Python doubles."""
    for i in range(ch.ins_t.size):
        t, q, k, mode = int(ch.ins_t[i]), int(ch.ins_q[i]), int(ch.ins_k[i]), int(ch.ins_mode[i])
        if mode == EPI_LIST:
            for j in range(k):
                w[t + j] = w[ch.pa[q + j]] * w[ch.pb[q + j]]
            continue
        acc = w[ch.ins_src[i]] if ch.ins_row[i] else float(ch.ins_c0[i])
        for j in range(k):
            if j == ch.ins_kmid[i]:
                w[ch.ins_mid[i]] = acc
            acc = acc + (w[ch.pa[q + j]] * w[ch.pb[q + j]]) * ch.pc[q + j]
        w[t] = acc
        t2 = int(ch.ins_t2[i])
        if mode == EPI_SCALE:
            w[t2] = acc * w[ch.ins_r2[i]]
        elif mode == EPI_RECIP:
            w[t2] = 1.0 / acc if acc != 0.0 else np.inf
        elif mode == EPI_ADD:
            w[t2] = w[t2] + acc
    return w


def inputs(rng, slots, one, inputs):
    """A work array: 0.25 everywhere, ONE 1.0, random run-time inputs."""
    w = np.full(slots, 0.25)
    w[one] = 1.0
    w[list(inputs)] = rng.normal(size=len(inputs))
    return w


def run_c(lines, w, prelude=(), local="double acc;", unused=("acc",)):
    """w after the C statements `lines` ran on a copy of it (compiled with the MAP route's
    flags; `prelude` before the function, `local` its variables)."""
    src = "\n".join(["#include <math.h>", *prelude, "void run(double *restrict w)", "{",
                     f"  {local}", " ".join(f"(void){v};" for v in unused), *lines, "}"]) + "\n"
    run = ctypes.CDLL(build(src, CFLAGS_LONG)).run
    run.argtypes = [ctypes.c_void_p]
    w = w.copy()
    run(w.ctypes.data)
    return w


@pytest.mark.parametrize("seed", range(6))
def test_folded_c_equals_the_chain_definition(seed, monkeypatch, tmp_path):
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(seed)
    ch = _program(rng)
    folder = ChainFolder(ch, {ONE: 1.0})
    lines = [line for i in range(ch.ins_t.size) for line in folder.statements(i)]
    assert not any(f"w[{ONE}]" in line.split("=", 1)[1] for line in lines)   # ONE never read
    w0 = inputs(rng, SLOTS, ONE, INPUTS)
    with np.errstate(all="ignore"):
        expected = _reference(ch, list(w0))
    assert np.array_equal(run_c(lines, w0), np.array(expected), equal_nan=True)


def test_constant_chains_become_literals_and_overflow_is_refused():
    ch = ChainArrays(ins_t=np.array([6, 7]), ins_src=np.array([6, 7]),
                     ins_c0=np.array([2.0, 1e308]), ins_row=np.zeros(2, dtype=np.int64),
                     ins_q=np.array([0, 1]), ins_k=np.array([1, 1]),
                     ins_kmid=np.array([-1, -1]), ins_mid=np.array([6, 7]),
                     ins_mode=np.array([EPI_RECIP, EPI_NONE]), ins_t2=np.array([8, 7]),
                     ins_r2=np.array([6, 7]), pa=np.array([ONE, ONE]), pb=np.array([ONE, ONE]),
                     pc=np.array([3.0, 1e308]))
    folder = ChainFolder(ch, {ONE: 1.0})
    assert folder.statements(0) == ["  w[6] = 5.0;", "  w[8] = 0.2;"]
    assert folder.known[8] == 0.2
    with pytest.raises(ValueError, match="non-finite"):
        folder.statements(1)                         # 1e308 + 1e308 overflows
