// Attention on tensor cores: FlashAttention-2's algorithm with mma.sync (m16n8k16, bfloat16 or
// float16 operands, float32 accumulators), for burnish.cuda.flash. Compiled by NVRTC with the
// constants defined before this text: T_BF16 (1: bfloat16, 0: float16), DK and DV (head dims,
// multiples of 16), WARPS (per block), BR (rows per block: WARPS * 16 query rows in flash_fwd
// and flash_dq, keys in flash_dkv), BC (keys per tile of flash_fwd and flash_dq), BQ (query
// rows per tile of flash_dkv), CAUSAL (0 or 1),
// MASK (1: a bool mask operand, true where a pair is forbidden), FILL (the score a forbidden
// pair takes), SCALE_LOG2 (the softmax scale times log2(e)), the kernel names FWD, DQ, DKV,
// and LAST_O, LAST_Q, LAST_K, LAST_V (1: that result laid out [b, seq, heads, dim]).
//
// Scores are kept in base 2 (times log2(e)); a forbidden pair scores FILL there, so its weight
// is exactly zero beside any allowed key, and a row with no key left weighs every key evenly,
// as the protocol's default does. Causal attention without a mask skips the key tiles after a
// block's last row (with a mask, a row may have no key left and must see them all).
//
// Tiles are double-buffered: cp.async copies the next tile into workgroup memory while the
// block computes on the current one.
//
// Each warp of a block owns 16 rows (queries, or keys in flash_dkv) and keeps their
// operand fragments and accumulators in registers. Fragment layouts are those of the PTX ISA
// for mma.m16n8k16 (g = lane / 4, t = lane % 4): A's registers hold rows g and g + 8, columns
// 2t, 2t + 1 and 2t + 8, 2t + 9; B's hold rows 2t, 2t + 1 and 2t + 8, 2t + 9 of column g; the
// accumulator holds rows g and g + 8, columns 2t and 2t + 1. An accumulator pair of n-tiles is
// thus an A fragment: the scores become the probabilities' operand without leaving registers.
// B fragments come from workgroup memory by ldmatrix (transposed where the product needs the
// tile's columns), so every tile is stored once, as it lies; rows are padded by 8 halves, so
// the eight rows of a matrix hit different banks.
//
// Parameters follow burnish.jit's convention: the buffers, then the info struct: [batch, heads,
// seq_q, seq_k, tiles, then per strided operand its offset and four strides (elements)].
// Strided operands have unit stride in the last dim and offsets and strides that are multiples
// of 8 (16-byte loads); outputs are contiguous [batch, heads, rows, dim].

typedef unsigned short half_t;
typedef unsigned int uint;
struct BurnishInfo { int v[128]; };

#define THREADS (WARPS * 32)
#define LN2 0.6931471805599453f
#define LOG2E 1.4426950408889634f
#define NEG_INF __int_as_float(0xff800000)
#define POS_INF __int_as_float(0x7f800000)

__device__ __forceinline__ uint pack2(float lo, float hi) {
    uint r;
#if T_BF16
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#else
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
#endif
    return r;
}

__device__ __forceinline__ float to_float(half_t x) {
#if T_BF16
    return __uint_as_float(((uint)x) << 16);
#else
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
    return f;
#endif
}

