// The choice of an evaluated node, shared by the growth kernels that write it into
// the node table. tree_keep_choice: the split is kept when its improvement, gain / scale with scale =
// n_scored * the tree's root weight (scikit-learn's normalisation of
// min_impurity_decrease, per output and over the root weight), is at least
// min_impurity_decrease, within a float64 epsilon; otherwise the node does not
// split: feature -1, bin 0, missing side 0, gain -inf.
#ifndef TREE_CHOICE_CUH
#define TREE_CHOICE_CUH

// The choice of the e-th evaluated node: the first n_small from tree_split_small's
// outputs (small_*), the others rows of ``large`` (feature, bin, missing_left, gain
// as float64, from tree_best_slot).
__device__ __forceinline__ void tree_evaluated_choice(
    long long e, long long n_small, const int* small_feature, const int* small_bin,
    const unsigned char* small_missing_left, const double* small_gain, const double* large,
    int* f, int* b, int* ml, double* gain)
{
    if (e < n_small) {
        *f = small_feature[e];
        *b = small_bin[e];
        *ml = small_missing_left[e];
        *gain = small_gain[e];
    } else {
        const double* row = large + 4 * (e - n_small);
        *f = (int)row[0];
        *b = (int)row[1];
        *ml = (int)row[2];
        *gain = row[3];
    }
}

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
