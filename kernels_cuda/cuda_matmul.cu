/*
 * cuda_matmul.cu - weight x activation products and embedding lookups on
 * the GPU (cuda_ops.h): y[b][r] = W[r] . x[b] with W in any file type.
 *
 * Up to KR_CUDA_GEMV_MAX entries: a dequantising GEMV reads the weights
 * once. A block of GEMV_WARPS warps owns GEMV_WARPS * GEMV_ROWS_PER_WARP
 * rows; activations pass through shared memory 1024 columns at a time; lane
 * k of a warp dequantises 32-value block k of the chunk (kr_cu_dequant32,
 * the values the CPU's kr_dequantize_row gives) and dots it against every
 * entry; a warp-shuffle sum ends each row. Accumulation is fp32.
 *
 * More entries: the weights are dequantised to f16 one tile of
 * KR_CUDA_TILE_ROWS rows at a time into scratch and multiplied by
 * cublasGemmEx (f16 inputs, fp32 accumulate and output) against the
 * activations converted to f16 once; F32 weights go straight to
 * cublasSgemm without scratch.
 *
 * Rows of F32 / F16 / BF16 weights may have any width: the last 32-value
 * stretch is then partial (kr_cu_dequant_part gives 0 past the row's end,
 * and the staged activations are 0 there too). Quantised rows are whole
 * blocks (kr_cu_cols_ok; attach refuses other shapes).
 *
 * Scratch layout (base rounded up to 256 bytes):
 *   [x16: n * n_cols f16, padded to a multiple of 256 bytes]
 *   [w16: tile rows of ld16 = n_cols rounded up to 32 f16, tile <=
 *    KR_CUDA_TILE_ROWS, row-major, zero past n_cols]
 * A smaller scratch than kr_cuda_matmul_scratch_bytes gives smaller tiles,
 * as long as one row fits.
 */
#include "cuda_dequant.h"
#include "cuda_ops.h"

#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>

namespace {

constexpr int GEMV_WARPS = 8;
constexpr int GEMV_ROWS_PER_WARP = 4;
constexpr int GEMV_ROWS_PER_BLOCK = GEMV_WARPS * GEMV_ROWS_PER_WARP;
constexpr int CHUNK_BLOCKS = 32; /* 32-value blocks of x per shared-memory pass: one per lane */
constexpr int XS_STRIDE = 33;    /* floats per staged block: the pad puts lane k's block on bank k + j */
constexpr size_t SCRATCH_ALIGN = 256;

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

/* One 32-value block of a row. F32 / F16 rows on 16-byte boundaries use
 * vector loads (the values are those of kr_cu_dequant32: f32 bits copied,
 * f16 converted exactly); everything else reads bytes. */
template <int T> __device__ __forceinline__ void dequant_block(const uint8_t *row, int64_t b, float v[32]) {
    if constexpr (T == KR_CU_TYPE_F32) {
        const uint8_t *p = row + b * 128;
        if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) {
            const float4 *q = reinterpret_cast<const float4 *>(p);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const float4 f = q[k];
                v[4 * k] = f.x;
                v[4 * k + 1] = f.y;
                v[4 * k + 2] = f.z;
                v[4 * k + 3] = f.w;
            }
            return;
        }
    } else if constexpr (T == KR_CU_TYPE_F16 || T == KR_CU_TYPE_BF16) {
        const uint8_t *p = row + b * 64;
        if ((reinterpret_cast<uintptr_t>(p) & 15) == 0) {
            const uint4 *q = reinterpret_cast<const uint4 *>(p);
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const uint4 u = q[k];
                const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    const uint16_t lo = (uint16_t)(w[j] & 0xffffu), hi = (uint16_t)(w[j] >> 16);
                    if constexpr (T == KR_CU_TYPE_F16) {
                        v[8 * k + 2 * j] = kr_cu_f16_f32(lo);
                        v[8 * k + 2 * j + 1] = kr_cu_f16_f32(hi);
                    } else {
                        v[8 * k + 2 * j] = kr_cu_bf16_f32(lo);
                        v[8 * k + 2 * j + 1] = kr_cu_bf16_f32(hi);
                    }
                }
            }
            return;
        }
    }
    kr_cu_dequant32(T, row, b, v);
}