__device__ __forceinline__ void mma(float* c, const uint* a, uint b0, uint b1) {
#if T_BF16
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ uint ld32(const half_t* p) { return *(const uint*)p; }

__device__ __forceinline__ uint shared_address(const void* p) {
    uint a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// Four 8x8 matrices of workgroup memory: lanes 8m .. 8m + 7 name the rows of matrix m; each
// lane gets (row g, columns 2t, 2t + 1) of each, or with TRANS (rows 2t, 2t + 1, column g).
template <bool TRANS>
__device__ __forceinline__ void ldsm4(uint* r, const half_t* row) {
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(shared_address(row)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(shared_address(row)));
}

// Rows first .. first + ROWS of a strided operand (row stride `stride`, COLS halves each) into
// workgroup memory at row stride LD; zeros past `limit`.
template <int ROWS, int COLS, int LD>
__device__ __forceinline__ void load_rows(half_t* dst, const half_t* src, long long stride,
                                          int first, int limit) {
    constexpr int PER_ROW = COLS / 8;
    for (int c = threadIdx.x; c < ROWS * PER_ROW; c += THREADS) {
        int r = c / PER_ROW, d = (c % PER_ROW) * 8;
        uint4 value = make_uint4(0, 0, 0, 0);
        if (first + r < limit) value = *(const uint4*)(src + (first + r) * stride + d);
        *(uint4*)(dst + r * LD + d) = value;
    }
}

// load_rows by cp.async: the copies run while the block computes; `async_wait` then a barrier
// before the rows are read. Rows past `limit` are zeroed by plain stores.
template <int ROWS, int COLS, int LD>
__device__ __forceinline__ void load_rows_async(half_t* dst, const half_t* src, long long stride,
                                                int first, int limit) {
    constexpr int PER_ROW = COLS / 8;
    for (int c = threadIdx.x; c < ROWS * PER_ROW; c += THREADS) {
        int r = c / PER_ROW, d = (c % PER_ROW) * 8;
        half_t* to = dst + r * LD + d;
        if (first + r < limit)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                         :: "r"(shared_address(to)), "l"(src + (first + r) * stride + d));
        else
            *(uint4*)to = make_uint4(0, 0, 0, 0);
    }
}

__device__ __forceinline__ void async_commit() { asm volatile("cp.async.commit_group;"); }

// Waits for this thread's copies but the latest group (the next tile's, in flight).
__device__ __forceinline__ void async_wait_all_but_one() {
    asm volatile("cp.async.wait_group 1;" ::: "memory");
}

// A fragments (16 rows from `row`, all K columns) from workgroup memory at row stride LD.
template <int K, int LD>
__device__ __forceinline__ void load_a(uint (*a)[4], const half_t* src, int row, int t) {
#pragma unroll
    for (int kc = 0; kc < K / 16; kc++) {
        const half_t* p = src + row * LD + kc * 16 + 2 * t;
        a[kc][0] = ld32(p);
        a[kc][1] = ld32(p + 8 * LD);
        a[kc][2] = ld32(p + 8);
        a[kc][3] = ld32(p + 8 * LD + 8);
    }
}

// acc[N / 8][4] += A (16 x K, fragments a) @ b^T, `b` being N rows of K (row stride LD): the
// B fragments of two n-tiles come from one ldmatrix.
template <int K, int N, int LD>
__device__ __forceinline__ void mma_bt(float (*acc)[4], uint (*a)[4], const half_t* b,
                                       int lane) {
    // lane 8m + j names row j + 8 (m / 2) of the n-tile pair, columns 8 (m % 2) on
    const half_t* rows = b + ((lane & 7) + ((lane >> 4) << 3)) * LD + ((lane >> 3) & 1) * 8;
#pragma unroll
    for (int kc = 0; kc < K / 16; kc++) {
#pragma unroll
        for (int nt = 0; nt < N / 8; nt += 2) {
            uint f[4];
            ldsm4<false>(f, rows + nt * 8 * LD + kc * 16);
            mma(acc[nt], a[kc], f[0], f[1]);
            mma(acc[nt + 1], a[kc], f[2], f[3]);
        }
    }
}

// acc[N / 8][4] += P (16 x K, accumulators p[K / 8][4] as the A operand) @ b, `b` being K rows
// of N (row stride LD), read transposed by ldmatrix.
template <int K, int N, int LD>
__device__ __forceinline__ void mma_pt(float (*acc)[4], float (*p)[4], const half_t* b,
                                       int lane) {
    // lane 8m + j names row j + 8 (m % 2) of the k-chunk, columns 8 (m / 2) on
    const half_t* rows = b + ((lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8;
#pragma unroll
    for (int j = 0; j < K / 16; j++) {
        uint a[4] = {pack2(p[2 * j][0], p[2 * j][1]), pack2(p[2 * j][2], p[2 * j][3]),
                     pack2(p[2 * j + 1][0], p[2 * j + 1][1]),
                     pack2(p[2 * j + 1][2], p[2 * j + 1][3])};
#pragma unroll
        for (int nt = 0; nt < N / 8; nt += 2) {
            uint f[4];
            ldsm4<true>(f, rows + j * 16 * LD + nt * 8);
            mma(acc[nt], a, f[0], f[1]);
            mma(acc[nt + 1], a, f[2], f[3]);
        }
    }
}

// Stores rows `row` and `row + 8` of accumulators acc[N / 8][4] (times f0, f1) into `dst`
// (contiguous rows of N), those below `limit`.
template <int N>
__device__ __forceinline__ void store_rows(half_t* dst, float (*acc)[4], int row, int limit,
                                           float f0, float f1, int t, long long stride) {
#pragma unroll
    for (int nt = 0; nt < N / 8; nt++) {
        int col = nt * 8 + 2 * t;
        if (row < limit)
            *(uint*)(dst + (long long)row * stride + col) =
                pack2(acc[nt][0] * f0, acc[nt][1] * f0);
        if (row + 8 < limit)
            *(uint*)(dst + (long long)(row + 8) * stride + col) =
                pack2(acc[nt][2] * f1, acc[nt][3] * f1);
    }
}

// Where a result's rows of (b, h) start, and their stride: [b, heads, seq, N] in order, or,
// `last`, laid out as [b, seq, heads, N] (the heads of a [b, seq, heads * N] projection, so
// that going back to it needs no copy).
__device__ __forceinline__ long long result_base(int b, int h, int heads, int seq, int n,
                                                 int last) {
    return last ? ((long long)b * seq * heads + h) * n : ((long long)b * heads + h) * seq * n;
}

__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffff, x, 1);
    return x + __shfl_xor_sync(0xffffffff, x, 2);
}

// The (batch, head) pair and tile of this block, or false past the grid's end. `last_first`:
// tiles in reverse order, so that the longest blocks (the last query rows under a causal
// mask) start first and the short ones fill in after them.
__device__ __forceinline__ bool locate(const int* info, int* b, int* h, int* tile,
                                       bool last_first) {
    int group = blockIdx.x + blockIdx.y * gridDim.x;
    int pair = group / info[4];
    if (pair >= info[0] * info[1]) return false;
    *tile = last_first ? info[4] - 1 - group % info[4] : group % info[4];
    *b = pair / info[1];
    *h = pair % info[1];
    return true;
}

// The start of operand `i` (0-based, after the five size words) for (b, h), and its row stride.
__device__ __forceinline__ long long base(const int* info, int i, int b, int h) {
    const int* o = info + 5 + 5 * i;
    return (long long)o[0] + (long long)b * o[1] + (long long)h * o[2];
}
__device__ __forceinline__ long long row_stride(const int* info, int i) {
    return info[5 + 5 * i + 3];
}

// Whether the mask (operand `i`) forbids (row, col): both in range.
__device__ __forceinline__ bool masked(const unsigned char* mask, const int* info, int i,
                                       long long at, int row, int col) {
#if MASK
    const int* o = info + 5 + 5 * i;
    return mask[at + (long long)row * o[3] + (long long)col * o[4]] != 0;
#else
    return false;
#endif
}

#if MASK
#define MASK_PARAM const unsigned char* __restrict__ mask,
#define NO_MASK
#else
#define MASK_PARAM
#define NO_MASK const unsigned char* mask = nullptr;
#endif
#define SKIP (CAUSAL && !MASK)

#define LDK (DK + 8)
// Two stages of key and value tiles (flash_fwd, flash_dq) or query and gradient tiles
// (flash_dkv): the next one is copied in while the block computes on the current one.
#define STAGE_KV (BC * (DK + 8) + BC * (DV + 8))
#define STAGE_QG (BQ * (DK + 8) + BQ * (DV + 8))
#define LDV (DV + 8)
#define DMAX (DK > DV ? DK : DV)

// out [b, h, seq_q, DV] and lse [b, h, seq_q] (natural log) of q, k, v (operands 0, 1, 2).
extern "C" __global__ void __launch_bounds__(THREADS) FWD(
        half_t* __restrict__ out, float* __restrict__ lse, const half_t* __restrict__ q,
        const half_t* __restrict__ k, const half_t* __restrict__ v, MASK_PARAM
        const BurnishInfo info_args) {
    const int* info = info_args.v;
    NO_MASK
    int b, h, tile;
    if (!locate(info, &b, &h, &tile, SKIP)) return;
    const int sq = info[2], sk = info[3];
    // the query rows first, then two stages of keys [BC][LDK] and values [BC][LDV]
    __shared__ __align__(16) half_t smem[(BR * (DMAX + 8) > 2 * STAGE_KV)
                                         ? BR * (DMAX + 8) : 2 * STAGE_KV];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int q0 = tile * BR, r = warp * 16 + g;
    const int row0 = q0 + r, row1 = row0 + 8;

    uint qa[DK / 16][4];
    load_rows<BR, DK, LDK>(smem, q + base(info, 0, b, h), row_stride(info, 0), q0, sq);
    __syncthreads();
    load_a<DK, LDK>(qa, smem, r, t);
    __syncthreads();

    float o[DV / 8][4];
#pragma unroll
    for (int i = 0; i < DV / 8; i++) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
    float m0 = NEG_INF, m1 = NEG_INF, l0 = 0.f, l1 = 0.f;
    const half_t* kp = k + base(info, 1, b, h);
    const half_t* vp = v + base(info, 2, b, h);
    const long long mp = MASK ? base(info, 3, b, h) : 0;
    const int end = SKIP ? min(sk, q0 + BR) : sk;
    auto fetch = [&](int k0, int stage) {
        half_t* to = smem + stage * STAGE_KV;
        load_rows_async<BC, DK, LDK>(to, kp, row_stride(info, 1), k0, sk);
        load_rows_async<BC, DV, LDV>(to + BC * LDK, vp, row_stride(info, 2), k0, sk);
    };
    fetch(0, 0);
    async_commit();
    for (int k0 = 0, stage = 0; k0 < end; k0 += BC, stage ^= 1) {
        if (k0 + BC < end) fetch(k0 + BC, stage ^ 1);
        async_commit();
        async_wait_all_but_one();
        __syncthreads();
        const half_t* sk_ = smem + stage * STAGE_KV;  // keys [BC][LDK]
        const half_t* sv = sk_ + BC * LDK;            // values [BC][LDV]
        float s[BC / 8][4];
#pragma unroll
        for (int i = 0; i < BC / 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
        mma_bt<DK, BC, LDK>(s, qa, sk_, lane);
        float x0 = NEG_INF, x1 = NEG_INF;
#pragma unroll
        for (int nt = 0; nt < BC / 8; nt++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int col = k0 + nt * 8 + 2 * t + e;
                float a = s[nt][e] * SCALE_LOG2, c = s[nt][2 + e] * SCALE_LOG2;
                if ((CAUSAL && col > row0) || (row0 < sq && col < sk && masked(mask, info, 3, mp, row0, col)))
                    a = FILL;
                if ((CAUSAL && col > row1) || (row1 < sq && col < sk && masked(mask, info, 3, mp, row1, col)))
                    c = FILL;
                if (col >= sk) a = c = NEG_INF;
                s[nt][e] = a;
                s[nt][2 + e] = c;
                x0 = fmaxf(x0, a);
                x1 = fmaxf(x1, c);
            }
        }
        x0 = fmaxf(m0, quad_max(x0));
        x1 = fmaxf(m1, quad_max(x1));
        // A row with no key yet keeps an empty sum (its maximum stays -inf).
        float base0 = x0 == NEG_INF ? 0.f : x0, base1 = x1 == NEG_INF ? 0.f : x1;
        float alpha0 = exp2f(m0 - base0), alpha1 = exp2f(m1 - base1);
        m0 = x0;
        m1 = x1;
        l0 *= alpha0;
        l1 *= alpha1;
#pragma unroll
        for (int nt = 0; nt < DV / 8; nt++) {
            o[nt][0] *= alpha0; o[nt][1] *= alpha0;
            o[nt][2] *= alpha1; o[nt][3] *= alpha1;
        }
#pragma unroll
        for (int nt = 0; nt < BC / 8; nt++) {
            s[nt][0] = exp2f(s[nt][0] - base0); s[nt][1] = exp2f(s[nt][1] - base0);
            s[nt][2] = exp2f(s[nt][2] - base1); s[nt][3] = exp2f(s[nt][3] - base1);
            l0 += s[nt][0] + s[nt][1];
            l1 += s[nt][2] + s[nt][3];
        }
        mma_pt<BC, DV, LDV>(o, s, sv, lane);
        __syncthreads();
    }
    l0 = quad_sum(l0);
    l1 = quad_sum(l1);
    const long long pair = ((long long)b * info[1] + h) * sq;
    store_rows<DV>(out + result_base(b, h, info[1], sq, DV, LAST_O), o, row0, sq, 1.f / l0,
                   1.f / l1, t, LAST_O ? (long long)info[1] * DV : DV);
    if (t == 0) {
        if (row0 < sq) lse[pair + row0] = (m0 + log2f(l0)) * LN2;
        if (row1 < sq) lse[pair + row1] = (m1 + log2f(l1)) * LN2;
    }
}

// dq [b, h, seq_q, DK] and delta [b, h, seq_q] (each row's sum of grad * out) from q, k, v,
// grad, out (operands 0-4) and lse (operand 5).
extern "C" __global__ void __launch_bounds__(THREADS) DQ(
        half_t* __restrict__ dq, float* __restrict__ delta, const half_t* __restrict__ q,
        const half_t* __restrict__ k, const half_t* __restrict__ v,
        const half_t* __restrict__ grad, const half_t* __restrict__ out,
        const float* __restrict__ lse, MASK_PARAM const BurnishInfo info_args) {
    const int* info = info_args.v;
    NO_MASK
    int b, h, tile;
    if (!locate(info, &b, &h, &tile, CAUSAL)) return;
    const int sq = info[2], sk = info[3];
    // the query rows and their gradients first, then two stages of keys and values
    __shared__ __align__(16) half_t smem[(BR * (DMAX + 8) > 2 * STAGE_KV)
                                         ? BR * (DMAX + 8) : 2 * STAGE_KV];
    __shared__ float sdelta[BR];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int q0 = tile * BR, r = warp * 16 + g;
    const int row0 = q0 + r, row1 = row0 + 8;
    const long long pair = ((long long)b * info[1] + h) * sq;

    // delta: two lanes a row, each over half of it.
    {
        int row = q0 + warp * 16 + lane / 2;
        float sum = 0.f;
        if (row < sq) {
            const half_t* gp = grad + base(info, 3, b, h) + row * row_stride(info, 3);
            const half_t* op = out + base(info, 4, b, h) + row * row_stride(info, 4);
            for (int d = (lane % 2) * (DV / 2); d < (lane % 2 + 1) * (DV / 2); d++)
                sum += to_float(gp[d]) * to_float(op[d]);
        }
        sum += __shfl_xor_sync(0xffffffff, sum, 1);
        if (lane % 2 == 0) {
            sdelta[warp * 16 + lane / 2] = sum;
            if (row < sq) delta[pair + row] = sum;
        }
    }
    uint qa[DK / 16][4], ga[DV / 16][4];
    load_rows<BR, DK, LDK>(smem, q + base(info, 0, b, h), row_stride(info, 0), q0, sq);
    __syncthreads();
    load_a<DK, LDK>(qa, smem, r, t);
    __syncthreads();
    load_rows<BR, DV, LDV>(smem, grad + base(info, 3, b, h), row_stride(info, 3), q0, sq);
    __syncthreads();
    load_a<DV, LDV>(ga, smem, r, t);
    const float d0 = sdelta[r], d1 = sdelta[r + 8];
    const float lse0 = row0 < sq ? lse[pair + row0] * LOG2E : 0.f;
    const float lse1 = row1 < sq ? lse[pair + row1] * LOG2E : 0.f;
    __syncthreads();

    float acc[DK / 8][4];
#pragma unroll
    for (int i = 0; i < DK / 8; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
    const half_t* kp = k + base(info, 1, b, h);
    const half_t* vp = v + base(info, 2, b, h);
    const long long mp = MASK ? base(info, 5, b, h) : 0;
    // Forbidden pairs pass no gradient to q: the keys after a block's rows are skipped.
    const int end = CAUSAL ? min(sk, q0 + BR) : sk;
    auto fetch = [&](int k0, int stage) {
        half_t* to = smem + stage * STAGE_KV;
        load_rows_async<BC, DK, LDK>(to, kp, row_stride(info, 1), k0, sk);
        load_rows_async<BC, DV, LDV>(to + BC * LDK, vp, row_stride(info, 2), k0, sk);
    };
    fetch(0, 0);
    async_commit();
    for (int k0 = 0, stage = 0; k0 < end; k0 += BC, stage ^= 1) {
        if (k0 + BC < end) fetch(k0 + BC, stage ^ 1);
        async_commit();
        async_wait_all_but_one();
        __syncthreads();
        const half_t* sk_ = smem + stage * STAGE_KV;  // keys [BC][LDK]
        const half_t* sv = sk_ + BC * LDK;            // values [BC][LDV]
        float s[BC / 8][4], dp[BC / 8][4];
#pragma unroll
        for (int i = 0; i < BC / 8; i++) {
            s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
            dp[i][0] = dp[i][1] = dp[i][2] = dp[i][3] = 0.f;
        }
        mma_bt<DK, BC, LDK>(s, qa, sk_, lane);
        mma_bt<DV, BC, LDV>(dp, ga, sv, lane);
#pragma unroll
        for (int nt = 0; nt < BC / 8; nt++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int col = k0 + nt * 8 + 2 * t + e;
                float p0 = exp2f(s[nt][e] * SCALE_LOG2 - lse0);
                float p1 = exp2f(s[nt][2 + e] * SCALE_LOG2 - lse1);
                if (col >= sk || (CAUSAL && col > row0) ||
                    (row0 < sq && masked(mask, info, 5, mp, row0, col)))
                    p0 = 0.f;
                if (col >= sk || (CAUSAL && col > row1) ||
                    (row1 < sq && masked(mask, info, 5, mp, row1, col)))
                    p1 = 0.f;
                s[nt][e] = p0 * (dp[nt][e] - d0);
                s[nt][2 + e] = p1 * (dp[nt][2 + e] - d1);
            }
        }
        mma_pt<BC, DK, LDK>(acc, s, sk_, lane);
        __syncthreads();
    }
    const float scale = SCALE_LOG2 * LN2;
    store_rows<DK>(dq + result_base(b, h, info[1], sq, DK, LAST_Q), acc, row0, sq, scale,
                   scale, t, LAST_Q ? (long long)info[1] * DK : DK);
}

// dk [b, h, seq_k, DK] and dv [b, h, seq_k, DV] from q, k, v, grad (operands 0-3), delta and
// lse (contiguous [b, h, seq_q] float32). A block takes BR keys; query rows go through
// workgroup memory BQ at a time.
extern "C" __global__ void __launch_bounds__(THREADS) DKV(
        half_t* __restrict__ dk, half_t* __restrict__ dv, const half_t* __restrict__ q,
        const half_t* __restrict__ k, const half_t* __restrict__ v,
        const half_t* __restrict__ grad, const float* __restrict__ delta,
        const float* __restrict__ lse, MASK_PARAM const BurnishInfo info_args) {
    const int* info = info_args.v;
    NO_MASK
    int b, h, tile;
    if (!locate(info, &b, &h, &tile, false)) return;
    const int sq = info[2], sk = info[3];
    // the block's keys and values first, then two stages of query rows and their gradients
    __shared__ __align__(16) half_t smem[(BR * (DMAX + 8) > 2 * STAGE_QG)
                                         ? BR * (DMAX + 8) : 2 * STAGE_QG];
    __shared__ float stats[2][2][BQ];  // per stage: each row's lse (base 2) and delta
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
    const int c0 = tile * BR, r = warp * 16 + g;
    const int key0 = c0 + r, key1 = key0 + 8;
    const long long pair = ((long long)b * info[1] + h);

    uint ka[DK / 16][4], va[DV / 16][4];
    load_rows<BR, DK, LDK>(smem, k + base(info, 1, b, h), row_stride(info, 1), c0, sk);
    __syncthreads();
    load_a<DK, LDK>(ka, smem, r, t);
    __syncthreads();
    load_rows<BR, DV, LDV>(smem, v + base(info, 2, b, h), row_stride(info, 2), c0, sk);
    __syncthreads();
    load_a<DV, LDV>(va, smem, r, t);
    __syncthreads();

    float dka[DK / 8][4], dva[DV / 8][4];
#pragma unroll
    for (int i = 0; i < DK / 8; i++) dka[i][0] = dka[i][1] = dka[i][2] = dka[i][3] = 0.f;
#pragma unroll
    for (int i = 0; i < DV / 8; i++) dva[i][0] = dva[i][1] = dva[i][2] = dva[i][3] = 0.f;
    const half_t* qp = q + base(info, 0, b, h);
    const half_t* gp = grad + base(info, 3, b, h);
    const float* lp = lse + pair * sq;
    const float* dp_ = delta + pair * sq;
    const long long mp = MASK ? base(info, 4, b, h) : 0;
    const float uniform = 1.f / sk;
    // Causal without a mask: the queries before this block's first key attend to none of its
    // keys (with a mask, a query with no key left weighs them all).
    const int start = SKIP ? c0 / BQ * BQ : 0;
    auto fetch = [&](int q0, int stage) {
        half_t* to = smem + stage * STAGE_QG;
        load_rows_async<BQ, DK, LDK>(to, qp, row_stride(info, 0), q0, sq);
        load_rows_async<BQ, DV, LDV>(to + BQ * LDK, gp, row_stride(info, 3), q0, sq);
        for (int i = threadIdx.x; i < BQ; i += THREADS) {
            bool inside = q0 + i < sq;
            // A row past the end weighs nothing: exp2(score - inf) = 0.
            stats[stage][0][i] = inside ? lp[q0 + i] * LOG2E : POS_INF;
            stats[stage][1][i] = inside ? dp_[q0 + i] : 0.f;
        }
    };
    fetch(start, 0);
    async_commit();
    for (int q0 = start, stage = 0; q0 < sq; q0 += BQ, stage ^= 1) {
        if (q0 + BQ < sq) fetch(q0 + BQ, stage ^ 1);
        async_commit();
        async_wait_all_but_one();
        __syncthreads();
        const half_t* sq_ = smem + stage * STAGE_QG;  // queries [BQ][LDK]
        const half_t* sg = sq_ + BQ * LDK;            // output gradients [BQ][LDV]
        const float* slse = stats[stage][0];
        const float* sdelta = stats[stage][1];
        float s[BQ / 8][4], dpt[BQ / 8][4];
#pragma unroll
        for (int i = 0; i < BQ / 8; i++) {
            s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
            dpt[i][0] = dpt[i][1] = dpt[i][2] = dpt[i][3] = 0.f;
        }
        unsigned long long forbid = 0;  // bit 4 * nt + j: pair (nt, j) is forbidden
        mma_bt<DK, BQ, LDK>(s, ka, sq_, lane);       // scores transposed: keys x queries
#pragma unroll
        for (int nt = 0; nt < BQ / 8; nt++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int i = nt * 8 + 2 * t + e, row = q0 + i;
                // A forbidden pair passes its weight to v (zero, or 1 / seq_k for a row with
                // no key left, whose lse is about FILL: FILL + log2(seq_k) may round to FILL)
                // and nothing to k: its bit is kept in `forbid`.
                bool f0 = (CAUSAL && key0 > row) ||
                          (row < sq && key0 < sk && masked(mask, info, 4, mp, row, key0));
                bool f1 = (CAUSAL && key1 > row) ||
                          (row < sq && key1 < sk && masked(mask, info, 4, mp, row, key1));
                float none = slse[i] < FILL * 0.5f ? uniform : 0.f;
                s[nt][e] = f0 ? none : exp2f(s[nt][e] * SCALE_LOG2 - slse[i]);
                s[nt][2 + e] = f1 ? none : exp2f(s[nt][2 + e] * SCALE_LOG2 - slse[i]);
                forbid |= (f0 ? 1u : 0u) << (4 * nt + e);
                forbid |= (f1 ? 1u : 0u) << (4 * nt + 2 + e);
            }
        }
        mma_pt<BQ, DV, LDV>(dva, s, sg, lane);      // dv += p^T grad
        mma_bt<DV, BQ, LDV>(dpt, va, sg, lane);       // (grad v^T)^T
#pragma unroll
        for (int nt = 0; nt < BQ / 8; nt++) {
#pragma unroll
            for (int e = 0; e < 2; e++) {
                float d = sdelta[nt * 8 + 2 * t + e];
                s[nt][e] = (forbid >> (4 * nt + e)) & 1 ? 0.f : s[nt][e] * (dpt[nt][e] - d);
                s[nt][2 + e] = (forbid >> (4 * nt + 2 + e)) & 1
                               ? 0.f : s[nt][2 + e] * (dpt[nt][2 + e] - d);
            }
        }
        mma_pt<BQ, DK, LDK>(dka, s, sq_, lane);      // dk += ds^T q
        __syncthreads();
    }
    const float scale = SCALE_LOG2 * LN2;
    store_rows<DK>(dk + result_base(b, h, info[1], sk, DK, LAST_K), dka, key0, sk, scale,
                   scale, t, LAST_K ? (long long)info[1] * DK : DK);
    store_rows<DV>(dv + result_base(b, h, info[1], sk, DV, LAST_V), dva, key0, sk, 1.f, 1.f,
                   t, LAST_V ? (long long)info[1] * DV : DV);
}
