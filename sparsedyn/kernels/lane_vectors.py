"""Explicit LLVM vector code on blocks of lanes of a lane work array w (n_slots, lanes): one run
of operations of an LU program (<op>_run, used by lu_numba.run_lanes), and one chain of the
pair-chain program (chain_block_V; sparsedyn/ir/chain_program.py, kernels/normal_numba.py).

    <op>_run(w, t, a, b, lo, hi) for the LU opcodes MUL, FMS, FMA, SUB, ADD, NEG, MOV
    (sparsedyn/ir/instructions.py): operations o = lo .. hi-1 in order, on every lane, of the index
    arrays t, a, b (any integer type): e.g. fms_run  w[t[o]] = w[t[o]] - w[a[o]] * w[b[o]]


    chain_block_V(w, t, src, c0, from_row, pa, pb, pc, q, k, kmid, mid, mode, t2, r2, s) for
    V in BLOCKS, on lanes s:s+V: one instruction of a pair-chain program, as
    sparsedyn/ir/chain_program.py defines it.

Why explicit vectors: for an LU operation, a plain `for s in range(lanes)` loop costs a run-time
overlap check, a vector body and a remainder per operation; a block is one load per
operand row, the arithmetic and one store (lanes beyond the last whole block, as in small
batches, run one at a time), and at the usual lane counts (WHOLE_ROWS) the row is one block.
Why a whole run per call: an intrinsic per operation, called from a numba loop, paid per
operation numba's negative-index wraparound on t[o], a[o], b[o], the test of the lane count
and reloads of spilled array pointers; a run's loop tests the lane count once, reads the
indices as they are (non-negative) and strides rows by a constant (the measurements behind
both choices: experiments/kernel_design.md). For a chain, a plain `for s in range(lanes)`
loop per product is guarded by LLVM's run-time overlap checks between the target row and each
operand row (rows of one array), which for a few products per operation cost more than the
arithmetic, and it loads and stores the target once per product; with a constant lane count LLVM
unrolls the loop first and (numba leaves SLP vectorisation off) runs it scalar. Here the
accumulator of a whole chain stays in vector registers (V lanes: V / 8 AVX-512 registers), the loop
over its products reads only the operand rows, and the products round exactly as the scalar
expressions ((a * b) * c, then the sum, left to right: no contraction into fused multiply-adds).

numba's on-disk cache of the kernels that inline these intrinsics (lu_numba.run_lanes and every
kernel compiling it in, normal_numba) is keyed on their own files only: after editing this one,
clear the caches (`sparsedyn warmup` starts from an empty one).

Preconditions: w C-contiguous float64; op_run: t, a, b C-contiguous, their entries lo..hi-1
valid row indices (a's and b's where the opcode reads them); chain_block: lanes and s multiples
of the block (s below lanes); pa, pb int64 and pc float64 contiguous; 0 <= kmid < k, or kmid
outside (no mid store); every row index valid, src, mid, t2 and r2 too when unused (the planner
passes t).
"""
from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from ..ir.chain_program import EPI_ADD, EPI_LIST, EPI_RECIP, EPI_SCALE
from ..ir.instructions import ADD, FMA, FMS, MOV, MUL, NEG, SUB

#: lanes per block of chain_block_64, _32, _8 (largest first; the kernel takes the largest
#: that divides its lane count; the smaller ones serve small batches)
BLOCKS = (64, 32, 8)


#: lanes per vector block of the op_run intrinsics, and the lane counts whose rows they run
#: as one vector without a loop, saving the loop's control and exit (the fused kernels' lane
#: counts, kernels/assemble_numba.lanes_for; most frequent first)
OP_BLOCK = 8
WHOLE_ROWS = (32, 64, 16, 8)


def _vector_rows(context, builder, signature, w_, s_, vec):
    """row(r): pointer to lanes s:s+len(vec) of row r of w (C-contiguous float64, 2-d)."""
    arr = context.make_array(signature.args[0])(context, builder, w_)
    lanes = builder.extract_value(arr.shape, 1)

    def row(r):
        ptr = builder.gep(arr.data, [builder.add(builder.mul(r, lanes), s_)])
        return builder.bitcast(ptr, vec.as_pointer())
    return row


