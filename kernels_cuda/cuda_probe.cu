/*
 * cuda_probe.cu - kr_cuda_n_devices: how many CUDA devices answer, asked
 * without creating a context, so that llama.cpp's -ngl can fall back to the
 * CPU where a build has the backend but the machine has no usable GPU.
 */
#include <cuda_runtime.h>

extern "C" int kr_cuda_n_devices(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky error a missing driver leaves */
        return 0;
    }
    return n;
}
