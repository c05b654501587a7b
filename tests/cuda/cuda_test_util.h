/*
 * cuda_test_util.h - what the device tests (tests/cuda/test_cuda_*.c)
 * share: stopping on a failed CUDA call or launcher, device copies, and the
 * skip when no GPU answers (exit 77, which CTest reports as skipped).
 */
#ifndef KR_CUDA_TEST_UTIL_H
#define KR_CUDA_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

/* A CUDA runtime call that must succeed: the test stops otherwise. */
#define CK(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));              \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

/* A launcher's return code (must be 0), and with RUN the stream's too. */
#define RC_OK(call)                                                                                                    \
    do {                                                                                                               \
        int r_ = (call);                                                                                               \
        if (r_ != 0) {                                                                                                 \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, r_);                                 \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)
#define RUN(call)                                                                                                      \
    do {                                                                                                               \
        RC_OK(call);                                                                                                   \
        CK(cudaDeviceSynchronize());                                                                                   \
    } while (0)

static inline void *dev_copy(const void *host, size_t bytes) {
    void *d = NULL;
    CK(cudaMalloc(&d, bytes ? bytes : 1));
    if (bytes) CK(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice));
    return d;
}

static inline void *dev_zero(size_t bytes) {
    void *d = NULL;
    CK(cudaMalloc(&d, bytes ? bytes : 1));
    CK(cudaMemset(d, 0, bytes ? bytes : 1));
    return d;
}

static inline void host_copy(void *host, const void *dev, size_t bytes) {
    CK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}

/* Exit 77 with a line saying why when no CUDA device answers. */
static inline void skip_without_gpu(const char *test) {
    int n_dev = 0;
    const cudaError_t err = cudaGetDeviceCount(&n_dev);
    if (err != cudaSuccess || n_dev <= 0) {
        printf("%s: skipped: no CUDA device (%s)\n", test,
               err != cudaSuccess ? cudaGetErrorString(err) : "cudaGetDeviceCount gave 0");
        exit(77);
    }
}

#endif /* KR_CUDA_TEST_UTIL_H */