/* The GEMV for up to N entries (n of them real). Blocks never leave early:
 * every thread reaches each __syncthreads of the staging loop. */
template <int T, int N>
__global__ void __launch_bounds__(GEMV_WARPS * 32)
    gemv_kernel(const uint8_t *__restrict__ w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
                const float *__restrict__ x, int n, float *__restrict__ y, int64_t ldy) {
    __shared__ float xs[N][CHUNK_BLOCKS * XS_STRIDE];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t row0 = (int64_t)blockIdx.x * GEMV_ROWS_PER_BLOCK + warp * GEMV_ROWS_PER_WARP;
    const int64_t nblk = kr_cu_stretches(n_cols);
    float acc[GEMV_ROWS_PER_WARP][N];
#pragma unroll
    for (int r = 0; r < GEMV_ROWS_PER_WARP; r++) {
#pragma unroll
        for (int b = 0; b < N; b++) acc[r][b] = 0.0f;
    }
    for (int64_t c0 = 0; c0 < nblk; c0 += CHUNK_BLOCKS) {
        const int cb = (int)(nblk - c0 < CHUNK_BLOCKS ? nblk - c0 : CHUNK_BLOCKS), cv = cb * 32;
        __syncthreads(); /* the previous chunk is no longer read */
        for (int i = threadIdx.x; i < n * cv; i += blockDim.x) {
            const int b = i / cv, k = i - b * cv;
            const int64_t col = c0 * 32 + k;
            xs[b][(k >> 5) * XS_STRIDE + (k & 31)] = col < n_cols ? x[b * n_cols + col] : 0.0f;
        }
        __syncthreads();
        if (lane >= cb) continue;
#pragma unroll
        for (int r = 0; r < GEMV_ROWS_PER_WARP; r++) {
            const int64_t row = row0 + r;
            if (row >= n_rows) break;
            float v[32];
            if ((c0 + lane + 1) * 32 <= n_cols)
                dequant_block<T>(w + row * row_bytes, c0 + lane, v);
            else
                kr_cu_dequant_part(T, w + row * row_bytes, c0 + lane, n_cols, v);
#pragma unroll
            for (int b = 0; b < N; b++) {
                if (b >= n) break;
                const float *xb = &xs[b][lane * XS_STRIDE];
                float s = 0.0f;
#pragma unroll
                for (int j = 0; j < 32; j++) s += v[j] * xb[j];
                acc[r][b] += s;
            }
        }
    }
#pragma unroll
    for (int r = 0; r < GEMV_ROWS_PER_WARP; r++) {
        const int64_t row = row0 + r;
#pragma unroll
        for (int b = 0; b < N; b++) {
            float s = acc[r][b];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
            if (lane == 0 && row < n_rows && b < n) y[b * ldy + row] = s;
        }
    }
}

/* Rows [0, rows) of W (from w) to f16, row-major with ld16 (n_cols rounded
 * up to 32) per row; one thread per 32-value stretch, written as four
 * 16-byte stores (out is 256-byte aligned and ld16 a multiple of 32, so
 * every stretch is 64-byte aligned; a partial one is written with zeros). */
template <int T>
__global__ void dequant_f16_kernel(const uint8_t *__restrict__ w, size_t row_bytes, int64_t rows, int64_t n_cols,
                                   __half *__restrict__ out) {
    const int64_t nblk = kr_cu_stretches(n_cols), ld16 = nblk * 32, total = rows * nblk;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t r = i / nblk, b = i - r * nblk;
        float v[32];
        if ((b + 1) * 32 <= n_cols)
            dequant_block<T>(w + r * row_bytes, b, v);
        else
            kr_cu_dequant_part(T, w + r * row_bytes, b, n_cols, v);
        uint32_t pk[16];
#pragma unroll
        for (int j = 0; j < 16; j++) {
            pk[j] = (uint32_t)__half_as_ushort(__float2half_rn(v[2 * j])) |
                ((uint32_t)__half_as_ushort(__float2half_rn(v[2 * j + 1])) << 16);
        }
        uint4 *dst = reinterpret_cast<uint4 *>(out + r * ld16 + b * 32);
#pragma unroll
        for (int k = 0; k < 4; k++) dst[k] = make_uint4(pk[4 * k], pk[4 * k + 1], pk[4 * k + 2], pk[4 * k + 3]);
    }
}

