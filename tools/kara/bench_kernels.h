/* bench_kernels.h - micro-benchmarks behind `kara bench --membw|--kernels`. */
#ifndef KR_BENCH_KERNELS_H
#define KR_BENCH_KERNELS_H

#include <stdbool.h>

/* Streaming read bandwidth of a 1 GiB buffer on `threads` threads (JSON line). */
int kr_bench_membw(int threads);
/* Matrix-vector and matrix-matrix (n_batch rows) products of the kernel
 * table per weight type (types: comma list such as "Q4_K,Q6_K", NULL = all),
 * on the layout the loader would give the weights, or the file's layout
 * (file_layout). */
int kr_bench_kernels(int threads, const char *types, int n_batch, bool file_layout);

/* The same prefill shapes through oneDNN's matmul (f32, bf16, u8 x s8) with
 * m activation rows; an error message when the build has no oneDNN. */
int kr_bench_onednn(int threads, int m);

#endif
