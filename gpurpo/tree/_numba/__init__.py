"""numba CPU twins of the CUDA tree kernels.

Each ``tree_<stage>.py`` here is the CPU implementation of ``kernels/tree_<stage>.cu``
(``tree_grow_subtrees.py`` and ``tree_split_small.py`` are the two kernels of
``kernels/tree_split_small.cu``; both use the node split search of ``_node_split.py``,
whose per-feature scans are ``_feature_scan.py``, and take the argument records of
``_kernel_records.py``).
The contracts (shapes, dtypes, memory order, meaning) are documented once, in
:mod:`gpurpo.tree.kernels`, which registers these functions with
:func:`gpurpo.backend.register_kernel`. Every kernel only FILLS output arrays allocated
(and, where documented, zeroed) by its caller; none allocates a result. Compiled
without ``fastmath`` so results do not depend on re-association.
"""