def _op_run(code):
    """The op_run intrinsic of one LU opcode: operations lo..hi-1 of the index arrays (t, a, b)
    on every lane of w, in order; per lane count a row of WHOLE_ROWS lanes as one vector, other
    lane counts in blocks of OP_BLOCK lanes, the remaining lanes one by one; the same IEEE
    operations as the scalar expression of lu_numpy (product rounded before the sum: no
    contraction)."""
    reads_a = code != NEG
    reads_b = code in (MUL, FMA, FMS)

    def op_run(typingctx, w, t, a, b, lo, hi):
        if any(not isinstance(x, types.Array) or x.ndim != 1 or x.layout != "C"
               or not isinstance(x.dtype, types.Integer) for x in (t, a, b)):
            raise TypingError(f"op_run_{code}: t, a, b must be C-contiguous 1-d integer arrays")
        sig = types.void(w, t, a, b, types.intp, types.intp)

        def codegen(context, builder, signature, args):
            w_, t_, a_, b_, lo_, hi_ = args
            arr = context.make_array(signature.args[0])(context, builder, w_)
            lanes = builder.extract_value(arr.shape, 1)
            i64 = lanes.type
            index_data = [context.make_array(ty)(context, builder, v).data
                          for ty, v in zip(signature.args[1:4], (t_, a_, b_))]

            def row_starts(o, stride):
                # first element of the rows op o names (indices are non-negative: no wraparound)
                def start(k):
                    r = builder.load(builder.gep(index_data[k], [o]))
                    if r.type.width < 64:
                        r = builder.sext(r, i64)
                    return builder.mul(r, stride)
                return start(0), start(1) if reads_a else None, start(2) if reads_b else None

            def emit(vec, rows, s):
                t_row, a_row, b_row = rows

                def ptr(row):
                    return builder.bitcast(builder.gep(arr.data, [builder.add(row, s)]),
                                           vec.as_pointer())

                def load(row):
                    return builder.load(ptr(row), align=8)
                if code == MOV:
                    value = load(a_row)
                elif code == NEG:
                    value = builder.fneg(load(t_row))
                elif code == ADD:
                    value = builder.fadd(load(t_row), load(a_row))
                elif code == SUB:
                    value = builder.fsub(load(t_row), load(a_row))
                elif code == MUL:
                    value = builder.fmul(load(a_row), load(b_row))
                elif code == FMA:
                    value = builder.fadd(load(t_row), builder.fmul(load(a_row), load(b_row)))
                else:
                    assert code == FMS
                    value = builder.fsub(load(t_row), builder.fmul(load(a_row), load(b_row)))
                builder.store(value, ptr(t_row), align=8)
            one, zero = ir.Constant(i64, 1), ir.Constant(i64, 0)

            def blocks():
                block = ir.Constant(i64, OP_BLOCK)
                whole = builder.mul(builder.udiv(lanes, block), block)
                with cgutils.for_range_slice(builder, lo_, hi_, one) as (o, _):
                    rows = row_starts(o, lanes)
                    with cgutils.for_range_slice(builder, zero, whole, block) as (s, _):
                        emit(ir.VectorType(ir.DoubleType(), OP_BLOCK), rows, s)
                    with cgutils.for_range_slice(builder, whole, lanes, one) as (s, _):
                        emit(ir.VectorType(ir.DoubleType(), 1), rows, s)

            def by_width(k):
                # lanes == V: a loop whose rows are V-lane vectors at a constant stride; else
                # the next width (one test per run, not per operation)
                if k == len(WHOLE_ROWS):
                    blocks()
                    return
                v = ir.Constant(i64, WHOLE_ROWS[k])
                with builder.if_else(builder.icmp_unsigned("==", lanes, v),
                                     likely=True) as (then, otherwise):
                    with then:
                        with cgutils.for_range_slice(builder, lo_, hi_, one) as (o, _):
                            emit(ir.VectorType(ir.DoubleType(), WHOLE_ROWS[k]),
                                 row_starts(o, v), zero)
                    with otherwise:
                        by_width(k + 1)
            by_width(0)
            return context.get_dummy_value()
        return sig, codegen
    op_run.__name__ = f"op_run_{code}"
    return intrinsic(op_run)


