"""backends/c_chain_pairs.py: chains run as two- and four-lane vector chains in the generated C
give, slot for slot, what the program's definition (ir/chain_program.py's docstring, evaluated
in Python doubles by test_c_chain_fold._reference) gives, up to the sign of zeros, with the GCC
vector extensions and with the portable fallback; lanes that depend on each other never go
together."""
import os
import shutil

import numpy as np
import pytest

from sparsedyn.backends.c_chain_fold import ChainFolder
from sparsedyn.backends.c_chain_pairs import VECTOR_HEADER, common_tail
from sparsedyn.backends.c_chains import _run
from sparsedyn.ir.chain_program import EPI_ADD, EPI_NONE, EPI_RECIP, EPI_SCALE, ChainArrays
from test_c_chain_fold import _reference, inputs, run_c

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                                reason="no C compiler")

ONE, INPUTS, SLOTS = 0, range(1, 13), 400


def _program(rng, n_groups=40):
    """Groups of 1, 2 or 4 instructions writing consecutive fresh slots: per lane its own
    leading products (constant-only ones too), then common products whose operands are one
    slot for all lanes or a run of consecutive written slots; every lane scaling its target by
    one r (a factor column), or lane 0 adding into a written slot (a solve next to the probe),
    or no epilogue, or lane 0 a pivot (d, then 1 / d two slots on, N_jj stored on the way: a
    mid store) that the other lanes, written after 1 / d, scale by (a pivot leading its
    column); sums from a row, from c0 or from 0."""
    rows, pairs, written, nxt = [], [], [ONE, *INPUTS], 20

    def runs(n):                    # written slots x with x .. x + n - 1 all written
        return [x for x in written if all(x + j in written for j in range(n))]
    for _ in range(n_groups):
        n = int(rng.choice([1, 2, 4]))
        kind = rng.choice(["scale", "add", "none"] + ["lead"] * (n > 1))
        common = []
        for _ in range(int(rng.integers(2 * (kind == "lead"), 5))):
            ops = []
            for _ in range(2):
                run, x = runs(n), int(rng.choice(written))
                if run and rng.random() < 0.5:
                    x = int(rng.choice(run))
                    ops.append([x + j for j in range(n)])
                else:
                    ops.append([x] * n)
            common.append((ops[0], ops[1], float(rng.choice([1.0, -1.0, 0.5, 1e8]))))
        r2 = int(rng.choice(written)) if kind != "lead" else nxt + 2
        for lane in range(n):
            q = len(pairs)
            pool = [ONE] if rng.random() < 0.3 else written
            for _ in range(int(rng.integers(0, 3))):
                pairs.append((int(rng.choice(pool)), int(rng.choice(pool)),
                              float(rng.choice([1.0, -1.0, 2.5]))))
            pairs += [(a[lane], b[lane], c) for a, b, c in common]
            t = nxt + lane + 2 * (kind == "lead" and lane > 0)
            mode, t2, kmid, mid = EPI_NONE, t, -1, t
            if kind == "scale" or (kind == "lead" and lane > 0):
                mode = EPI_SCALE
            elif kind == "add" and lane == 0:
                mode, t2 = EPI_ADD, int(rng.choice(list(INPUTS)))
            elif kind == "lead":
                mode, t2, mid = EPI_RECIP, r2, nxt + 1
                # mostly among its own products, sometimes among the common ones
                k = len(pairs) - q - (len(common) if rng.random() < 0.75 else 0)
                kmid = int(rng.integers(0, k + 1)) if k else -1
            rows.append((t, int(rng.choice(written)), float(rng.choice([0.0, 2.5, -1.0])),
                         int(rng.random() < 0.3), q, len(pairs) - q, kmid, mid, mode, t2, r2))
        fresh = n + 2 * (kind == "lead")
        written += [nxt + j for j in range(fresh)]
        nxt += fresh + int(rng.integers(0, 2))
    cols = np.array(rows, dtype=object).T
    ints = [np.array(c, dtype=np.int64) for c in cols]
    pa, pb, pc = (np.array(c) for c in zip(*pairs))
    return ChainArrays(ins_t=ints[0], ins_src=ints[1], ins_c0=np.array(cols[2], dtype=float),
                       ins_row=ints[3], ins_q=ints[4], ins_k=ints[5], ins_kmid=ints[6],
                       ins_mid=ints[7], ins_mode=ints[8], ins_t2=ints[9], ins_r2=ints[10],
                       pa=pa.astype(np.int64), pb=pb.astype(np.int64), pc=pc.astype(float))


@pytest.mark.parametrize("seed", range(4))
def test_vector_chains_equal_the_chain_definition(seed, monkeypatch, tmp_path):
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
    rng = np.random.default_rng(seed)
    ch = _program(rng)
    lines = [line for unit in _run(ChainFolder(ch, {ONE: 1.0}), ch, list(range(ch.ins_t.size)))
             for line in unit]
    assert any("SD_ST2" in x for x in lines) and any("SD_ST4" in x for x in lines)
    assert any("SD_GET" in x for x in lines)              # a pivot leading its column
    w0 = inputs(rng, SLOTS, ONE, INPUTS)
    with np.errstate(all="ignore"):
        expected = np.array(_reference(ch, list(w0)))
    for scalar in (False, True):                 # GCC's vectors, the portable fallback
        prelude = ["#define SD_SCALAR_VECTORS"] * scalar + [VECTOR_HEADER]
        w = run_c(lines, w0, prelude, "double acc, a0, a1, a2, a3; sd_v2 v2; sd_v4 v4;",
                  ("acc", "a0", "a1", "a2", "a3", "v2", "v4"))
        assert np.array_equal(w, expected, equal_nan=True)


def test_lanes_that_read_each_other_do_not_go_together():
    """Slots 10, 11 written by two chains with the same products w[1] w[2], w[1] w[3]: together
    as they stand; not when the second also reads the first's target or what its epilogue
    writes."""
    def chains(extra):             # the second's pairs: extra (a leading product), then the tail
        pa, pb = [1, 1] + extra[:1] + [1, 1], [2, 3] + extra[1:] + [2, 3]
        return ChainArrays(
            ins_t=np.array([10, 11]), ins_src=np.array([10, 11]), ins_c0=np.zeros(2),
            ins_row=np.zeros(2, dtype=np.int64), ins_q=np.array([0, 2]),
            ins_k=np.array([2, 2 + len(extra[:1])]), ins_kmid=np.array([-1, -1]),
            ins_mid=np.array([10, 11]), ins_mode=np.array([EPI_ADD, EPI_NONE]),
            ins_t2=np.array([5, 11]), ins_r2=np.array([10, 11]), pa=np.array(pa),
            pb=np.array(pb), pc=np.ones(len(pa)))
    assert common_tail(chains([]), [0, 1]) == 2
    assert common_tail(chains([10, 1]), [0, 1]) == 0      # reads w[10], the first's target
    assert common_tail(chains([5, 1]), [0, 1]) == 0       # reads w[5], the first's x += acc
