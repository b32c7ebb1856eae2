"""The plan IR: what the offline phase produces and every online backend runs, backend-neutral
and serialisable (arrays and integers only).

    instructions   the LU program's instruction set (opcodes, their reads and costs)
    lu_program     LUProgram and the passes over it (dependency levels, runs, pivot checks)
    layout         the sweep layout of a program for one state at a time (slot order, liveness,
                   slot reuse)
    fused          FusedProgram: an assembly program bound to an LU program, scheduled per kind
                   of call, with the typed bundles the backends read
"""
