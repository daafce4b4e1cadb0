// Counter-based random numbers of the tree kernels, ported bit for bit from
// gpurpo/tree/_random.py: node seeds, the visiting order of features
// (feature_at) and the Extra-Trees uniforms (uniform_at).

#ifndef GPURPO_TREE_RANDOM_CUH
#define GPURPO_TREE_RANDOM_CUH

// feature_at of gpurpo/tree/_random.py: SMALL_P and N_ROUNDS
#define SPLIT_SMALL_P 32
#define SPLIT_N_ROUNDS 8

__device__ __forceinline__ unsigned long long split_hash64(unsigned long long x)
{
    unsigned long long z = x + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// child_seed of gpurpo/tree/_random.py: the seed of a node's left (side 0) or right child
__device__ __forceinline__ unsigned long long split_child_seed(unsigned long long seed, int side)
{
    return split_hash64(seed ^ (side == 0 ? 0x8CB92BA72F3D8DD7ULL : 0xE7037ED1A0B428DBULL));
}

// round_key of gpurpo/tree/_random.py
__device__ __forceinline__ unsigned long long split_round_key(unsigned long long seed, int r)
{
    return split_hash64(seed ^ (0xD6E8FEB86659FD93ULL * (unsigned long long)(r + 1)));
}

// feature_at for p > SPLIT_SMALL_P: the 8-round alternating Feistel network of
// _random.py on lo + hi = ceil(log2 p) bits, cycle walking into [0, p)
__device__ __forceinline__ int split_feature_at(const unsigned long long* keys, long long pos,
                                                int p, int lo, int hi)
{
    const unsigned long long low_mask = (1ULL << lo) - 1ULL;
    const unsigned long long high_mask = (1ULL << hi) - 1ULL;
    unsigned long long x = (unsigned long long)pos;
    for (;;) {
        unsigned long long high = x >> lo;
        unsigned long long low = x & low_mask;
        for (int r = 0; r < SPLIT_N_ROUNDS; r += 2) {
            high ^= split_hash64(keys[r] ^ low) & high_mask;
            low ^= split_hash64(keys[r + 1] ^ high) & low_mask;
        }
        x = (high << lo) | low;
        if (x < (unsigned long long)p) return (int)x;
    }
}

// feature_position of gpurpo/tree/_random.py (p > SPLIT_SMALL_P): the position at which
// the node visits feature f, the inverse network applied until the result is below p
__device__ __forceinline__ long long split_feature_position(const unsigned long long* keys,
                                                            int f, int p, int lo, int hi)
{
    const unsigned long long low_mask = (1ULL << lo) - 1ULL;
    const unsigned long long high_mask = (1ULL << hi) - 1ULL;
    unsigned long long x = (unsigned long long)f;
    for (;;) {
        unsigned long long high = x >> lo;
        unsigned long long low = x & low_mask;
        for (int r = SPLIT_N_ROUNDS - 2; r >= 0; r -= 2) {
            low ^= split_hash64(keys[r + 1] ^ high) & low_mask;
            high ^= split_hash64(keys[r] ^ low) & high_mask;
        }
        x = (high << lo) | low;
        if (x < (unsigned long long)p) return (long long)x;
    }
}

__device__ __forceinline__ double split_uniform_at(unsigned long long seed, long long pos)
{
    const unsigned long long h =
        split_hash64(split_hash64(seed ^ 0xA0761D6478BD642FULL) + (unsigned long long)pos);
    return (double)(h >> 11) * 0x1p-53;
}

__device__ __forceinline__ void split_feistel_params(int p, int* lo, int* hi)
{
    int bits = 2;
    while ((1LL << bits) < (long long)p) ++bits;
    *lo = bits / 2;
    *hi = bits - bits / 2;
}

#endif
