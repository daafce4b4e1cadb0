"""The tree kernels: contracts, registration and allocating wrappers.

Every hot loop of tree growth and prediction is one kernel registered with
:func:`gpurpo.backend.register_kernel`. The CPU implementation is numba
(the modules of :mod:`gpurpo.tree._numba`, each named after its ``kernels/tree_<stage>.cu`` twin); a CUDA twin takes EXACTLY the same arrays
(same shapes, dtypes and C order; the exact split kernels take them in the
argument records of :mod:`gpurpo.tree._records`) plus the backend as first argument. The
wrappers below validate dtypes and contiguity, allocate every output with the
backend's ``xp`` (zeroed where the contract says so) and call
``backend.kernel(name)``: a kernel never allocates its result, it only fills
``out`` arrays.

Notation: ``n`` samples, ``p`` features, ``T`` trees grown together, ``m``
projected outputs, ``d`` original outputs, ``N`` nodes in a batch, ``k``
candidate-feature slots per node, ``B = n_bins`` (the last bin, ``B - 1``,
holds missing values), ``L`` leaves.

Kernel contracts
----------------
``tree_bin_codes(X, edges, n_edges, missing_bin, out)``
    X            float32|float64 (n, q) C order, raw values of q features, NaN = missing
    edges        float64 (q, B - 1)    increasing bin edges of each feature, +inf padded
    n_edges      int32   (q,)          number of real edges of each feature
    missing_bin  int
    out          uint8   (q, n)        ``#{e < x : e in edges[f, :n_edges[f]]}`` for x =
                                       X[i, f], ``missing_bin`` for NaN (so that
                                       ``code <= b`` iff ``x <= edges[f, b]``)
    (registered with an ``xp`` searchsorted implementation for CUDA backends)

``tree_bin_codes_sparse(indptr, indices, data, edges, n_edges, missing_bin, out)``
    indptr, indices int32|int64  CSC structure of X (n, q), canonical (sorted, no duplicates)
    data         float32|float64 (nnz,) stored values, NaN = missing
    edges, n_edges, missing_bin  as for ``tree_bin_codes``
    out          uint8   (q, n)        the codes of ``tree_bin_codes`` for the dense X; rows
                                       with no stored entry get the code of 0.0
    (numba per feature; for CUDA backends an ``xp`` version comparing blocks of
    stored entries with their edge rows, :mod:`gpurpo.tree.binning._sparse`)

``tree_histograms(codes, batch, node_features, weights, targets, out, rows=None)``
    codes        uint8   (p, n)        feature-major bin codes; (p, 0) for a sparse X
                                       held as its stored entries, then ``rows``
    rows         tuple                 ``(row_ptr, row_features, row_codes, zero_code)``
                                       of its :class:`~gpurpo.tree.binning.SparseCodes`
                                       (int64 (n + 1,), int32, uint8, uint8 (p,)): every
                                       code is ``zero_code[f]`` but the listed ones
    batch        NodeBatch             the nodes (:mod:`gpurpo.tree._records`; its
                                       ``node_seed`` and ``node_depth`` unused):
    sample_indices int32 (total,)      samples of the nodes, node ``i`` owning
                                       ``sample_indices[node_ranges[i, 0]:node_ranges[i, 1]]``
    node_ranges  int64   (N, 2)        [start, stop) of each node
    node_tree    int32   (N,)          tree of each node (index into weights/targets)
    node_features int32  (N, k)        feature of each slot; ``-1`` = unused slot
    weights      float32 (T, n)        sample weight of each sample in each tree
    targets      float32 (n, T, m)     (projected) targets of each sample for each tree
    out          float32 (N, k, B, C)  every cell written (no zeroing needed); C = m + 1
                                       or m + 2.
    For every node i, slot j with f = node_features[i, j] >= 0 and every
    sample s of node i with b = codes[f, s], w = weights[t, s], t = node_tree[i]:
    ``out[i, j, b, 0] += w``; ``out[i, j, b, 1 + c] += w * targets[s, t, c]``;
    if C == m + 2, ``out[i, j, b, m + 1] += 1`` (number of samples). Slots
    with f = -1 stay zero. Each cell is a sum rounded once to float32: the
    CPU kernel sums in float64 in sample order; the CUDA kernel sums exactly
    in 64-bit fixed point (the same bits whatever its launch plan and the
    order of its atomics), channel c's values scaled by 2^e_c (e_c = 61 - bitlen(N) - E_c,
    N = len(sample_indices), 2^E_c > max|w| for c = 0 and > max|w| max|y_c|
    for a target channel), so a value keeps an absolute precision of 2^-e_c
    (``kernels/tree_histograms.cu``). The two agree to float32 rounding. From
    ``rows``, the CUDA kernel adds the listed codes and derives each slot's
    cell of ``zero_code[f]`` from the node's totals, in the same integers: the
    same bits as from the dense codes. The CUDA kernel also takes ``scratch``
    (keyword; :func:`histogram_scratch`): the maxima of the weights and targets,
    read once per growth instead of once per launch, and zeroed integer sums for
    nodes split into sample chunks, which their last chunk leaves at zero.

``tree_node_stats(sample_indices, node_ranges, node_tree, weights, targets, node_done, out_impure, out_q)``
    sample_indices, node_ranges, node_tree, weights, targets: as above
    node_done    uint32  (>= N,) or (0,)  ZERO, and left at zero: the CUDA kernel's
                                       counters of the blocks that share a node (not read
                                       on the CPU); length 0: one block per node
    out_impure   uint8   (N,)          1 when the targets of node i's samples are
                                       not all bitwise equal (to its first sample's)
    out_q        float64 (N,)          ``Q = sum_s w_s * sum_c y_sc^2`` over node i, in
                                       float64 (the base of the tie tolerance only:
                                       summation order free)

``tree_partition(codes, sample_indices, node_ranges, node_feature, node_bin, node_missing_left, missing_bin, out_n_left)``
    Splits nodes: reorders each node's samples IN PLACE.
    codes, sample_indices, node_ranges: as above (ranges of the splitting nodes)
    node_feature int32   (N,)          split feature of each node; a node of feature < 0
                                       keeps its samples (n_left 0)
    node_bin     int32   (N,)          samples with ``codes[f, s] <= bin`` go left
    node_missing_left uint8 (N,)       side of the samples with code ``missing_bin``
    missing_bin  int
    out_n_left   int64   (N,)          number of samples going left
    ``sample_indices[start:stop]`` of node i becomes its left-going samples then
    its right-going ones, each in their previous order (a stable partition);
    entries outside the nodes' ranges are untouched.

``tree_split_small(codes, batch, weights, targets, edges, rules, sparse, out_feature, out_bin, out_missing_left, out_gain)``
    Exact best split of each node computed from its samples (used for small
    nodes: no histogram is materialised). ``batch``, ``edges``, ``rules`` and
    ``sparse`` are the records of :mod:`gpurpo.tree._records`, their arrays
    typed as below; the numba implementation turns them into the namedtuple
    records of :mod:`gpurpo.tree._numba._kernel_records` that its compiled
    kernel takes, the CUDA one unpacks them where it launches the kernel.
    codes, weights, targets: as above
    batch        NodeBatch             ``sample_indices``, ``node_ranges``, ``node_tree``
                                       as above, and:
    sparse       SparseColumns         ``subtracted_bin``, ``listed`` and the
                                       ``SparseCodes`` ``sparse_codes`` below:
    subtracted_bin int32 (p,)          per feature, the bin whose sums nodes of more than
                                       SORT_LIMIT samples derive from their totals, or -1
                                       (``BinnedMatrix.subtracted_bin``)
    listed       int64   (p,)          per feature, its number of codes other than
                                       ``subtracted_bin`` in all the data
                                       (``BinnedMatrix.listed``; n where no bin is)
    col_ptr      int64   (p + 1,)      a sparse X's codes column by column (the
    col_rows     int32   (nnz,)        ``SparseCodes`` columns: the rows whose code is not
    col_codes    uint8   (nnz,)        the feature's code of 0.0, increasing, and their
                                       codes), or ``col_ptr`` of length 0 when there are none;
                                       with the columns, the numba kernel also takes
                                       ``codes`` of shape (p, 0) (no dense codes) and
                                       gathers a node's codes of a feature from them;
                                       the CUDA kernel then looks each sample's code up
                                       in its row (``sparse_codes``' rows)
    node_seed    uint64  (N,)          per-node seed of ``batch`` (see gpurpo.tree._random)
    edges        EdgeTable             the ragged edge table:
    edge_values  float64 (E,)          the features' increasing upper bin edges, feature
    edge_ptr     int64   (p + 1,)      f's at ``edge_values[edge_ptr[f]:edge_ptr[f + 1]]``;
                                       ``edge(f, b)``, the raw upper edge of value bin b
                                       (split "code <= b" is "x <= edge(f, b)"), is
                                       ``+inf`` from b = edge_ptr[f + 1] - edge_ptr[f] on;
                                       with ``random_split``, E = 2 edge_ptr[p] + p: the
                                       edges are followed by each value bin's smallest
                                       fitted value (bin b of f at edge_ptr[p] +
                                       edge_ptr[f] + f + b; BinnedMatrix.edge_values),
                                       the raw scale of the Extra-Trees draw
    rules        SplitRules            the scalars below:
    n_candidates int                   k: number of NON-CONSTANT features to evaluate
    min_samples_leaf int               minimum number of samples on each side
    random_split bool                  Extra-Trees mode
    missing_bin  int                   B - 1
    tie_rtol     float                 relative tolerance of ties between features
    out_feature  int32   (N,)          best feature, -1 when the node must not split
    out_bin      int32   (N,)          split "code <= bin" (missing excluded)
    out_missing_left uint8 (N,)        1: missing values go left
    out_gain     float64 (N,)          ``||S_L||^2/W_L + ||S_R||^2/W_R - ||S||^2/W``
    Semantics (identical to the histogram path of gpurpo.tree.splitting):
    a node with fewer than 2 or 2 * min_samples_leaf samples, or whose
    samples all have bitwise-equal targets, gets feature -1. Features are
    visited in the order ``feature_at(seed, 0..p-1, p)``, also when
    ``n_candidates >= p`` (the order breaks ties, below); a feature is constant when all its codes in the
    node are equal (missing counting as a code) and is skipped, but counts as
    visited: the non-constant features among the first ``n_candidates``
    positions are evaluated and, when there are none, the first non-constant
    feature after them (scikit-learn's rule, which draws ``max_features``
    features, constant ones included, and draws on only until one is not
    constant). For a feature, the
    candidate splits are "code <= b" for each occupied value bin b below the
    largest occupied one, with missing values sent right and (if the node has
    missing values) left, plus "all values left, missing right" when missing
    values are present. Sums in float64 of ``w * y`` products formed in
    float64: a node of at most SORT_LIMIT samples adds its samples one by one
    in code order (stable: position order within a code); a larger node sums
    each code's samples in position order, the left sums adding these per-code
    sums in increasing code order, except that the sums of code
    ``z = subtracted_bin[f] >= 0``, when present, are the node's totals (summed
    in position order) minus the sums of the other codes (added in increasing
    code order, the missing code last): so a sparse feature's table costs its
    nonzeros in the node, listed by ``col_*`` (the CPU kernel reads them when
    the node's rows increase and the column is shorter than the node; the CUDA
    twin reads ``codes``). A node of at most SORT_LIMIT samples sums a
    feature with ``listed[f] < ns`` (and ``z >= 0``) as a larger node does, too:
    sorting would cost the node's samples for a few codes of other bins. The path
    depends on the feature and the node size only, so dense and sparse X and
    both twins give the same bits. Extra-Trees: one cut
    ``b = _random_cut`` per feature from ``u = uniform_at(seed, position)``:
    the largest ``b`` in ``[bmin, bmax - 1]`` of the node's codes whose bin's
    smallest fitted value is at most ``t``, drawn uniformly between those of
    bins ``bmin`` and ``bmax`` (scikit-learn's threshold between the node's
    smallest and largest values, in raw units; the split "code <= cut" may
    land in an empty bin: the stored bin is the cut). Sides need at least
    ``min_samples_leaf`` samples. Sums in float64. The best split of a
    feature is its largest gain (exact ties: lowest bin, then missing right).
    Across features, every feature whose best gain is at least
    ``gmax - tol`` ties with the best one, ``tol = tie_rtol * (Q - ||S||^2 / W)
    + TIE_ROUNDING * Q`` with ``Q = sum w ||y||^2`` over the node (targets as
    given): a fraction of the node's own impurity, plus the rounding of sums of
    size Q. The first of them in the node's random visiting order wins, so
    equal-gain splits (features inducing the same partition, say) are chosen
    uniformly at random, as scikit-learn's fresh feature order at every node
    chooses them, and float rounding cannot break such ties differently in
    different code paths.
    Without missing values in the node, missing values go to the side with
    the larger weight (left on ties).

``tree_score_histograms(hist, node_features, n_outputs, min_samples_leaf, random_split, uniforms, edges, newton, reg_lambda, min_child_weight, out_gain, out_bin, out_missing_left, out_nonconstant)``
    Best split of every (node, slot) from its histogram (the large-node path;
    the equations are in :mod:`gpurpo.tree.splitting`).
    hist         float32 (N, k, B, C)  histograms of ``tree_histograms``; channel C - 1
                                       is the sample count when C == m + 2, else
                                       channel 0 (unit weights) is
    node_features int32  (N, k)        feature of each slot, -1 = unused slot
    n_outputs    int                   m (C is m + 1 or m + 2)
    min_samples_leaf int               minimum number of samples on each side
    random_split int (0 or 1)          Extra-Trees mode
    uniforms     float64 (N, k)        Extra-Trees draw of each slot in [0, 1) (unused otherwise)
    edges        EdgeTable             the ragged edge table, as for ``tree_split_small``
    newton       int (0 or 1)          1: second-order gain; channels 1..m/2 hold the
                                       gradient sums G_j, channels m/2+1..m the hessian
                                       sums H_j (m even)
    reg_lambda   float64               lambda of the second-order gain (>= 0)
    min_child_weight float64           an output counts in a side's second-order score
                                       only where that side's H_j >= min_child_weight
    out_gain     float64 (N, k)        best gain, ``-inf`` when the slot has no valid split
    out_bin      int32   (N, k)        split "code <= bin"
    out_missing_left uint8 (N, k)      1: missing values go left
    out_nonconstant uint8 (N, k)       1: the slot's feature takes >= 2 codes in the node
    Sums in float64 from the float32 cells: per channel, bins added in
    increasing order; squared norms add channels 1..m in order; so the
    result is bitwise that of the NumPy formulation of gpurpo.tree.splitting.
    Second-order gain (``newton``; Chen & Guestrin 2016, eq. 7 without the
    factor 1/2, summed over outputs as in vector-leaf trees): a side's score
    is ``sum_j G_j^2 / (H_j + reg_lambda)`` over the outputs j = 1..m/2, in
    order, with ``H_j >= min_child_weight`` and ``H_j + reg_lambda > 0``
    (each quotient rounded, then added); the gain is left + right - parent.
    Candidate splits, validity and tie rules: "code <= b" for each occupied
    value bin b (count > 0) below the largest occupied one, missing values
    right and (when the node has missing values) left, plus "all values
    left, missing right"; each side needs ``min_samples_leaf`` samples; the
    first largest gain in the order (b = 0 right, b = 0 left, b = 1 right,
    ...) wins. Extra-Trees: one cut per slot, the largest bin b in
    ``[bmin, bmax - 1]`` with ``edge(f, b) <= lo + u (hi - lo)``, lo and
    hi the edges of bins bmin and bmax - 1 (bmin, bmax: smallest and largest
    occupied bins), both sides scored, missing left only when strictly
    better. A slot without a valid split, constant or unused, gets gain
    ``-inf``. Without missing values, missing values go to the heavier side
    (left on ties).

``tree_grow_subtrees(codes, batch, weights, targets, root_weight, edges, rules, sparse, out)``
    Grows R small subtrees to completion, depth first, one per given node
    (its "root"), each from a private copy of its samples' codes (a
    cache-resident feature-major block). Every node is evaluated with the
    rules of ``tree_split_small``; a node is a leaf when ``max_depth`` is
    not None and its depth is ``>= max_depth``, when it has fewer than
    ``min_samples_split`` samples, when no split is valid, or when
    ``gain / (m * root_weight[tree]) + eps < min_impurity_decrease`` (eps the
    float64 machine epsilon). A split partitions the node's positions
    stably, left child first; children seeds are ``child_seed(seed, 0|1)``.
    codes, batch, weights, targets, edges, the rules of ``tree_split_small``
    and sparse: as for ``tree_split_small`` (the nodes of ``batch`` are the
    roots)
    zero_code, row_ptr, row_features, row_codes of ``sparse.sparse_codes``: the
    codes of a sparse X row by row (the ``SparseCodes`` rows of
    gpurpo.tree.binning._sparse), or ``row_ptr`` of length 0 when there is none
    (``zero_code`` is then unused):
    zero_code    uint8   (p,)          code of 0.0 of each feature
    row_ptr      int64   (n + 1,)      row i owns entries ``row_ptr[i]:row_ptr[i + 1]``
    row_features int32   (nnz,)        feature of each entry
    row_codes    uint8   (nnz,)        its code; ``codes[f, i]`` is ``zero_code[f]`` for
                                       every feature f without an entry in row i
    With the view, a root's copy is filled with the zero codes and then its
    samples' entries, instead of reading ``p`` scattered codes per sample:
    the same copy, so the same result.
    col_ptr, col_rows, col_codes of ``sparse.sparse_codes``: the stored-entry
    columns of a sparse X, as for ``tree_split_small`` (length-0 ``col_ptr``
    when there are none). The CPU
    kernel grows a root of more than ``min(4096, max(64, 2**19 // p))``
    samples on the global codes (and these columns, where a node's rows
    increase) until a node fits a private copy, so that it takes roots of any
    size; the CUDA kernel copies every root into its block's scratch (roots
    of at most ``default_subtree_size`` samples) and does not read them.
    node_depth   int32   (R,)          depth of each root (``batch.node_depth``)
    min_samples_split int; max_depth int or None (None: no limit; the compiled
    kernels take -1, ``SplitRules.depth_limit``); min_impurity_decrease float:
    the other fields of ``rules``
    root_weight  float64 (T,)          total weight of each tree (its root)
    out          Subtrees              the outputs (:class:`Subtrees`), fields:
    out_offsets  int64   (R + 1,)      root r owns output rows
                                       ``out_offsets[r] : out_offsets[r] + 2 * ns_r - 1``
    out_count    int32   (R,)          number of nodes grown under root r
    per node (row ``out_offsets[r] + j``, j = 0 the root, local numbering):
    out_feature int32 (-1 leaf), out_bin int32, out_missing_left uint8,
    out_gain float64 (0 for leaves), out_left/out_right int32 (local j, -1),
    out_depth int32, out_start/out_stop int64: the node's samples are
    ``sample_indices[node_ranges[r, 0] + out_start : ... + out_stop]``.
    sample_indices (in/out): the range of each root is rewritten so that
    every node's samples are contiguous (final order: leaves left to right).

``tree_accumulate_leaves_dense(leaf_of_sample, weights, Y, out)``
    leaf_of_sample int32 (n,)          leaf of each sample, -1 = not in the tree
    weights      float64 (n,)
    Y            float32|float64 (n, d) C order
    out          float64 (L, d)        ZEROED; ``out[leaf[i]] += weights[i] * Y[i]``
                                       for i = 0, 1, ... in turn
    CPU only (numba): on a CUDA backend :func:`accumulate_leaves_dense` computes
    the same sums, bit for bit, with ``tree_segment_row_sums`` over every leaf's
    samples in sample order (:func:`gpurpo.tree.batch_leaves.ordered_leaf_sums`).

``tree_accumulate_leaves_csr(leaf_of_sample, weights, indptr, indices, data, out)``
    As above with Y in CSR form: indptr int64 (n + 1,), indices int64 (nnz,),
    data float64 (nnz,). CPU only: on a CUDA backend :func:`accumulate_leaves_csr`
    sums the same entries in the same order with ``tree_segment_sums``
    (:func:`gpurpo.tree.batch_leaves.ordered_leaf_sums_csr`).

``tree_apply(X, feature, threshold, missing_left, left, right, roots, out)``
    X            float32|float64 (n, p) C order, raw inputs, NaN = missing
    feature      int32   (N,)          split feature, -1 for a leaf
    threshold    float64 (N,)          go left when ``x <= threshold``
    missing_left uint8   (N,)          NaN goes left when 1
    left, right  int32   (N,)          children (global node indices)
    roots        int32   (T,)          root node of each tree
    out          int32   (n, T)        node index of the leaf reached by row i in tree t
    One work item per (row, tree).

``tree_apply_csr(indptr, indices, data, n_columns, feature, threshold, missing_left, left, right, roots, out)``
    ``tree_apply`` of a sparse X in canonical CSR form (each row's column
    indices increasing, no duplicates), without densifying it:
    indptr       int64   (n + 1,)      row i's stored entries are indptr[i]:indptr[i + 1]
    indices      int32   (nnz,)        their columns
    data         float64 (nnz,)        their values (NaN = missing)
    n_columns    int                   X's number of columns p: every column index and
                                       every node feature is below it (as ``tree_apply``
                                       reads ``X[i, feature]``), so no kernel passes over
                                       the nodes to bound them
    a column without a stored entry in the row is 0.0; each node's value is
    found by binary search among the row's entries. Same leaves as
    ``tree_apply`` on the densified X.

``tree_sum_leaves_dense(leaf_rows, values, out)``
    leaf_rows    int32   (n, T)        row of ``values`` per (sample, tree), -1 = skip
    values       float64 (L, d) C order
    out          float64 (n, d)        ACCUMULATED into (zero it for a plain sum):
                                       ``out[i] += sum_t values[leaf_rows[i, t]]``

``tree_sum_leaves_csr(leaf_rows, indptr, indices, data, out)``
    As above with values in CSR form: indptr (L + 1,) and indices int64 (the
    numba kernel also takes int32, SciPy's usual index type, without a copy),
    data float64.

``tree_neighbour_values(X, weights, feature, threshold, missing_left, left, right, roots, low, high)``
    X            float32|float64 (n, p) C order, raw training inputs, NaN = missing
    weights      float32 (T, n)        training weight of row i in tree t; rows of
                                       weight 0 are skipped
    feature ... roots                  the packed trees, as in ``tree_apply``
    low          float64 (N,)          ACCUMULATED: max of ``low[g]`` and the values of
                                       internal node g's feature among the rows it sends left
    high         float64 (N,)          ACCUMULATED: min of ``high[g]`` and the values among
                                       the rows it sends right
    One work item per (row, tree); NaN values are not recorded.

``tree_neighbour_values_csr(indptr, indices, data, weights, feature, ..., roots, low, high)``
    ``tree_neighbour_values`` of a canonical CSR X (as ``tree_apply_csr``).

``tree_best_slot(hist, q, impure, gain, bins, missing_left, node_features, order, nonconstant, node_pos, m, newton, has_order, has_pos, n_features, tie_rtol, tie_rounding, out)``
    hist         float32 (N, k, B, C)  the histograms that were scored; slot 0 holds all
                                       of node i's samples
    q            float64 (N,)          ``Q = sum w ||y||^2`` (``tree_node_stats``)
    impure       uint8   (N,)          0: the node's targets are all equal (a leaf)
    gain, bins, missing_left           (N, k) ``tree_score_histograms``'s outputs
    node_features int32  (N, k)        the slots' features
    order        int64   (N, k)        each slot's position in the node's visiting order
                                       (read only when ``has_order``; else slot order)
    nonconstant  uint8   (N, k)        ``tree_score_histograms``'s output (read only
    node_pos     int64   (N,)          when ``has_pos``): the slots are positions
                                       ``node_pos .. node_pos + k - 1`` of the visiting
                                       order of ``n_features`` features
    out          float64 (N, 4)        feature (-1: no split), bin, missing_left, gain
                                       (-inf: no split) of the node's best slot
    The node's tie tolerance is ``tie_rtol * max(Q - ||S||^2 / W, 0) + tie_rounding *
    Q`` (``tie_rtol * Q`` with ``newton``), W and S summed over slot 0's bins in bin
    order; slots within it of the largest gain tie and the smallest ``order`` wins
    (:func:`gpurpo.tree.splitting.best_slot_per_node`). With ``has_pos``
    (scikit-learn's rule for k sampled features: constant features count as
    visited), an impure node without a non-constant slot gets feature -2 (continue
    at ``node_pos + k``) while ``node_pos + k < n_features``, and a node with
    ``node_pos > 0`` takes its first non-constant slot in ``order``, or -1 when that
    slot has no valid split.


``tree_score_best_slot(hist, node_features, n_outputs, min_samples_leaf, random_split, uniforms, edges, newton, reg_lambda, min_child_weight, q, impure, order, node_pos, has_order, has_pos, n_features, tie_rtol, tie_rounding, node_done, out_gain, out_bin, out_missing_left, out_nonconstant, out)``
    ``tree_score_histograms`` (its arguments and ``out_*`` outputs) followed by
    ``tree_best_slot`` on its outputs (``q``, ``impure``, ``order``, ``node_pos``,
    ``has_order``, ``has_pos``, ``n_features``, ``tie_rtol``, ``tie_rounding`` and
    ``out`` as there, ``m = n_outputs``): one launch on CUDA.
    node_done    uint32  (>= N,)       ZERO, and left at zero: the CUDA kernel counts
                                       each node's scored slots there (not read on the
                                       CPU)
``tree_segment_sums(values, bounds, out)``
    values       float64 (E,)          entries laid out segment after segment
    bounds       int64   (S + 1,)      segment s is ``values[bounds[s]:bounds[s + 1]]``
    out          float64 (S,)          ``0.0 + values[bounds[s]] + ...``, summed in
                                       increasing position (the order of the CPU's
                                       sums, so the result is the same bit for bit)
``tree_segment_row_sums(rows, row_weights, bounds, Y, out)``
    rows         int64   (E,)          the row of ``Y`` of every entry, entries laid out
                                       segment after segment
    row_weights  float64 (E,)          the weight of every entry
    bounds       int64   (S + 1,)      segment s holds entries ``bounds[s]:bounds[s + 1]``
    Y            float32 or float64 (n, d), C-contiguous
    out          float64 (S, d)        ``0.0 + w[e] Y[rows[e], c] + ...`` over the
                                       entries e of segment s in increasing order, each
                                       product rounded before its addition (the order
                                       and rounding of the CPU's leaf sums)
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpurpo._validation import check_float
from gpurpo.backend import Backend, register_kernel
from gpurpo.tree import _histogram_scratch
from gpurpo.tree import _kernels_cuda as _cuda
from gpurpo.tree._numba import (
    tree_grow_subtrees,
    tree_histograms,
    tree_leaves,
    tree_node_stats,
    tree_partition,
    tree_predict,
    tree_score,
    tree_segment_sums,
    tree_split_small,
    tree_thresholds,
)
from gpurpo.tree._records import (
    EdgeTable,
    NodeBatch,
    NodeSplits,
    SparseColumns,
    SplitRules,
    Subtrees,
)
from gpurpo.tree.binning import _code_tables, _sparse

__all__ = [
    "KERNEL_NAMES",
    "EdgeTable",
    "NodeBatch",
    "NodeSplits",
    "SparseColumns",
    "SplitRules",
    "Subtrees",
    "bin_codes",
    "bin_codes_sparse",
    "build_histograms",
    "histogram_scratch",
    "node_stats",
    "split_small",
    "score_histograms",
    "grow_subtrees",
    "accumulate_leaves_dense",
    "accumulate_leaves_csr",
]

KERNEL_NAMES = (
    "tree_bin_codes",
    "tree_bin_codes_sparse",
    "tree_histograms",
    "tree_node_stats",
    "tree_partition",
    "tree_split_small",
    "tree_score_histograms",
    "tree_score_best_slot",
    "tree_grow_subtrees",
    "tree_accumulate_leaves_dense",
    "tree_accumulate_leaves_csr",
    "tree_apply",
    "tree_apply_csr",
    "tree_neighbour_values",
    "tree_neighbour_values_csr",
    "tree_sum_leaves_dense",
    "tree_sum_leaves_csr",
)



def _bin_codes_xp(
    backend: Backend, X: Any, edges: Any, n_edges: Any, missing_bin: int, out: Any
) -> None:
    """``tree_bin_codes`` in ``xp`` (one searchsorted per feature), for CUDA backends."""
    xp = backend.xp
    counts = backend.to_host(n_edges)
    for f in range(X.shape[1]):
        col = X[:, f].astype(xp.float64)
        codes = xp.searchsorted(edges[f, : int(counts[f])], col, side="left")
        out[f] = xp.where(xp.isnan(col), missing_bin, codes).astype(xp.uint8)


register_kernel("tree_bin_codes", cpu=_code_tables.bin_codes, cuda=_bin_codes_xp)
register_kernel("tree_bin_codes_sparse", cpu=_sparse.sparse_bin_codes_cpu, cuda=_sparse.sparse_bin_codes_xp)
register_kernel("tree_node_stats", cpu=tree_node_stats.launch, cuda=_cuda.node_stats)
register_kernel("tree_partition", cpu=tree_partition.launch, cuda=_cuda.partition)
register_kernel("tree_histograms", cpu=tree_histograms.histograms, cuda=_cuda.histograms)
register_kernel("tree_split_small", cpu=tree_split_small.launch, cuda=_cuda.split_small_nodes)
register_kernel("tree_score_histograms", cpu=tree_score.launch, cuda=_cuda.score_histograms)
register_kernel("tree_grow_subtrees", cpu=tree_grow_subtrees.launch, cuda=_cuda.grow_subtrees)
register_kernel("tree_accumulate_leaves_dense", cpu=tree_leaves.accumulate_leaves_dense)
register_kernel("tree_accumulate_leaves_csr", cpu=tree_leaves.accumulate_leaves_csr)
register_kernel("tree_apply", cpu=tree_predict.apply_trees, cuda=_cuda.apply_trees)
register_kernel("tree_apply_csr", cpu=tree_predict.apply_trees_csr, cuda=_cuda.apply_trees_csr)
register_kernel("tree_neighbour_values", cpu=tree_thresholds.neighbour_values, cuda=_cuda.neighbour_values)
register_kernel("tree_neighbour_values_csr", cpu=tree_thresholds.neighbour_values_csr,
                cuda=_cuda.neighbour_values_csr)
register_kernel("tree_sum_leaves_dense", cpu=tree_predict.sum_leaves_dense, cuda=_cuda.sum_leaves_dense)
register_kernel("tree_sum_leaves_csr", cpu=tree_predict.sum_leaves_csr, cuda=_cuda.sum_leaves_csr)
register_kernel("tree_best_slot", cpu=tree_score.best_slot, cuda=_cuda.best_slot)
register_kernel("tree_score_best_slot", cpu=tree_score.launch_best_slot,
                cuda=_cuda.score_best_slot)
register_kernel("tree_segment_sums", cpu=tree_segment_sums.segment_sums, cuda=_cuda.segment_sums)
register_kernel("tree_segment_row_sums", cpu=tree_segment_sums.segment_row_sums,
                cuda=_cuda.segment_row_sums)


def _c(backend: Backend, a: Any, dtype: Any) -> Any:
    return backend.xp.ascontiguousarray(a, dtype=dtype)


def _listed(backend: Backend, listed: Any, shape: tuple[int, int]) -> Any:
    """The ``listed`` argument of the split kernels (None: ``n`` for every feature)."""
    xp = backend.xp
    p, n = (int(s) for s in shape)
    if listed is None:
        return xp.full(p, n, dtype=xp.int64)
    if listed.shape != (p,):
        raise ValueError(f"listed must have shape ({p},), got {listed.shape}")
    return _c(backend, listed, xp.int64)


def _subtracted(backend: Backend, subtracted_bin: Any, p: int) -> Any:
    """The ``subtracted_bin`` argument of the split kernels (None: -1, none)."""
    xp = backend.xp
    if subtracted_bin is None:
        return xp.full(p, -1, dtype=xp.int32)
    if subtracted_bin.shape != (p,):
        raise ValueError(f"subtracted_bin must have shape ({p},), got {subtracted_bin.shape}")
    return _c(backend, subtracted_bin, xp.int32)


def _rows(backend: Backend, sparse_codes: Any, p: int) -> tuple[Any, Any, Any, Any]:
    """The ``zero_code, row_ptr, row_features, row_codes`` arguments of ``tree_grow_subtrees``."""
    xp = backend.xp
    if sparse_codes is None:
        # no stored rows: the kernels read the dense codes, never zero_code
        return (xp.empty(p, dtype=xp.uint8), xp.zeros(0, dtype=xp.int64),
                xp.zeros(0, dtype=xp.int32), xp.zeros(0, dtype=xp.uint8))
    return (_c(backend, sparse_codes.zero_code, xp.uint8),
            _c(backend, sparse_codes.row_ptr, xp.int64),
            _c(backend, sparse_codes.row_features, xp.int32),
            _c(backend, sparse_codes.row_codes, xp.uint8))


def _edge_table(backend: Backend, edge_values: Any, edge_ptr: Any,
                p: int | None = None, random_split: bool = False) -> tuple[Any, Any]:
    """The ``edge_values, edge_ptr`` arguments of the split kernels (the ragged edge
    table of :attr:`gpurpo.tree.binning.BinMapper.edge_ptr_`), typed and checked
    (``edge_ptr`` of length ``p + 1`` when ``p`` is given; with ``random_split``,
    the edges followed by the bins' lows, :attr:`gpurpo.tree.binning.BinnedMatrix.edge_values`)."""
    xp = backend.xp
    if (edge_values.ndim != 1 or edge_ptr.ndim != 1 or edge_ptr.shape[0] < 1
            or (p is not None and edge_ptr.shape[0] != p + 1)):
        raise ValueError(
            "edge_values and edge_ptr must be 1-D (a ragged edge table: feature f's edges "
            f"at edge_values[edge_ptr[f]:edge_ptr[f + 1]]), got shapes {edge_values.shape} "
            f"and {edge_ptr.shape}" + ("" if p is None else f", for {p} features")
        )
    if random_split:
        n_edges = int(edge_ptr[-1])
        n_features = int(edge_ptr.shape[0]) - 1
        if int(edge_values.shape[0]) != 2 * n_edges + n_features:
            raise ValueError(
                "random splits need the bins' lows after the edges: edge_values of length "
                f"{2 * n_edges + n_features} (2 x {n_edges} edges + {n_features} features), "
                f"got {int(edge_values.shape[0])}"
            )
    return _c(backend, edge_values, xp.float64), _c(backend, edge_ptr, xp.int64)


def _columns(backend: Backend, sparse_codes: Any) -> tuple[Any, Any, Any]:
    """The ``col_ptr, col_rows, col_codes`` arguments of ``tree_split_small``."""
    xp = backend.xp
    if sparse_codes is None:
        return xp.zeros(0, dtype=xp.int64), xp.zeros(0, dtype=xp.int32), xp.zeros(0, dtype=xp.uint8)
    return (_c(backend, sparse_codes.col_ptr, xp.int64),
            _c(backend, sparse_codes.col_rows, xp.int32),
            _c(backend, sparse_codes.col_codes, xp.uint8))


def bin_codes(
    backend: Backend, X: Any, edges: Any, n_edges: Any, missing_bin: int, out: Any
) -> Any:
    """Fill ``out`` (uint8 (q, n), rows of the codes matrix) with the codes of dense X (n, q)."""
    xp = backend.xp
    X = xp.ascontiguousarray(X)
    if X.dtype not in (xp.float32, xp.float64):
        X = X.astype(xp.float64)
    if X.shape[0] == 0 or X.shape[1] == 0:
        return out
    backend.kernel("tree_bin_codes")(
        X, _c(backend, edges, xp.float64), _c(backend, n_edges, xp.int32), int(missing_bin), out
    )
    return out


def bin_codes_sparse(
    backend: Backend, X: Any, edges: Any, n_edges: Any, missing_bin: int, out: Any
) -> Any:
    """Fill ``out`` (uint8 (q, n)) with the codes of a sparse X (n, q) (SciPy or cupyx)."""
    xp = backend.xp
    X = _sparse.canonical_csc(X)
    data = X.data
    if data.dtype not in (xp.float32, xp.float64):
        data = data.astype(xp.float64)
    if X.shape[0] == 0 or X.shape[1] == 0:
        return out
    backend.kernel("tree_bin_codes_sparse")(
        backend.asarray(X.indptr), backend.asarray(X.indices), backend.asarray(data),
        _c(backend, edges, xp.float64), _c(backend, n_edges, xp.int32), int(missing_bin), out,
    )
    return out


def node_stats(
    backend: Backend,
    sample_indices: Any,
    node_ranges: Any,
    node_tree: Any,
    weights: Any,
    targets: Any,
    node_done: Any = None,
) -> tuple[Any, Any]:
    """(impure uint8 (N,), Q float64 (N,)) of the nodes; see ``tree_node_stats``.

    ``node_done``: uint32 zeros for at least N nodes (:func:`score_counters`),
    which let several CUDA blocks share a node and which the kernel leaves at
    zero; None: one block per node.
    """
    xp = backend.xp
    ranges = _c(backend, node_ranges, xp.int64)
    n_nodes = int(ranges.shape[0])
    out_impure = xp.empty(n_nodes, dtype=xp.uint8)
    out_q = xp.empty(n_nodes, dtype=xp.float64)
    if node_done is None:
        node_done = xp.empty(0, dtype=xp.uint32)
    elif (node_done.dtype != xp.uint32 or node_done.ndim != 1
          or not node_done.flags.c_contiguous):
        raise ValueError(f"node_done must be a contiguous 1-D uint32 array, got "
                         f"{node_done.dtype} of shape {tuple(node_done.shape)}")
    if n_nodes:
        backend.kernel("tree_node_stats")(
            _c(backend, sample_indices, xp.int32),
            ranges,
            _c(backend, node_tree, xp.int32),
            _c(backend, weights, xp.float32),
            _c(backend, targets, xp.float32),
            node_done,
            out_impure,
            out_q,
        )
    return out_impure, out_q


def _split_rules(backend: Backend, splits: NodeSplits, missing_bin: int) -> tuple:
    """The split arguments of the partition kernels, in their dtypes, C-contiguous."""
    xp = backend.xp
    if not isinstance(splits, NodeSplits):
        raise TypeError(f"splits must be a NodeSplits, got {type(splits).__name__}")
    return (_c(backend, splits.feature, xp.int32), _c(backend, splits.bin, xp.int32),
            _c(backend, splits.missing_left, xp.uint8), int(missing_bin))


def _partition_outputs(backend: Backend, batch: NodeBatch) -> tuple[Any, Any, Any]:
    """The checked samples, node ranges (int64) and the ``out_n_left`` of a partition kernel."""
    xp = backend.xp
    if not isinstance(batch, NodeBatch):
        raise TypeError(f"batch must be a NodeBatch, got {type(batch).__name__}")
    sample_indices = batch.sample_indices
    if sample_indices.dtype != xp.int32 or not sample_indices.flags.c_contiguous:
        raise TypeError("sample_indices must be a C-contiguous int32 array (it is partitioned "
                        f"in place), got {sample_indices.dtype}")
    ranges = _c(backend, batch.node_ranges, xp.int64)
    return sample_indices, ranges, xp.empty(int(ranges.shape[0]), dtype=xp.int64)


def partition(
    backend: Backend,
    codes: Any,
    batch: NodeBatch,
    splits: NodeSplits,
    missing_bin: int,
) -> Any:
    """Stable in-place partition of the nodes' samples; returns n_left int64 (N,).

    See ``tree_partition`` in the module docstring: ``batch`` gives the
    nodes' samples (``sample_indices``, reordered in place) and ranges (its
    ``node_tree`` is not read), ``splits`` their chosen splits.
    """
    xp = backend.xp
    sample_indices, ranges, out_n_left = _partition_outputs(backend, batch)
    if ranges.shape[0]:
        backend.kernel("tree_partition")(
            _c(backend, codes, xp.uint8),
            sample_indices,
            ranges,
            *_split_rules(backend, splits, missing_bin),
            out_n_left,
        )
    return out_n_left


def _require_numpy(backend: Backend, name: str) -> None:
    """Raise for a backend other than NumPy: ``name`` reads the stored-entry columns that
    only the CPU keeps (CUDA backends bin a sparse X into dense codes)."""
    if backend.name != "numpy":
        raise ValueError(f"{name} runs on the numpy backend only, got {backend.name!r}")


def partition_columns(
    backend: Backend,
    sparse_codes: Any,
    edges: EdgeTable,
    batch: NodeBatch,
    splits: NodeSplits,
    missing_bin: int,
) -> Any:
    """:func:`partition` for a sparse X binned without its dense codes (CPU only).

    The codes are read from the stored-entry columns of ``sparse_codes``
    (:class:`~gpurpo.tree.binning._sparse.SparseCodes`); same partition and
    return value as ``tree_partition`` on the dense codes. CUDA backends bin
    a sparse X into dense codes and use :func:`partition`.
    """
    _require_numpy(backend, "partition_columns")
    sample_indices, ranges, out_n_left = _partition_outputs(backend, batch)
    if ranges.shape[0]:
        tree_partition.launch_columns(
            *_columns(backend, sparse_codes),
            *_edge_table(backend, edges.edge_values, edges.edge_ptr,
                         sparse_codes.col_ptr.shape[0] - 1),
            sample_indices,
            ranges,
            *_split_rules(backend, splits, missing_bin),
            out_n_left,
        )
    return out_n_left


def _histogram_out(backend: Backend, node_features: Any, targets: Any, n_bins: int,
                   n_channels: int) -> Any:
    """The ``(N, k, n_bins, n_channels)`` float32 histograms (not zeroed: the kernels write
    every cell), channels checked."""
    m = targets.shape[2]
    if n_channels not in (m + 1, m + 2):
        raise ValueError(
            f"n_channels must be m + 1 or m + 2 = {m + 1} or {m + 2}, got {n_channels}"
        )
    n_nodes, k = node_features.shape
    return backend.xp.empty((n_nodes, k, n_bins, n_channels), dtype=backend.xp.float32)


def _histogram_batch(backend: Backend, batch: NodeBatch) -> NodeBatch:
    """The ``batch`` of the histogram kernels: its node arrays in their dtypes,
    C-contiguous (no seeds, no depths)."""
    xp = backend.xp
    if not isinstance(batch, NodeBatch):
        raise TypeError(f"batch must be a NodeBatch, got {type(batch).__name__}")
    return NodeBatch(
        sample_indices=_c(backend, batch.sample_indices, xp.int32),
        node_ranges=_c(backend, batch.node_ranges, xp.int64),
        node_tree=_c(backend, batch.node_tree, xp.int32),
    )


def _histogram_data(backend: Backend, node_features: Any, weights: Any, targets: Any) -> tuple:
    """``node_features``, ``weights`` and ``targets`` of the histogram kernels, in their
    dtypes, C-contiguous."""
    xp = backend.xp
    return (_c(backend, node_features, xp.int32), _c(backend, weights, xp.float32),
            _c(backend, targets, xp.float32))


def build_histograms(
    backend: Backend,
    codes: Any,
    batch: NodeBatch,
    node_features: Any,
    weights: Any,
    targets: Any,
    n_bins: int,
    n_channels: int,
    out: Any = None,
    stored: Any = None,
    scratch: Any = None,
) -> Any:
    """Allocate and fill the ``(N, k, n_bins, n_channels)`` float32 histograms.

    See ``tree_histograms`` in the module docstring; ``batch`` (a
    :class:`NodeBatch`) gives the nodes' samples and trees. ``out`` (C-contiguous,
    of that shape; every cell is written) receives them instead of a new array.
    ``codes`` of shape ``(p, 0)``: the codes of a sparse X held without them,
    read from the rows of ``stored`` (its
    :class:`~gpurpo.tree.binning.SparseCodes`); the same histograms.
    ``scratch``: :func:`histogram_scratch` of these weights and targets, shared by
    the launches of a growth (None: each launch reads the maxima itself).
    """
    xp = backend.xp
    batch = _histogram_batch(backend, batch)
    if out is None:
        out = _histogram_out(backend, node_features, targets, n_bins, n_channels)
    else:
        expected = (*node_features.shape, int(n_bins), int(n_channels))
        if (tuple(out.shape) != expected or out.dtype != xp.float32
                or not out.flags.c_contiguous):
            raise ValueError(f"out must be a C-contiguous float32 array of shape {expected}, "
                             f"got {out.dtype} {tuple(out.shape)}")
    if out.size == 0:
        return out
    features, weights, targets = _histogram_data(backend, node_features, weights, targets)
    rows = None
    if int(codes.shape[1]) == 0:
        if stored is None:
            raise ValueError("codes of shape (p, 0) need stored, the SparseCodes of the X")
        zero_code, row_ptr, row_features, row_codes = _rows(backend, stored, int(codes.shape[0]))
        if int(row_ptr.shape[0]) != int(weights.shape[1]) + 1:
            raise ValueError(f"stored lists {int(row_ptr.shape[0]) - 1} rows, the weights "
                             f"{int(weights.shape[1])} samples")
        rows = (row_ptr, row_features, row_codes, zero_code)
    launch = backend.kernel("tree_histograms")
    if scratch is None:
        launch(_c(backend, codes, xp.uint8), batch, features, weights, targets, out, rows)
    else:
        launch(_c(backend, codes, xp.uint8), batch, features, weights, targets, out, rows,
               scratch=scratch)
    return out


def histogram_scratch(backend: Backend, weights: Any, targets: Any, total_samples: int,
                      width: int, n_bins: int, n_channels: int, counters: int = 0) -> Any:
    """What the CUDA histogram launches of a growth on ``weights`` (T, n) and ``targets``
    (n, T, m) share (:class:`~gpurpo.tree._histogram_scratch.HistogramScratch`: the
    maxima of the fixed-point scales, read once, and the zeroed sums of nodes split
    into sample chunks), for :func:`build_histograms`'s ``scratch``; None on the CPU,
    whose kernel sums in float32 without scales.

    ``total_samples`` is the length of the growth's ``sample_indices``; the launches
    split nodes into chunks only when the batch has at least ``2 *
    MIN_SAMPLES_PER_BLOCK`` of them per node, and then the sums of T nodes of
    ``width`` slots of ``n_bins`` x ``n_channels`` cells are zeroed with the maxima,
    with at least ``counters`` counters (zero between launches, so that other kernels
    that leave their counters at zero may share them: ``scratch.sums(0, n)[1]``).
    """
    if not backend.uses_cuda_kernels:
        return None
    xp = backend.xp
    n_nodes = int(weights.shape[0]) if int(total_samples) >= 2 * _cuda.MIN_SAMPLES_PER_BLOCK else 0
    return _histogram_scratch.HistogramScratch(
        backend, _c(backend, weights, xp.float32), _c(backend, targets, xp.float32),
        n_nodes * width * n_bins * n_channels, max(n_nodes * width * n_channels, int(counters)))


def build_histograms_columns(
    backend: Backend,
    sparse_codes: Any,
    edges: EdgeTable,
    batch: NodeBatch,
    node_features: Any,
    weights: Any,
    targets: Any,
    n_bins: int,
    n_channels: int,
) -> Any:
    """:func:`build_histograms` for a sparse X binned without its dense codes (CPU only).

    Each (node, feature) reads the feature's codes of the node's samples from
    the stored-entry columns of ``sparse_codes``, decoded with ``edges`` (an
    :class:`EdgeTable`); the same histograms as ``tree_histograms`` on the
    dense codes.
    """
    _require_numpy(backend, "build_histograms_columns")
    batch = _histogram_batch(backend, batch)
    edges = _typed_edges(backend, edges, sparse_codes.col_ptr.shape[0] - 1)
    out = _histogram_out(backend, node_features, targets, n_bins, n_channels)
    if out.size == 0:
        return out
    tree_histograms.histograms_columns(
        *_columns(backend, sparse_codes), edges, batch,
        *_histogram_data(backend, node_features, weights, targets), out,
    )
    return out


def _typed_batch(backend: Backend, batch: NodeBatch, *, depth: bool = False) -> NodeBatch:
    """``batch`` with its arrays in the dtypes of the contract, C-contiguous (``node_depth``
    required when ``depth``)."""
    xp = backend.xp
    if not isinstance(batch, NodeBatch):
        raise TypeError(f"batch must be a NodeBatch, got {type(batch).__name__}")
    if batch.node_seed is None:
        raise ValueError("batch.node_seed is required by the exact split kernels")
    if depth and batch.node_depth is None:
        raise ValueError("batch.node_depth is required by tree_grow_subtrees")
    return NodeBatch(
        sample_indices=_c(backend, batch.sample_indices, xp.int32),
        node_ranges=_c(backend, batch.node_ranges, xp.int64),
        node_tree=_c(backend, batch.node_tree, xp.int32),
        node_seed=_c(backend, batch.node_seed, xp.uint64),
        node_depth=None if batch.node_depth is None else _c(backend, batch.node_depth, xp.int32),
    )


def _typed_edges(backend: Backend, edges: EdgeTable, p: int | None = None,
                 random_split: bool = False) -> EdgeTable:
    """``edges`` typed and checked (see :func:`_edge_table`)."""
    if not isinstance(edges, EdgeTable):
        raise TypeError(f"edges must be an EdgeTable, got {type(edges).__name__}")
    return EdgeTable(*_edge_table(backend, edges.edge_values, edges.edge_ptr, p,
                                   random_split))


def _typed_sparse(backend: Backend, sparse: SparseColumns | None,
                  shape: tuple[int, int]) -> SparseColumns:
    """``sparse`` as the split kernels take it: every field an array of the contract
    (``sparse_codes`` a ``SparseCodes`` with length-0 ``row_ptr`` and ``col_ptr`` when
    there are none); None is ``SparseColumns()``."""
    if sparse is None:
        sparse = SparseColumns()
    if not isinstance(sparse, SparseColumns):
        raise TypeError(f"sparse must be a SparseColumns or None, got {type(sparse).__name__}")
    p = int(shape[0])
    zero_code, row_ptr, row_features, row_codes = _rows(backend, sparse.sparse_codes, p)
    col_ptr, col_rows, col_codes = _columns(backend, sparse.sparse_codes)
    return SparseColumns(
        subtracted_bin=_subtracted(backend, sparse.subtracted_bin, p),
        sparse_codes=_sparse.SparseCodes(
            zero_code=zero_code, row_ptr=row_ptr, row_features=row_features,
            row_codes=row_codes, col_ptr=col_ptr, col_rows=col_rows, col_codes=col_codes,
        ),
        listed=_listed(backend, sparse.listed, shape),
    )


def _checked_rules(rules: SplitRules) -> SplitRules:
    if not isinstance(rules, SplitRules):
        raise TypeError(f"rules must be a SplitRules, got {type(rules).__name__}")
    return rules


def split_small(
    backend: Backend,
    codes: Any,
    batch: NodeBatch,
    weights: Any,
    targets: Any,
    edges: EdgeTable,
    rules: SplitRules,
    sparse: SparseColumns | None = None,
) -> tuple[Any, Any, Any, Any]:
    """Exact best split per node; returns (feature, bin, missing_left, gain).

    See ``tree_split_small`` in the module docstring. ``sparse`` (None: no
    subtracted bin, no stored-entry columns, ``n`` listed codes for every
    feature) comes from the ``BinnedMatrix``.
    """
    xp = backend.xp
    rules = _checked_rules(rules)
    n_nodes = batch.node_ranges.shape[0]
    out_feature = xp.empty(n_nodes, dtype=xp.int32)
    out_bin = xp.empty(n_nodes, dtype=xp.int32)
    out_missing_left = xp.empty(n_nodes, dtype=xp.uint8)
    out_gain = xp.empty(n_nodes, dtype=xp.float64)
    if n_nodes == 0:
        return out_feature, out_bin, out_missing_left, out_gain
    backend.kernel("tree_split_small")(
        _c(backend, codes, xp.uint8),
        _typed_batch(backend, batch),
        _c(backend, weights, xp.float32),
        _c(backend, targets, xp.float32),
        _typed_edges(backend, edges, codes.shape[0], rules.random_split),
        rules,
        _typed_sparse(backend, sparse, codes.shape),
        out_feature,
        out_bin,
        out_missing_left,
        out_gain,
    )
    return out_feature, out_bin, out_missing_left, out_gain


def _score_inputs(
    backend: Backend, hist: Any, node_features: Any, n_outputs: int, random_split: bool,
    uniforms: Any, newton: bool, reg_lambda: float, min_child_weight: float,
) -> tuple[Any, Any, Any]:
    """The checked ``hist`` (float32), ``node_features`` (int32) and ``uniforms`` of
    ``tree_score_histograms`` (a placeholder without ``random_split``)."""
    xp = backend.xp
    n_nodes, k, n_bins, n_channels = (int(s) for s in hist.shape)
    m = int(n_outputs)
    if m < 1 or n_channels not in (m + 1, m + 2):
        raise ValueError(
            f"hist must have m + 1 or m + 2 channels for n_outputs={m}, got shape {hist.shape}"
        )
    if newton:
        if m % 2:
            raise ValueError(
                f"n_outputs must be even with newton=True (gradient then hessian channels), "
                f"got {m}"
            )
        check_float(reg_lambda, "reg_lambda", low=0.0)
        check_float(min_child_weight, "min_child_weight", low=0.0)
    if n_bins < 2:
        raise ValueError(f"hist must have at least 2 bins, got shape {hist.shape}")
    if tuple(node_features.shape) != (n_nodes, k):
        raise ValueError(
            f"node_features must have shape {(n_nodes, k)}, got {tuple(node_features.shape)}"
        )
    if random_split and n_nodes and k:
        if uniforms is None:
            raise ValueError("uniforms are required when random_split is true")
        uniforms = _c(backend, uniforms, xp.float64)
    else:
        uniforms = xp.empty((n_nodes, k), dtype=xp.float64)  # not read
    return _c(backend, hist, xp.float32), _c(backend, node_features, xp.int32), uniforms


def score_histograms(
    backend: Backend,
    hist: Any,
    node_features: Any,
    n_outputs: int,
    min_samples_leaf: int,
    random_split: bool,
    uniforms: Any,
    edges: EdgeTable,
    newton: bool = False,
    reg_lambda: float = 1.0,
    min_child_weight: float = 0.0,
) -> tuple[Any, Any, Any, Any]:
    """Best split of every (node, slot); returns (gain, bin, missing_left, nonconstant).

    See ``tree_score_histograms`` in the module docstring. ``uniforms`` may be
    ``None`` when ``random_split`` is false; ``edges`` (an :class:`EdgeTable`)
    places the Extra-Trees cuts; ``newton`` selects the second-order gain
    (gradient then hessian channels).
    """
    xp = backend.xp
    n_nodes, k = (int(s) for s in hist.shape[:2])
    hist, node_features, uniforms = _score_inputs(
        backend, hist, node_features, n_outputs, random_split, uniforms, newton, reg_lambda,
        min_child_weight)
    outputs = _slot_outputs(xp, n_nodes, k)
    if n_nodes == 0 or k == 0:
        return outputs
    backend.kernel("tree_score_histograms")(
        hist, node_features, int(n_outputs), int(min_samples_leaf), int(bool(random_split)),
        uniforms, _typed_edges(backend, edges, random_split=bool(random_split)),
        int(bool(newton)), float(reg_lambda), float(min_child_weight), *outputs,
    )
    return outputs


def _slot_outputs(xp: Any, n_nodes: int, k: int) -> tuple[Any, Any, Any, Any]:
    """Empty (gain, bin, missing_left, nonconstant) arrays of ``tree_score_histograms``."""
    return (xp.empty((n_nodes, k), dtype=xp.float64), xp.empty((n_nodes, k), dtype=xp.int32),
            xp.empty((n_nodes, k), dtype=xp.uint8), xp.empty((n_nodes, k), dtype=xp.uint8))


def grow_subtrees(
    backend: Backend,
    codes: Any,
    batch: NodeBatch,
    weights: Any,
    targets: Any,
    root_weight: Any,
    edges: EdgeTable,
    rules: SplitRules,
    sparse: SparseColumns | None = None,
    offsets: Any = None,
    total: int | None = None,
) -> Subtrees:
    """Grow the subtrees under the nodes of ``batch``; ``batch.sample_indices`` is
    updated in place.

    See ``tree_grow_subtrees`` in the module docstring; ``root_weight``
    float64 (T,) is the total weight of each tree, ``sparse`` as for
    :func:`split_small` (without stored entries, the root copies read
    ``codes``). ``offsets`` int64 (R + 1,) (0, then the running sum of ``2 size
    - 1`` over the roots) and its last entry ``total`` may be given where the
    caller knows them; else they are computed (one device-to-host copy).
    """
    xp = backend.xp
    rules = _checked_rules(rules)
    ranges = _c(backend, batch.node_ranges, xp.int64)
    n_roots = int(ranges.shape[0])
    if offsets is None:
        sizes = ranges[:, 1] - ranges[:, 0]
        running = xp.cumsum(2 * sizes - 1)
        total = int(running[-1]) if n_roots else 0
        out = Subtrees.allocate(xp, n_roots, total)
        out.offsets[0] = 0
        out.offsets[1:] = running
    else:
        if total is None or tuple(offsets.shape) != (n_roots + 1,):
            raise ValueError(f"offsets must have shape ({n_roots + 1},) and come with total, "
                             f"got shape {tuple(offsets.shape)} and total {total}")
        # the kernels read the caller's offsets where they lie
        out = replace(Subtrees.allocate(xp, n_roots, int(total)), offsets=offsets)
    if n_roots == 0:
        return out
    sample_indices = batch.sample_indices
    if sample_indices.dtype != xp.int32 or not sample_indices.flags.c_contiguous:
        raise ValueError("sample_indices must be a C-contiguous int32 array (updated in place)")
    backend.kernel("tree_grow_subtrees")(
        _c(backend, codes, xp.uint8),
        _typed_batch(backend, batch, depth=True),
        _c(backend, weights, xp.float32),
        _c(backend, targets, xp.float32),
        _c(backend, root_weight, xp.float64),
        _typed_edges(backend, edges, codes.shape[0], rules.random_split),
        rules,
        _typed_sparse(backend, sparse, codes.shape),
        out,
    )
    return out


def accumulate_leaves_dense(
    backend: Backend, leaf_of_sample: Any, weights: Any, Y: Any, n_leaves: int
) -> Any:
    """Per-leaf weighted sums of dense Y: float64 (n_leaves, d), each from 0.0 over the
    leaf's samples in increasing order, on every backend (no atomics)."""
    xp = backend.xp
    if backend.uses_cuda_kernels:
        from gpurpo.tree.batch_leaves import ordered_leaf_sums

        _, sums, _ = ordered_leaf_sums(Y, xp.asarray(leaf_of_sample)[None],
                                       xp.asarray(weights)[None], [int(n_leaves)], backend)
        return sums
    Y = xp.ascontiguousarray(Y)
    if Y.dtype not in (xp.float32, xp.float64):
        Y = Y.astype(xp.float64)
    out = xp.zeros((int(n_leaves), Y.shape[1]), dtype=xp.float64)
    backend.kernel("tree_accumulate_leaves_dense")(
        _c(backend, leaf_of_sample, xp.int32), _c(backend, weights, xp.float64), Y, out
    )
    return out


def accumulate_leaves_csr(
    backend: Backend, leaf_of_sample: Any, weights: Any, Y: Any, n_leaves: int
) -> Any:
    """Per-leaf weighted sums of CSR Y, as a dense float64 (n_leaves, d) array, each
    from 0.0 over the leaf's entries in sample order, on every backend (no atomics)."""
    xp = backend.xp
    out = xp.zeros((int(n_leaves), Y.shape[1]), dtype=xp.float64)
    if backend.uses_cuda_kernels:
        from gpurpo.tree.batch_leaves import ordered_leaf_sums_csr

        keys, sums, _, _ = ordered_leaf_sums_csr(Y, xp.asarray(leaf_of_sample)[None],
                                                 xp.asarray(weights)[None], [int(n_leaves)],
                                                 backend)
        out.reshape(-1)[keys] = sums
        return out
    backend.kernel("tree_accumulate_leaves_csr")(
        _c(backend, leaf_of_sample, xp.int32),
        _c(backend, weights, xp.float64),
        _c(backend, Y.indptr, xp.int64),
        _c(backend, Y.indices, xp.int64),
        _c(backend, Y.data, xp.float64),
        out,
    )
    return out


def best_slots(
    backend: Backend,
    hist: Any,
    q: Any,
    impure: Any,
    slots: Any,
    node_features: Any,
    order: Any,
    n_outputs: int,
    newton: bool,
    tie_rtol: float,
    tie_rounding: float,
    node_pos: Any = None,
    n_features: int = 0,
) -> Any:
    """The best slot of every node with its tie tolerance: float64 (N, 4) (``tree_best_slot``).

    ``slots`` holds ``gain``, ``bin``, ``missing_left`` and ``nonconstant``
    (N, k) (a :class:`~gpurpo.tree.splitting.SlotSplits`); ``order`` may be
    None (slot order). With ``node_pos`` (int64 (N,)) the slots are positions
    ``node_pos .. node_pos + k - 1`` of the nodes' visiting orders of
    ``n_features`` features, and a node without a non-constant slot may get
    feature -2 (see the contract). One array out, so the host reads every
    node's choice in one copy.
    """
    xp = backend.xp
    n_nodes, k = (int(s) for s in slots.gain.shape)
    if hist.ndim != 4 or int(hist.shape[0]) != n_nodes or int(hist.shape[1]) != k:
        raise ValueError(f"hist must have shape ({n_nodes}, {k}, B, C), got {tuple(hist.shape)}")
    out = xp.empty((n_nodes, 4), dtype=xp.float64)
    if n_nodes == 0:
        return out
    q, impure, order, node_pos, has_order, has_pos = _best_slot_inputs(
        backend, n_nodes, k, q, impure, order, node_pos)
    nonconstant = slots.nonconstant
    # 0/1 bytes either way: a bool array is read as uint8 without a copy
    nonconstant = (_c(backend, nonconstant.view(xp.uint8) if nonconstant.dtype == bool
                      else nonconstant, xp.uint8) if has_pos else xp.empty((1, 1), dtype=xp.uint8))
    backend.kernel("tree_best_slot")(
        _c(backend, hist, xp.float32), q, impure,
        _c(backend, slots.gain, xp.float64), _c(backend, slots.bin, xp.int32),
        _c(backend, slots.missing_left, xp.uint8), _c(backend, node_features, xp.int32), order,
        nonconstant, node_pos, int(n_outputs), int(bool(newton)), int(has_order), int(has_pos),
        int(n_features), float(tie_rtol), float(tie_rounding), out,
    )
    return out


def _best_slot_inputs(backend: Backend, n_nodes: int, k: int, q: Any, impure: Any, order: Any,
                      node_pos: Any) -> tuple[Any, Any, Any, Any, bool, bool]:
    """The node arguments of ``tree_best_slot``, typed and checked: ``q`` (float64 (N,)),
    ``impure`` (uint8 (N,)), ``order`` (int64 (N, k), or a placeholder when None),
    ``node_pos`` (int64 (N,), likewise) and whether each of the last two was given."""
    xp = backend.xp
    for name, a in (("q", q), ("impure", impure)):
        if tuple(a.shape) != (n_nodes,):
            raise ValueError(f"{name} must have shape ({n_nodes},), got {tuple(a.shape)}")
    has_order = order is not None
    if has_order and tuple(order.shape) != (n_nodes, k):
        raise ValueError(f"order must have shape ({n_nodes}, {k}), got {tuple(order.shape)}")
    order = _c(backend, order, xp.int64) if has_order else xp.empty((1, 1), dtype=xp.int64)
    has_pos = node_pos is not None
    if has_pos:
        node_pos = _c(backend, node_pos, xp.int64)
        if tuple(node_pos.shape) != (n_nodes,):
            raise ValueError(f"node_pos must have shape ({n_nodes},), got {tuple(node_pos.shape)}")
    else:
        node_pos = xp.empty(1, dtype=xp.int64)  # not read
    return (_c(backend, q, xp.float64), _c(backend, impure, xp.uint8), order, node_pos,
            has_order, has_pos)


def score_best_slots(
    backend: Backend,
    hist: Any,
    node_features: Any,
    n_outputs: int,
    min_samples_leaf: int,
    edges: EdgeTable,
    q: Any,
    impure: Any,
    order: Any,
    tie_rtol: float,
    tie_rounding: float,
    node_done: Any,
    *,
    random_split: bool = False,
    uniforms: Any = None,
    node_pos: Any = None,
    n_features: int = 0,
) -> Any:
    """The best slot of every node from its histograms: float64 (N, 4), one launch on
    CUDA (``tree_score_best_slot``).

    :func:`score_histograms` followed by :func:`best_slots` on its slots (their
    arguments, variance gain only), with ``node_done`` a uint32 array of at
    least N zeros that the CUDA kernel counts the nodes' scored slots in and
    leaves at zero (:func:`score_counters`).
    """
    xp = backend.xp
    n_nodes, k = (int(s) for s in hist.shape[:2])
    hist, node_features, uniforms = _score_inputs(
        backend, hist, node_features, n_outputs, random_split, uniforms, False, 1.0, 0.0)
    out = xp.empty((n_nodes, 4), dtype=xp.float64)
    if n_nodes == 0:
        return out
    if k == 0:
        raise ValueError(f"hist must have at least one slot per node, got shape {hist.shape}")
    if (node_done.dtype != xp.uint32 or node_done.ndim != 1 or int(node_done.shape[0]) < n_nodes
            or not node_done.flags.c_contiguous):
        raise ValueError(f"node_done must be contiguous uint32 of at least {n_nodes} entries, "
                         f"got {node_done.dtype} of shape {tuple(node_done.shape)}")
    q, impure, order, node_pos, has_order, has_pos = _best_slot_inputs(
        backend, n_nodes, k, q, impure, order, node_pos)
    backend.kernel("tree_score_best_slot")(
        hist, node_features, int(n_outputs), int(min_samples_leaf), int(bool(random_split)),
        uniforms, _typed_edges(backend, edges, random_split=bool(random_split)), 0, 1.0, 0.0,
        q, impure, order, node_pos, int(has_order), int(has_pos), int(n_features), float(tie_rtol), float(tie_rounding),
        node_done, *_slot_outputs(xp, n_nodes, k), out,
    )
    return out


def score_counters(backend: Backend, n_nodes: int, counters: Any = None) -> Any:
    """uint32 zeros for the ``node_done`` of :func:`score_best_slots` on ``n_nodes`` nodes:
    ``counters`` itself when it holds enough (the kernel leaves them at zero), else a new
    array of at least twice its size."""
    if counters is not None and int(counters.shape[0]) >= n_nodes:
        return counters
    size = max(int(n_nodes), 2 * (0 if counters is None else int(counters.shape[0])), 64)
    return backend.xp.zeros(size, dtype=backend.xp.uint32)


def segment_sums(backend: Backend, values: Any, bounds: Any) -> Any:
    """Ordered sum of every segment ``values[bounds[s]:bounds[s + 1]]``: float64 (S,)."""
    xp = backend.xp
    bounds = _c(backend, bounds, xp.int64)
    out = xp.empty(max(int(bounds.shape[0]) - 1, 0), dtype=xp.float64)
    if out.shape[0]:
        backend.kernel("tree_segment_sums")(_c(backend, values, xp.float64), bounds, out)
    return out


def segment_row_sums(backend: Backend, rows: Any, row_weights: Any, bounds: Any, Y: Any) -> Any:
    """Ordered weighted sums of rows of dense ``Y``, segment by segment: float64 (S, d),
    row s ``0.0 + row_weights[e] * Y[rows[e]] + ...`` over ``bounds[s] <= e < bounds[s + 1]``
    in increasing ``e`` (``tree_segment_row_sums``)."""
    xp = backend.xp
    if Y.ndim != 2:
        raise ValueError(f"Y must be 2-D, got shape {tuple(Y.shape)}")
    if Y.dtype not in (xp.float32, xp.float64):
        Y = Y.astype(xp.float64)
    Y = xp.ascontiguousarray(Y)
    bounds = _c(backend, bounds, xp.int64)
    rows = _c(backend, rows, xp.int64)
    row_weights = _c(backend, row_weights, xp.float64)
    if bounds.ndim != 1 or rows.shape != row_weights.shape or rows.ndim != 1:
        raise ValueError("bounds, rows and row_weights must be 1-D, rows and row_weights of "
                         f"the same length; got {tuple(bounds.shape)}, {tuple(rows.shape)} and "
                         f"{tuple(row_weights.shape)}")
    out = xp.empty((max(int(bounds.shape[0]) - 1, 0), int(Y.shape[1])), dtype=xp.float64)
    if out.size:
        backend.kernel("tree_segment_row_sums")(rows, row_weights, bounds, Y, out)
    return out
