/*
 * cuda_probe.cu - kr_cuda_n_devices: how many CUDA devices answer, asked
 * without creating a context, so that llama.cpp's -ngl can fall back to the
 * CPU where a build has the backend but the machine has no usable GPU; and
 * kr_cuda_device_props: what `kara bench --device cuda` compares with.
 */
#include <cuda_runtime.h>
#include <string.h>

#include "kara.h"

extern "C" int kr_cuda_n_devices(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky error a missing driver leaves */
        return 0;
    }
    return n;
}

/* The peak bandwidth is the memory clock (kHz, double data rate) times the
 * bus width: the figure decode, which reads every weight once a token, is
 * measured against. Read as attributes: CUDA 13's cudaDeviceProp no longer
 * has the clock. */
extern "C" bool kr_cuda_device_props(kara_device_props *out) {
    memset(out, 0, sizeof *out);
    if (kr_cuda_n_devices() <= 0) return false;
    cudaDeviceProp p;
    int clock_khz = 0, bus_bits = 0, n_sm = 0;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess ||
        cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0) != cudaSuccess ||
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0) != cudaSuccess ||
        cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    p.name[sizeof out->name - 1] = '\0'; /* the name field is shorter than cudaDeviceProp's */
    memcpy(out->name, p.name, sizeof out->name);
    out->mem_bandwidth = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0);
    out->mem_bytes = p.totalGlobalMem;
    out->n_sm = n_sm;
    return true;
}