/* x (count floats) to f16 */
__global__ void f32_to_f16_kernel(const float *__restrict__ x, int64_t count, __half *__restrict__ out) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += (int64_t)gridDim.x * blockDim.x) {
        out[i] = __float2half_rn(x[i]);
    }
}

/* Row tokens[i] of the table, dequantised into x[i]: one block per token.
 * The type is a run-time value here (a lookup is small next to a matmul). */
__global__ void embed_kernel(int wtype, const uint8_t *__restrict__ table, size_t row_bytes,
                             const int32_t *__restrict__ tokens, int64_t n_embd, float *__restrict__ x) {
    const int64_t i = blockIdx.x;
    const int32_t tok = tokens[i];
    float *out = x + i * n_embd;
    for (int64_t b = threadIdx.x; b < kr_cu_stretches(n_embd); b += blockDim.x) {
        float v[32];
        if (tok >= 0) {
            kr_cu_dequant_part(wtype, table + (int64_t)tok * row_bytes, b, n_embd, v);
        } else {
            for (int j = 0; j < 32; j++) v[j] = 0.0f;
        }
        const int64_t left = n_embd - b * 32;
        for (int j = 0; j < 32 && j < left; j++) out[b * 32 + j] = v[j];
    }
}

/* Launch grid for a grid-stride loop over `total` items, 256 threads each. */
unsigned grid_for(int64_t total) {
    const int64_t g = (total + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 65536 ? 65536 : g);
}

int last_error() { return (int)cudaGetLastError(); }

template <int T, int N>
int launch_gemv_n(cudaStream_t s, const uint8_t *w, size_t row_bytes, int64_t n_rows, int64_t n_cols, const float *x,
                  int n, float *y, int64_t ldy) {
    const unsigned grid = (unsigned)((n_rows + GEMV_ROWS_PER_BLOCK - 1) / GEMV_ROWS_PER_BLOCK);
    gemv_kernel<T, N><<<grid, GEMV_WARPS * 32, 0, s>>>(w, row_bytes, n_rows, n_cols, x, n, y, ldy);
    return last_error();
}

/* Picks the entry capacity: 1 or 8 (the accumulators of N entries live in
 * registers, so N is a template argument). Two versions per type, not
 * four: the GEMV is bound by reading the weights, so 2-7 entries in the
 * 8-entry version cost little, and each version adds about 3 s per
 * architecture to the build (52 versions took 2m40s for three). */
template <int T>
int launch_gemv(cudaStream_t s, const uint8_t *w, size_t row_bytes, int64_t n_rows, int64_t n_cols, const float *x,
                int n, float *y, int64_t ldy) {
    static_assert(KR_CUDA_GEMV_MAX == 8, "launch_gemv covers up to 8 entries");
    if (n == 1) return launch_gemv_n<T, 1>(s, w, row_bytes, n_rows, n_cols, x, n, y, ldy);
    return launch_gemv_n<T, 8>(s, w, row_bytes, n_rows, n_cols, x, n, y, ldy);
}

template <int T>
int launch_dequant_f16(cudaStream_t s, const uint8_t *w, size_t row_bytes, int64_t rows, int64_t n_cols, __half *out) {
    dequant_f16_kernel<T><<<grid_for(rows * kr_cu_stretches(n_cols)), 256, 0, s>>>(w, row_bytes, rows, n_cols, out);
    return last_error();
}

