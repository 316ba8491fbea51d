// 8-bit quantization kernels for burnish.cuda.quant_ops, compiled by NVRTC with the constants
// defined before this text (quant_ops._source):
//   SRC (storage type of a packed operand), SHIFT (128 for uint8: values become int8 by
//   q - 128, else 0), ROW_SUMS (1: pack also writes each row's sum of the shifted values);
//   X_T, SCALE_T, POINT_T, OUT_T (storage types of quantize's input and outputs), POINTS (1: a
//   zero point operand);
//   SA_T, SB_T (scale types), ZA_T, ZB_T (zero point types), A_POINTS, B_POINTS, OUT_T
//   (epilogue's output type);
//   and the kernel names PACK, QUANTIZE, EPILOGUE, AMAX.
// Parameters follow burnish.jit's convention: the buffers, then the info struct by value. Floats
// travel in info as their bits. Every kernel numbers its blocks x + y * gridDim.x (burnish.jit's
// grid splits large launches over y).

#include <cuda_fp16.h>
struct BurnishInfo { int v[128]; };

#define THREADS 256

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ void store(float* out, long long i, float v) { out[i] = v; }
__device__ __forceinline__ void store(__half* out, long long i, float v) {
    out[i] = __float2half_rn(v);
}

__device__ __forceinline__ long long block_index() {
    return (long long)blockIdx.x + (long long)blockIdx.y * gridDim.x;
}

__device__ int block_sum(int value) {
    __shared__ int partial[THREADS / 32];
    for (int offset = 16; offset > 0; offset >>= 1)
        value += __shfl_down_sync(0xffffffffu, value, offset);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = value;
    __syncthreads();
    int total = 0;
    if (threadIdx.x == 0)
        for (int w = 0; w < THREADS / 32; ++w) total += partial[w];
    return total;  // in thread 0
}

#ifdef PACK
// out [rows_padded, cols_padded] int8, row-major: element (r, c) of the strided source, shifted
// to int8, zeros past rows x cols (padding cuBLAS's int8 product adds nothing from). One block a
// row. info: rows, rows_padded, cols, cols_padded, offset, row stride, col stride.
extern "C" __global__ void __launch_bounds__(THREADS) PACK(
        signed char* __restrict__ out, int* __restrict__ sums, const SRC* __restrict__ src,
        const BurnishInfo info_args) {
    const int* info = info_args.v;
    long long row = block_index();
    int rows = info[0], rows_padded = info[1], cols = info[2], cols_padded = info[3];
    long long offset = info[4], row_stride = info[5], col_stride = info[6];
    if (row >= rows_padded) return;
    int sum = 0;
    for (int c = threadIdx.x; c < cols_padded; c += THREADS) {
        int value = 0;
        if (row < rows && c < cols)
            value = (int)src[offset + row * row_stride + c * col_stride] - SHIFT;
        out[row * cols_padded + c] = (signed char)value;
        sum += value;
    }
#if ROW_SUMS
    sum = block_sum(sum);
    if (threadIdx.x == 0) sums[row] = sum;
#endif
}
#endif

#ifdef QUANTIZE
// out[i] = clamp(rint(x[i] / scale) + zero point, low, high), as the protocol's default does it
// in float32 (IEEE division: NVRTC compiles without fast math). info: count, inner (elements
// after the channel axis), channels (1 per tensor), scale offset, point offset, then the bits of
// the symmetric zero point, low and high, and x's offset.
extern "C" __global__ void __launch_bounds__(THREADS) QUANTIZE(
        OUT_T* __restrict__ out, const X_T* __restrict__ x, const SCALE_T* __restrict__ scales,
        const POINT_T* __restrict__ points, const BurnishInfo info_args) {
    const int* info = info_args.v;
    long long count = (unsigned int)info[0];
    long long inner = info[1];
    int channels = info[2];
    const SCALE_T* scale = scales + info[3];
    const POINT_T* point = points + info[4];
    float symmetric_zero = __int_as_float(info[5]);
    float low = __int_as_float(info[6]), high = __int_as_float(info[7]);
    x += info[8];
    long long step = (long long)gridDim.x * gridDim.y * THREADS;
    for (long long i = block_index() * THREADS + threadIdx.x; i < count; i += step) {
        int channel = channels == 1 ? 0 : (int)((i / inner) % channels);
        float q = rintf(to_f32(x[i]) / to_f32(scale[channel]));
#if POINTS
        q += (float)point[channel];
#else
        q += symmetric_zero;
#endif
        q = fminf(fmaxf(q, low), high);
        out[i] = (OUT_T)(int)q;
    }
}
#endif

