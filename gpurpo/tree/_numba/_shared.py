"""Helpers shared by the numba tree kernels: chunking, bit scan, prefetch, gain weights.

Inlining rule of the kernels: numba's ``inline="always"`` copies a helper's IR into
every call site before typing, so the compile time of a caller grows with the copies.
Helpers of a few operations are plain ``@njit`` functions, which LLVM inlines all the
same; the scans and the per-split scoring stay ``inline="always"`` because LLVM does
not inline them as calls. Integer arguments of njit calls are run-time values, not
literals: numba compiles a function again for each literal type it is called with.
"""

from __future__ import annotations

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

# Nodes of a batch are dealt to this many chunks (each with its own scratch).
N_CHUNKS = 256

# A kernel call over fewer samples than this (times the features a node searches, for
# the split search) runs on one thread: on small data the parallel regions cost more
# than they save (a 1,123-row text-like boosting fit, 100 rounds, took 1.95 s on one
# thread and 5.05 s on two, its thousands of short calls each a parallel region).
SERIAL_SAMPLES = 1 << 14
SERIAL_SEARCH = 1 << 22


def total_samples(node_ranges) -> int:
    """The samples of a batch of nodes (host arrays of ``[start, stop)`` rows)."""
    return int((node_ranges[:, 1] - node_ranges[:, 0]).sum()) if len(node_ranges) else 0

@intrinsic
def _count_trailing_zeros(typingctx, bits):
    """Index of the lowest set bit of a nonzero uint64 (LLVM ``cttz``: one instruction)."""
    if bits != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.uint64(types.uint64), codegen


@intrinsic
def _popcount(typingctx, bits):
    """Number of set bits of a uint64 (LLVM ``ctpop``: one instruction), as an int64."""
    if bits != types.uint64:
        return None

    def codegen(context, builder, signature, args):
        return builder.zext(builder.ctpop(args[0]), ir.IntType(64))

    return types.int64(types.uint64), codegen


@intrinsic
def _prefetch(typingctx, flat, index):
    """Hint the CPU to load the cache line of ``flat[index]`` (LLVM ``prefetch``; no fault,
    no effect on the result). ``flat``: a 1-D contiguous array; ``index`` within it."""
    if not isinstance(flat, types.Array) or flat.ndim != 1 or not isinstance(index, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        byte_ptr = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fn = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [byte_ptr, i32, i32, i32]))
        address = builder.bitcast(builder.gep(array.data, [args[1]]), byte_ptr)
        # read, highest temporal locality, data cache
        builder.call(fn, [address, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(flat, index), codegen


@njit(cache=True)
def _side_weight(weight):
    """The weight a gain divides by: 1 for a side whose weight is not positive.

    Empty sides of a histogram scan have weight 0; a right side ``W - W_L``
    of an exact scan, computed from sums, can be zero or negative when its
    samples weigh less than the rounding error of the node's total (weights
    differing by more than 2^53). Its gain term is then the squared norm (the
    rounding residue of ``S - L``) over 1, instead of a division by zero.
    """
    return weight if weight > 0 else 1.0