/* fn<type>(args...) for every weight type; KR_CUDA_ERR_ARG otherwise */
#define KR_CU_TYPE_DISPATCH(type, fn, ...)                                                                             \
    switch (type) {                                                                                                    \
    case KR_CU_TYPE_F32: return fn<KR_CU_TYPE_F32>(__VA_ARGS__);                                                       \
    case KR_CU_TYPE_F16: return fn<KR_CU_TYPE_F16>(__VA_ARGS__);                                                       \
    case KR_CU_TYPE_BF16: return fn<KR_CU_TYPE_BF16>(__VA_ARGS__);                                                     \
    case KR_CU_TYPE_Q4_0: return fn<KR_CU_TYPE_Q4_0>(__VA_ARGS__);                                                     \
    case KR_CU_TYPE_Q4_1: return fn<KR_CU_TYPE_Q4_1>(__VA_ARGS__);                                                     \
    case KR_CU_TYPE_Q5_0: return fn<KR_CU_TYPE_Q5_0>(__VA_ARGS__);                                                     \
    case KR_CU_TYPE_Q5_1: return fn<KR_CU_TYPE_Q5_1>(__VA_ARGS__);                                                     \
    case KR_CU_TYPE_Q8_0: return fn<KR_CU_TYPE_Q8_0>(__VA_ARGS__);                                                     \
    case KR_CU_TYPE_Q2_K: return fn<KR_CU_TYPE_Q2_K>(__VA_ARGS__);                                                     \
    case KR_CU_TYPE_Q3_K: return fn<KR_CU_TYPE_Q3_K>(__VA_ARGS__);                                                     \
    case KR_CU_TYPE_Q4_K: return fn<KR_CU_TYPE_Q4_K>(__VA_ARGS__);                                                     \
    case KR_CU_TYPE_Q5_K: return fn<KR_CU_TYPE_Q5_K>(__VA_ARGS__);                                                     \
    case KR_CU_TYPE_Q6_K: return fn<KR_CU_TYPE_Q6_K>(__VA_ARGS__);                                                     \
    default: return KR_CUDA_ERR_ARG;                                                                                   \
    }

int dispatch_gemv(int type, cudaStream_t s, const uint8_t *w, size_t row_bytes, int64_t n_rows, int64_t n_cols,
                  const float *x, int n, float *y, int64_t ldy) {
    KR_CU_TYPE_DISPATCH(type, launch_gemv, s, w, row_bytes, n_rows, n_cols, x, n, y, ldy)
}

int dispatch_dequant_f16(int type, cudaStream_t s, const uint8_t *w, size_t row_bytes, int64_t rows, int64_t n_cols,
                         __half *out) {
    KR_CU_TYPE_DISPATCH(type, launch_dequant_f16, s, w, row_bytes, rows, n_cols, out)
}

/* cuBLAS is opened on first use, not linked: libcublasLt's start-up (its
 * constructors and relocations) cost every program linking libkara.a 0.13 s
 * and 216 MB of resident memory at start, CPU-only runs included
 * (docs/CUDA.md). Looked up by its soname, then in the toolkit's library
 * folder of the build machine (KR_CUDA_LIBDIR). */
struct BlasApi {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSetPointerMode_v2) set_pointer_mode;
    decltype(&cublasSgemm_v2) sgemm;
    /* cublasGemmEx is overloaded in C++: the C entry point's type */
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void *,
                              const void *, cudaDataType, int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    bool ok;
};

BlasApi blas_api_store;
pthread_once_t blas_once = PTHREAD_ONCE_INIT;

#define KR_STR2(x) #x
#define KR_STR(x) KR_STR2(x)

template <typename F> void load_sym(void *lib, const char *name, F *out) {
    *out = reinterpret_cast<F>(dlsym(lib, name));
}