#ifdef AMAX
// The per-tensor symmetric scale of x: max|x| / 127 as the scale type, 1 where that is zero,
// in one launch: each block folds its maximum into work[0] (non-negative floats order as their
// bits), and the last block to finish writes the scale. work: two words, zeroed before.
// info: count, x's offset.
extern "C" __global__ void __launch_bounds__(THREADS) AMAX(
        SCALE_T* __restrict__ scale, int* __restrict__ work, const X_T* __restrict__ x,
        const BurnishInfo info_args) {
    const int* info = info_args.v;
    long long count = (unsigned int)info[0];
    long long blocks = (long long)gridDim.x * gridDim.y;
    x += info[1];
    float largest = 0.0f;
    for (long long i = block_index() * THREADS + threadIdx.x; i < count;
         i += blocks * THREADS)
        largest = fmaxf(largest, fabsf(to_f32(x[i])));
    __shared__ float partial[THREADS / 32];
    for (int offset = 16; offset > 0; offset >>= 1)
        largest = fmaxf(largest, __shfl_down_sync(0xffffffffu, largest, offset));
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = largest;
    __syncthreads();
    if (threadIdx.x != 0) return;
    for (int w = 1; w < THREADS / 32; ++w) largest = fmaxf(largest, partial[w]);
    atomicMax(work, __float_as_int(largest));
    __threadfence();
    if (atomicAdd(work + 1, 1) != blocks - 1) return;
    float found = __int_as_float(atomicAdd(work, 0));
    float value = to_f32((SCALE_T)(found / 127.0f));
    if (value == 0.0f) value = 1.0f;
    scale[0] = (SCALE_T)value;
}
#endif

#ifdef EPILOGUE
// out[r, n] = sa * sb * (c[r, n] - zb * row_sum[r] - za * col_sum[n] + K * za * zb): the
// product of the shifted integers c (int32 [rows, ldc]) turned into the product of the
// dequantized values. Zero points za, zb are the stored ones minus the shifts (a symmetric
// scheme's are zero after the shift). Per-row parameters of lhs repeat every `inner_rows` rows
// (a batched lhs), per tensor ones have stride 0. info: rows, n, ldc, inner_rows, a per channel,
// b per channel, sa offset, sb offset, za offset, zb offset, K, a shift, b shift.
extern "C" __global__ void __launch_bounds__(THREADS) EPILOGUE(
        OUT_T* __restrict__ out, const int* __restrict__ c, const SA_T* __restrict__ sa,
        const SB_T* __restrict__ sb, const ZA_T* __restrict__ za, const ZB_T* __restrict__ zb,
        const int* __restrict__ row_sums, const int* __restrict__ col_sums,
        const BurnishInfo info_args) {
    const int* info = info_args.v;
    // rows * ldc < 2^31 (quant_ops.takes): 32-bit index arithmetic, several times cheaper on
    // the GPU than 64-bit division.
    int n = info[1], ldc = info[2], inner_rows = info[3];
    int total = info[0] * n;
    int step = gridDim.x * gridDim.y * THREADS;
    for (int i = (int)block_index() * THREADS + threadIdx.x; i < total; i += step) {
        int r = i / n;
        int col = i - r * n;
        int a = info[4] ? (int)(r % inner_rows) : 0;
        int b = info[5] ? col : 0;
        long long value = c[r * ldc + col];
#if A_POINTS || B_POINTS
        long long k = info[10];
#endif
#if A_POINTS
        long long a_point = (long long)za[info[8] + a] - info[11];
        value -= a_point * col_sums[col];
#endif
#if B_POINTS
        long long b_point = (long long)zb[info[9] + b] - info[12];
        value -= b_point * row_sums[r];
#endif
#if A_POINTS && B_POINTS
        value += k * a_point * b_point;
#endif
        store(out, i, to_f32(sa[info[6] + a]) * to_f32(sb[info[7] + b]) * (float)value);
    }
}
#endif
