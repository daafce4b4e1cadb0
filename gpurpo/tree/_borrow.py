"""Non-owning array views for the inner loops of the numba CPU kernels.

numba counts references to every array it passes to a function or slices
into a view: a call to ``NRT_incref`` or ``NRT_decref`` whose atomic
read-modify-write (``lock xadd`` on x86) also orders every memory access
around it, so the out-of-order core cannot overlap the work on either side.
The per-node split search calls helpers with some thirty arrays per node and
a few per candidate feature, so those counts would take a large share of the
subtree kernel's time.

:func:`borrow` gives a view of an array with a null ``meminfo``: the same
data, shape and strides, and no reference, so numba's counting on it stops
at the null test in ``NRT_incref``/``NRT_decref``. The view is valid only
while another reference keeps the array alive: borrow the ARGUMENTS of a
function (its caller holds them for the whole call), never an array the
function allocates itself (numba frees a local array after its last use,
whatever views of it remain), and never return a borrowed view.
"""

from __future__ import annotations

from numba import types
from numba.extending import intrinsic


def _borrowed_view(context, builder, array_type, value):
    """LLVM value of an array of ``array_type`` with the fields of ``value`` and a null meminfo."""
    source = context.make_array(array_type)(context, builder, value=value)
    view = context.make_array(array_type)(context, builder)
    for field in ("parent", "nitems", "itemsize", "data", "shape", "strides"):
        setattr(view, field, getattr(source, field))
    view.meminfo = context.get_constant_null(types.MemInfoPointer(types.voidptr))
    return view._getvalue()


@intrinsic
def borrow(typingctx, array):
    """A view of ``array`` that holds no reference to it (null meminfo); see the module notes."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        return _borrowed_view(context, builder, signature.args[0], args[0])

    return array(array), codegen


@intrinsic
def borrow_all(typingctx, arrays):
    """:func:`borrow` of every array of a tuple, as a tuple of the same type (a namedtuple
    stays one); its other members are passed through (same rules: arguments only)."""
    if not isinstance(arrays, types.BaseTuple):
        return None

    def codegen(context, builder, signature, args):
        members = []
        for i, member_type in enumerate(signature.args[0].types):
            value = builder.extract_value(args[0], i)
            if isinstance(member_type, types.Array):
                value = _borrowed_view(context, builder, member_type, value)
            elif context.enable_nrt:
                # the result owns its other members: one reference each (none for scalars)
                context.nrt.incref(builder, member_type, value)
            members.append(value)
        return context.make_tuple(builder, signature.return_type, members)

    return arrays(arrays), codegen