void blas_load() {
    const char *names[] = {"libcublas.so." KR_STR(CUBLAS_VER_MAJOR),
#ifdef KR_CUDA_LIBDIR
                           KR_CUDA_LIBDIR "/libcublas.so." KR_STR(CUBLAS_VER_MAJOR),
#endif
                           "libcublas.so"};
    void *lib = nullptr;
    for (const char *n : names)
        if (lib == nullptr) lib = dlopen(n, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    BlasApi &a = blas_api_store;
    load_sym(lib, "cublasCreate_v2", &a.create);
    load_sym(lib, "cublasDestroy_v2", &a.destroy);
    load_sym(lib, "cublasSetStream_v2", &a.set_stream);
    load_sym(lib, "cublasSetPointerMode_v2", &a.set_pointer_mode);
    load_sym(lib, "cublasSgemm_v2", &a.sgemm);
    load_sym(lib, "cublasGemmEx", &a.gemm_ex);
    a.ok = a.create && a.destroy && a.set_stream && a.set_pointer_mode && a.sgemm && a.gemm_ex;
}

/* The entry points, or nullptr when libcublas cannot be opened. */
const BlasApi *blas_api() {
    pthread_once(&blas_once, blas_load);
    return blas_api_store.ok ? &blas_api_store : nullptr;
}

int blas_err(cublasStatus_t st) { return st == CUBLAS_STATUS_SUCCESS ? 0 : -(int)st; }

/* The large-entry path: y^T (column-major n_rows x n, ld ldy) =
 * W (row-major, i.e. column-major W^T transposed by CUBLAS_OP_T) x X^T. */
int matmul_blas(cudaStream_t s, cublasHandle_t h, int wtype, const uint8_t *w, size_t row_bytes, int64_t n_rows,
                int64_t n_cols, const float *x, int64_t n, float *y, int64_t ldy, void *scratch, size_t scratch_bytes) {
    if (n_rows > INT_MAX || n_cols > INT_MAX || n > INT_MAX || ldy > INT_MAX) return KR_CUDA_ERR_ARG;
    const BlasApi *api = blas_api();
    if (api == nullptr) return KR_CUDA_ERR_NO_BLAS;
    cublasStatus_t st = api->set_stream(h, s);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_err(st);
    const float alpha = 1.0f, beta = 0.0f;
    if (wtype == KR_CU_TYPE_F32 && row_bytes % 4 == 0 && (reinterpret_cast<uintptr_t>(w) & 3) == 0) {
        st = api->sgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)n_rows, (int)n, (int)n_cols, &alpha,
                        reinterpret_cast<const float *>(w), (int)(row_bytes / 4), x, (int)n_cols, &beta, y, (int)ldy);
        return blas_err(st);
    }
    if (scratch == nullptr) return KR_CUDA_ERR_ARG;
    const uintptr_t base = align_up(reinterpret_cast<uintptr_t>(scratch), SCRATCH_ALIGN);
    const size_t lost = base - reinterpret_cast<uintptr_t>(scratch);
    const size_t x16_bytes = align_up((size_t)n * (size_t)n_cols * sizeof(__half), SCRATCH_ALIGN);
    const int64_t ld16 = kr_cu_stretches(n_cols) * 32;
    const size_t row16 = (size_t)ld16 * sizeof(__half);
    if (scratch_bytes < lost + x16_bytes + row16) return KR_CUDA_ERR_ARG;
    int64_t tile = (int64_t)((scratch_bytes - lost - x16_bytes) / row16);
    if (tile > KR_CUDA_TILE_ROWS) tile = KR_CUDA_TILE_ROWS;
    if (tile > n_rows) tile = n_rows;
    __half *x16 = reinterpret_cast<__half *>(base);
    __half *w16 = reinterpret_cast<__half *>(base + x16_bytes);

    f32_to_f16_kernel<<<grid_for(n * n_cols), 256, 0, s>>>(x, n * n_cols, x16);
    int rc = last_error();
    if (rc != 0) return rc;
    for (int64_t r0 = 0; r0 < n_rows; r0 += tile) {
        const int64_t rows = n_rows - r0 < tile ? n_rows - r0 : tile;
        rc = dispatch_dequant_f16(wtype, s, w + r0 * row_bytes, row_bytes, rows, n_cols, w16);
        if (rc != 0) return rc;
        st = api->gemm_ex(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)rows, (int)n, (int)n_cols, &alpha, w16, CUDA_R_16F,
                          (int)ld16, x16, CUDA_R_16F, (int)n_cols, &beta, y + r0, CUDA_R_32F, (int)ldy,
                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS) return blas_err(st);
    }
    return 0;
}

} // namespace

