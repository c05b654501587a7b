/* test_cuda_reference_logits.c - tests/e2e/test_reference_logits.c on the
 * CUDA backend: every model of ../shared/reference against llama.cpp, the
 * teacher-forced batch (the f16 cuBLAS path) and the greedy continuation
 * (the dequantising GEMV), tolerances doubled; skipped without a GPU or
 * without ../shared. See that file for the checks and the tolerances. */
#define REF_CUDA 1
#include "../e2e/test_reference_logits.c"
