// The choice of an evaluated node, shared by the growth kernels that write it into
// the node table: the split is kept when its improvement, gain / scale with scale =
// n_scored * the tree's root weight (scikit-learn's normalisation of
// min_impurity_decrease, per output and over the root weight), is at least
// min_impurity_decrease, within a float64 epsilon; otherwise the node does not
// split: feature -1, bin 0, missing side 0, gain -inf.
#ifndef TREE_CHOICE_CUH
#define TREE_CHOICE_CUH

__device__ __forceinline__ void tree_keep_choice(int* f, int* b, int* ml, double* gain,
                                                 double scale, double min_impurity_decrease)
{
    if (*f >= 0 && !(*gain / scale + 2.220446049250313e-16 >= min_impurity_decrease)) *f = -1;
    if (*f < 0) {
        *f = -1;
        *b = 0;
        *ml = 0;
        *gain = __longlong_as_double((long long)0xFFF0000000000000ULL);
    }
}

#endif