extern "C" bool kr_cuda_weight_type_ok(int wtype) { return kr_cu_type_known(wtype); }

extern "C" int kr_cuda_blas_create(void **handle, void *stream) {
    if (handle == nullptr) return KR_CUDA_ERR_ARG;
    *handle = nullptr;
    const BlasApi *api = blas_api();
    if (api == nullptr) return KR_CUDA_ERR_NO_BLAS;
    cublasHandle_t h = nullptr;
    cublasStatus_t st = api->create(&h);
    if (st != CUBLAS_STATUS_SUCCESS) return blas_err(st);
    st = api->set_stream(h, static_cast<cudaStream_t>(stream));
    if (st == CUBLAS_STATUS_SUCCESS) st = api->set_pointer_mode(h, CUBLAS_POINTER_MODE_HOST);
    if (st != CUBLAS_STATUS_SUCCESS) {
        api->destroy(h);
        return blas_err(st);
    }
    *handle = h;
    return 0;
}

extern "C" void kr_cuda_blas_destroy(void *handle) {
    const BlasApi *api = blas_api();
    if (handle != nullptr && api != nullptr) api->destroy(static_cast<cublasHandle_t>(handle));
}

extern "C" size_t kr_cuda_matmul_scratch_bytes(int64_t max_cols, int64_t n_batch) {
    if (max_cols <= 0 || n_batch <= 0) return 0;
    const size_t ld16 = (size_t)kr_cu_stretches(max_cols) * 32;
    const size_t x16 = align_up((size_t)n_batch * ld16 * sizeof(__half), SCRATCH_ALIGN);
    const size_t w16 = (size_t)KR_CUDA_TILE_ROWS * ld16 * sizeof(__half);
    return SCRATCH_ALIGN + x16 + w16; /* SCRATCH_ALIGN: the base may need rounding up */
}

extern "C" int kr_cuda_matmul(void *stream, void *blas, int wtype, const void *w, size_t row_bytes, int64_t n_rows,
                              int64_t n_cols, const float *x, int64_t n, float *y, int64_t ldy, void *scratch,
                              size_t scratch_bytes) {
    if (!kr_cu_type_known(wtype) || !kr_cu_cols_ok(wtype, n_cols) || n_rows < 0 || n < 0) return KR_CUDA_ERR_ARG;
    if (row_bytes < (size_t)kr_cu_row_bytes(wtype, n_cols)) return KR_CUDA_ERR_ARG;
    if (n == 0 || n_rows == 0) return 0;
    if (w == nullptr || x == nullptr || y == nullptr || (n > 1 && ldy < n_rows)) return KR_CUDA_ERR_ARG;
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    const uint8_t *wb = static_cast<const uint8_t *>(w);
    if (n <= KR_CUDA_GEMV_MAX) return dispatch_gemv(wtype, s, wb, row_bytes, n_rows, n_cols, x, (int)n, y, ldy);
    if (blas == nullptr) return KR_CUDA_ERR_ARG;
    return matmul_blas(s, static_cast<cublasHandle_t>(blas), wtype, wb, row_bytes, n_rows, n_cols, x, n, y, ldy,
                       scratch, scratch_bytes);
}

extern "C" int kr_cuda_embed(void *stream, int wtype, const void *table, size_t row_bytes, const int32_t *tokens,
                             int64_t n, int64_t n_embd, float *x) {
    if (!kr_cu_type_known(wtype) || !kr_cu_cols_ok(wtype, n_embd) || n < 0) return KR_CUDA_ERR_ARG;
    if (row_bytes < (size_t)kr_cu_row_bytes(wtype, n_embd)) return KR_CUDA_ERR_ARG;
    if (n == 0) return 0;
    if (table == nullptr || tokens == nullptr || x == nullptr || n > INT_MAX) return KR_CUDA_ERR_ARG;
    embed_kernel<<<(unsigned)n, 128, 0, static_cast<cudaStream_t>(stream)>>>(wtype, static_cast<const uint8_t *>(table),
                                                                             row_bytes, tokens, n_embd, x);
    return last_error();
}
