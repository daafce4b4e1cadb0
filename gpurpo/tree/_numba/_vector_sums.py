"""A node's weight and per-channel sums in SIMD registers (numba intrinsic).

:func:`node_totals8` forms the totals of a node whose targets have 8 padded
channels: its weight ``W = sum w``, the channel sums ``S[c] = sum w y_c``
and ``LS[c] = sum w y_c^2``, each over the node's positions in order. The
eight channels of a sample are one vector of eight lanes (one load of its
row of ``wy``, one of ``y`` widened to float64), so that a sample costs a
few vector operations where eight scalar chains cost some forty scalar
ones. Each lane's chain makes the scalar chain's additions in the same
order (IEEE-754 lane-wise ``fadd``/``fmul``, no contraction into FMA, no
reassociation): the same bits.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["node_totals8"]

_LANES = 8


def _is_array(t, ndim, dtype=None):
    return (isinstance(t, types.Array) and t.ndim == ndim and t.layout == "C"
            and (dtype is None or t.dtype == dtype))


@intrinsic
def node_totals8(typingctx, rows, d0, ns, w, wy, y, S, LS):
    """The totals of the node at positions ``d0 .. d0 + ns - 1``: returns ``W``, fills ``S``, ``LS``.

    The node's rows are ``rows[d0:d0 + ns]`` (integers); ``w`` (float64),
    ``wy`` (float64, rows of 8 channels) and ``y`` (float32, rows of 8
    channels) are C-contiguous; ``S`` and ``LS`` (float64, 8 entries)
    receive ``sum w y_c`` and ``sum w y_c^2``. ``W``, each ``S[c]`` and each
    ``LS[c]`` start at 0.0 and add the samples in position order, ``w y_c``
    times ``y_c`` (widened to float64) for ``LS``.
    """
    if not (_is_array(rows, 1) and isinstance(rows.dtype, types.Integer)
            and isinstance(d0, types.Integer) and isinstance(ns, types.Integer)
            and _is_array(w, 1, types.float64) and _is_array(wy, 2, types.float64)
            and _is_array(y, 2, types.float32) and _is_array(S, 1, types.float64)
            and _is_array(LS, 1, types.float64)):
        return None
    signature = types.float64(rows, d0, ns, w, wy, y, S, LS)

    def codegen(context, builder, sig, args):
        rows_a, w_a, wy_a, y_a, S_a, LS_a = (
            context.make_array(sig.args[i])(context, builder, args[i]) for i in (0, 3, 4, 5, 6, 7))
        i64 = ir.IntType(64)
        f64 = ir.DoubleType()
        vec64 = ir.VectorType(f64, _LANES)
        vec32 = ir.VectorType(ir.FloatType(), _LANES)
        byte_ptr = ir.IntType(8).as_pointer()
        start = context.cast(builder, args[1], sig.args[1], types.int64)
        end = builder.add(start, context.cast(builder, args[2], sig.args[2], types.int64))
        wy_stride = builder.extract_value(wy_a.strides, 0)
        y_stride = builder.extract_value(y_a.strides, 0)
        zero = ir.Constant(f64, 0.0)
        zeros = ir.Constant(vec64, [0.0] * _LANES)

        def row_vector(array, stride, r, vec_type, align):
            address = builder.gep(builder.bitcast(array.data, byte_ptr), [builder.mul(r, stride)])
            return builder.load(builder.bitcast(address, vec_type.as_pointer()), align=align)

        entry = builder.block
        loop = builder.append_basic_block("totals8.loop")
        done = builder.append_basic_block("totals8.done")
        builder.cbranch(builder.icmp_signed("<", start, end), loop, done)
        builder.position_at_end(loop)
        a = builder.phi(i64)
        W = builder.phi(f64)
        Sv = builder.phi(vec64)
        Qv = builder.phi(vec64)
        r = builder.load(builder.gep(rows_a.data, [a]))
        r = builder.sext(r, i64) if r.type.width < 64 else r
        W_next = builder.fadd(W, builder.load(builder.gep(w_a.data, [r])))
        wy_r = row_vector(wy_a, wy_stride, r, vec64, 8)
        y_r = builder.fpext(row_vector(y_a, y_stride, r, vec32, 4), vec64)
        S_next = builder.fadd(Sv, wy_r)
        Q_next = builder.fadd(Qv, builder.fmul(wy_r, y_r))
        a_next = builder.add(a, ir.Constant(i64, 1))
        builder.cbranch(builder.icmp_signed("<", a_next, end), loop, done)
        for phi, first, later in ((a, start, a_next), (W, zero, W_next), (Sv, zeros, S_next),
                                  (Qv, zeros, Q_next)):
            phi.add_incoming(first, entry)
            phi.add_incoming(later, loop)
        builder.position_at_end(done)
        results = []
        for first, later in ((zero, W_next), (zeros, S_next), (zeros, Q_next)):
            phi = builder.phi(first.type)
            phi.add_incoming(first, entry)
            phi.add_incoming(later, loop)
            results.append(phi)
        W_out, S_out, Q_out = results
        builder.store(S_out, builder.bitcast(S_a.data, vec64.as_pointer()), align=8)
        builder.store(Q_out, builder.bitcast(LS_a.data, vec64.as_pointer()), align=8)
        return W_out

    return signature, codegen