(mul_run, fms_run, fma_run, sub_run, add_run, neg_run,
 mov_run) = (_op_run(c) for c in (MUL, FMS, FMA, SUB, ADD, NEG, MOV))


def _chain_block(vb):
    """The chain_block intrinsic on blocks of vb lanes."""
    vec = ir.VectorType(ir.DoubleType(), vb)

    def splat(builder, value):
        first = builder.insert_element(ir.Constant(vec, ir.Undefined), value,
                                       ir.Constant(ir.IntType(32), 0))
        return builder.shuffle_vector(first, ir.Constant(vec, ir.Undefined),
                                      ir.Constant(ir.VectorType(ir.IntType(32), vb), [0] * vb))

    def chain_block(typingctx, w, t, src, c0, from_row, pa, pb, pc, q, k, kmid, mid, mode, t2,
                    r2, s):
        sig = types.void(w, types.intp, types.intp, types.float64, types.intp, pa, pb, pc,
                         *([types.intp] * 8))

        def codegen(context, builder, signature, args):
            (w_, t_, src_, c0_, from_row_, pa_, pb_, pc_, q_, k_, kmid_, mid_, mode_, t2_, r2_,
             s_) = args
            row = _vector_rows(context, builder, signature, w_, s_, vec)
            a_data, b_data, c_data = (context.make_array(ty)(context, builder, v).data
                                      for ty, v in zip(signature.args[5:8], (pa_, pb_, pc_)))

            def load(r):
                return builder.load(row(r), align=8)

            def product(j):
                a = builder.load(builder.gep(a_data, [j]))
                b = builder.load(builder.gep(b_data, [j]))
                return builder.fmul(load(a), load(b))

            def is_mode(code):
                return builder.icmp_signed("==", mode_, ir.Constant(mode_.type, code))

            def product_list():
                with cgutils.for_range(builder, k_) as loop:
                    builder.store(product(builder.add(q_, loop.index)),
                                  row(builder.add(t_, loop.index)), align=8)

            def chain():
                use_row = builder.icmp_signed("!=", from_row_, ir.Constant(from_row_.type, 0))
                acc = cgutils.alloca_once(builder, vec)
                builder.store(builder.select(use_row, load(src_), splat(builder, c0_)), acc)
                # one loop over all products (a second loop would cost a second mispredicted
                # exit per chain); the mid store is a branch taken at most once
                with cgutils.for_range(builder, k_) as loop:
                    with builder.if_then(builder.icmp_signed("==", loop.index, kmid_),
                                         likely=False):
                        builder.store(builder.load(acc), row(mid_), align=8)
                    j = builder.add(q_, loop.index)
                    c = splat(builder, builder.load(builder.gep(c_data, [j])))
                    builder.store(builder.fadd(builder.load(acc),
                                               builder.fmul(product(j), c)), acc)
                value = builder.load(acc)
                builder.store(value, row(t_), align=8)
                with builder.if_then(is_mode(EPI_SCALE)):
                    builder.store(builder.fmul(value, load(r2_)), row(t2_), align=8)
                with builder.if_then(is_mode(EPI_RECIP)):
                    one = splat(builder, ir.Constant(ir.DoubleType(), 1.0))
                    builder.store(builder.fdiv(one, value), row(t2_), align=8)
                with builder.if_then(is_mode(EPI_ADD)):
                    builder.store(builder.fadd(load(t2_), value), row(t2_), align=8)

            with builder.if_else(is_mode(EPI_LIST)) as (then, otherwise):
                with then:
                    product_list()
                with otherwise:
                    chain()
            return context.get_dummy_value()
        return sig, codegen
    chain_block.__name__ = f"chain_block_{vb}"
    return intrinsic(chain_block)


chain_block_64, chain_block_32, chain_block_8 = (_chain_block(v) for v in BLOCKS)
