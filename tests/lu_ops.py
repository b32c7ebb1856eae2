"""The LU program's opcodes as sparsedyn.ir.instructions defines them, in plain NumPy: the oracle the
kernel tests run programs with (no sparsedyn kernel involved)."""
import numpy as np

from sparsedyn.ir import instructions as K


def apply_op(w, code, t, a, b):
    """w[t] = the result of op (code, t, a, b) on a work vector (one state) or on the rows of a
    work array (n_slots, lanes); a RECIP's pivot check is the caller's. Products are rounded
    before the sum, as the compiled kernels must round them."""
    w[t] = {K.RECIP: lambda: 1.0 / w[a], K.MUL: lambda: w[a] * w[b],
            K.FMS: lambda: w[t] - w[a] * w[b], K.FMA: lambda: w[t] + w[a] * w[b],
            K.SUB: lambda: w[t] - w[a], K.ADD: lambda: w[t] + w[a], K.NEG: lambda: -w[t],
            K.MOV: lambda: w[a], K.ABSFMA: lambda: w[t] + np.abs(w[a] * w[b]),
            K.ABSADD: lambda: w[t] + np.abs(w[a])}[code]()
