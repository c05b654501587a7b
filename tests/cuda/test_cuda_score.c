/* test_cuda_score.c - Kara's window scoring and compaction on a GPU
 * (kernels_cuda/cuda_score.cu, cuda_backend_kv.c) against the CPU. Exits 77
 * (skip) when no CUDA device answers. Checked:
 *   - kr_cuda_score_layer against the CPU scorer (runtime/kv/kv_score.c) on
 *     random paged spans (tests/common/score_case.h): every mode, softmax
 *     set, exclude_self, GQA reduction and value-aware setting on f16; every
 *     KV type with f32, f16 and q8_0 query rings; query suffixes; windows of
 *     up to 256 rows and 16 heads of 128; within 1e-4 * (1 + |cpu|) per
 *     score (logits summed in another order, exp and division on the
 *     device: the host emulation of the same kernel, test_cuda_math_score,
 *     holds 2e-5), and normalized_mean adds layer / sum to the accumulator;
 *   - kr_cuda_kv_move runs a compaction's moves (kr_kv_compact_plan_make:
 *     ascending, destinations below sources, some destinations an earlier
 *     move's source) on 3 layers of a shuffled pool and leaves exactly the
 *     bytes the host's in-order copies leave, in every layer, K and V;
 *   - a whole context with runtime.device cuda and Kara compressing (the
 *     shipped reasoning model, windows of 32, a share of 96 slots, 200
 *     greedy tokens): events scored and evicted on the device as on the
 *     CPU, and the first 24 tokens (before any event) are the CPU's; how
 *     many of the 200 agree is printed (sums in another order can flip a
 *     near tie, so later agreement is reported, not required).
 * A mismatch prints the case and the test exits 1. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda_test_util.h"

#include "cuda_ops.h"
#include "kara.h"
#include "kv_modes.h"
#include "context.h"
#include "kv_compact.h"
#include "score_case.h"
#include "test_util.h"

static int failed, passed;

static void expect(int ok, const char *what) {
    if (ok) {
        passed++;
        return;
    }
    failed++;
    fprintf(stderr, "FAIL %s\n", what);
}

static void score_case(uint64_t seed, int32_t n_w, int32_t n_buf, int32_t n_q, int32_t hq, int32_t hkv, int32_t d,
                       int32_t ns, kara_kv_dtype kt, kara_kv_dtype qt, kr_score_mode mode, kr_softmax_over over,
                       bool excl, bool gqa_max, bool va, bool normalized) {
    kr_kv_score_opts o;
    kr_kv_score_opts_init(&o);
    o.mode = mode;
    o.softmax_over = over;
    o.exclude_self = excl;
    o.gqa_reduce = gqa_max ? KR_REDUCE_MAX : KR_REDUCE_MEAN;
    o.value_aware = va;
    kr_score_case c;
    kr_score_case_make(&c, seed, n_w, n_buf, n_q, hq, hkv, d, ns, kt, qt, &o, 1.5f);
    const int32_t n_c = n_w - n_buf;
    const bool sinks = over == KR_SOFTMAX_WINDOW_PLUS_SINKS && ns > 0;
    float *ref = malloc((size_t)n_c * sizeof(float)), *got = malloc((size_t)n_c * sizeof(float));
    if (kr_score_case_cpu(&c, ref) != KARA_OK) {
        fprintf(stderr, "test_cuda_score: the CPU scorer refused case %llu\n", (unsigned long long)seed);
        exit(1);
    }
    if (normalized) { /* the accumulator gets the layer divided by its sum */
        double sum = 0.0;
        for (int32_t j = 0; j < n_c; j++) sum += ref[j];
        for (int32_t j = 0; j < n_c; j++) ref[j] = sum > 0.0 ? (float)(ref[j] / sum) : 0.0f;
    }
    const int32_t tiles = (n_w + 31) / 32, keys = (sinks ? ns : 0) + n_w;
    const int64_t *offs = c.key_offs + (sinks ? 0 : ns);
    kr_cuda_score_args a = {.n_w = n_w,
                            .n_buf = n_buf,
                            .n_q = n_q,
                            .n_head = hq,
                            .n_head_kv = hkv,
                            .head_dim = d,
                            .n_sink = sinks ? ns : 0,
                            .mode = (int32_t)mode,
                            .softmax_over = (int32_t)over,
                            .exclude_self = excl,
                            .gqa_max = gqa_max,
                            .value_aware = va,
                            .normalized = normalized,
                            .q_ring = dev_copy(c.ring, c.ring_bytes),
                            .q_first = c.q_first,
                            .ring_cap = c.ring_cap,
                            .q_type = (int32_t)qt,
                            .q_row_bytes = c.q_row_bytes,
                            .pool = dev_copy(c.pool, c.pool_bytes),
                            .key_offs = dev_copy(offs, (size_t)keys * sizeof(int64_t)),
                            .v_delta = (int64_t)((size_t)c.block_size * c.slot_bytes),
                            .kv_type = (int32_t)kt,
                            .partial = dev_zero((size_t)hq * tiles * n_c * sizeof(float)),
                            .zbuf = dev_zero((size_t)hq * tiles * keys * sizeof(float)),
                            .layer = dev_zero((size_t)n_c * sizeof(float)),
                            .acc = dev_zero((size_t)n_c * sizeof(float))};
    RUN(kr_cuda_score_layer(NULL, &a));
    host_copy(got, a.acc, (size_t)n_c * sizeof(float));
    int32_t at = 0;
    const float worst = kr_score_case_worst(got, ref, n_c, &at);
    char what[256];
    snprintf(what, sizeof what,
             "score case %llu (mode %d, over %d, excl %d, max %d, va %d, norm %d, K %d, Q %d, n_w %d): score %d is "
             "%.9g, CPU %.9g (error %.3g)",
             (unsigned long long)seed, mode, over, excl, gqa_max, va, normalized, kt, qt, n_w, at, got[at], ref[at],
             worst);
    expect(worst <= 1e-4f, what);
    cudaFree((void *)a.q_ring);
    cudaFree((void *)a.pool);
    cudaFree((void *)a.key_offs);
    cudaFree(a.partial);
    cudaFree(a.zbuf);
    cudaFree(a.layer);
    cudaFree(a.acc);
    kr_score_case_free(&c);
    free(ref);
    free(got);
}

static void test_scoring(void) {
    uint64_t seed = 31000;
    for (int mode = 0; mode <= KR_SCORE_BUFFER_ONLY; mode++)
        for (int over = 0; over <= KR_SOFTMAX_WINDOW_PLUS_SINKS; over++)
            for (int f = 0; f < 4; f++)
                score_case(seed++, 70, 20, 70, 4, 2, 64, 4, KARA_KV_F16, KARA_KV_F16, (kr_score_mode)mode,
                           (kr_softmax_over)over, f & 1, f >> 1, (f + over) % 2 == 0, false);
    const kara_kv_dtype qtypes[] = {KARA_KV_F32, KARA_KV_F16, KARA_KV_Q8_0};
    for (int kt = 0; kt <= KARA_KV_Q4_0; kt++)
        for (int qt = 0; qt < 3; qt++)
            score_case(seed++, 45, 13, 45, 8, 2, 32, 0, (kara_kv_dtype)kt, qtypes[qt], KR_SCORE_BIDIRECTIONAL,
                       KR_SOFTMAX_WINDOW, true, false, true, false);
    score_case(seed++, 200, 8, 8, 4, 4, 64, 0, KARA_KV_F16, KARA_KV_F16, KR_SCORE_BUFFER_ONLY, KR_SOFTMAX_WINDOW, false,
               false, false, false);
    score_case(seed++, 150, 30, 57, 6, 1, 64, 4, KARA_KV_F32, KARA_KV_F32, KR_SCORE_TWO_SIDED,
               KR_SOFTMAX_WINDOW_PLUS_SINKS, true, true, true, false);
    score_case(seed++, 256, 128, 256, 16, 8, 128, 0, KARA_KV_F16, KARA_KV_F16, KR_SCORE_BIDIRECTIONAL,
               KR_SOFTMAX_WINDOW, true, false, true, true);
}

/* A compaction of one sequence in 3 layers of a pool of 6 blocks of 8
 * slots, the sequence's blocks shuffled. */
static void test_moves(void) {
    const int32_t B = 8, n_blocks = 6, n_layers = 3, n = 41, F = 9, n_buf = 5;
    const size_t row = 96, run = (size_t)B * row, layer_bytes = 2 * run, block_bytes = (size_t)n_layers * layer_bytes;
    const int32_t table[6] = {4, 1, 5, 0, 3, 2};
    uint8_t *pool = malloc((size_t)n_blocks * block_bytes), *want = malloc((size_t)n_blocks * block_bytes);
    uint8_t *got = malloc((size_t)n_blocks * block_bytes);
    for (size_t i = 0; i < (size_t)n_blocks * block_bytes; i++) pool[i] = (uint8_t)(i * 2654435761u >> 13);
    memcpy(want, pool, (size_t)n_blocks * block_bytes);
    int32_t keep[32], k = 0;
    for (int32_t j = 0; j < n - F - n_buf; j++)
        if (j % 3 != 1) keep[k++] = j; /* drop every third slot of C */
    kr_kv_move moves[64];
    kr_kv_compact_plan plan;
    if (kr_kv_compact_plan_make(&plan, F, n, n_buf, keep, k, moves) != KARA_OK) {
        fprintf(stderr, "test_cuda_score: compaction plan refused\n");
        exit(1);
    }
    int64_t src[64], dst[64];
    for (int32_t m = 0; m < plan.n_moves; m++) { /* layer 0's K row offsets; the host copies in order */
        src[m] = (int64_t)table[moves[m].src / B] * (int64_t)block_bytes + (int64_t)(moves[m].src % B) * (int64_t)row;
        dst[m] = (int64_t)table[moves[m].dst / B] * (int64_t)block_bytes + (int64_t)(moves[m].dst % B) * (int64_t)row;
        for (int32_t l = 0; l < n_layers; l++)
            for (int v = 0; v < 2; v++) {
                const size_t o = (size_t)l * layer_bytes + (size_t)v * run;
                memmove(want + dst[m] + o, want + src[m] + o, row);
            }
    }
    uint8_t *dpool = dev_copy(pool, (size_t)n_blocks * block_bytes);
    int64_t *dsrc = dev_copy(src, (size_t)plan.n_moves * sizeof(int64_t));
    int64_t *ddst = dev_copy(dst, (size_t)plan.n_moves * sizeof(int64_t));
    RUN(kr_cuda_kv_move(NULL, dpool, dsrc, ddst, plan.n_moves, n_layers, (int64_t)layer_bytes, (int64_t)run,
                        (int64_t)row));
    host_copy(got, dpool, (size_t)n_blocks * block_bytes);
    expect(memcmp(got, want, (size_t)n_blocks * block_bytes) == 0, "kv_move leaves the host's bytes");
    expect(kr_cuda_kv_move(NULL, dpool, dsrc, ddst, 1, 1, (int64_t)layer_bytes, 10, 96) == KR_CUDA_ERR_ARG,
           "kv_move refuses a V offset inside the K row");
    cudaFree(dpool);
    cudaFree(dsrc);
    cudaFree(ddst);
    free(pool);
    free(want);
    free(got);
}

/* Greedy tokens after a prompt, one kara_decode per token. */
static void greedy(kara_context *c, const int32_t *prompt, int32_t n_prompt, int32_t *out, int32_t n_out) {
    const int32_t n_vocab = kara_model_n_vocab(kara_context_model(c));
    kara_batch b = kara_batch_one_sequence(prompt, n_prompt, 0, 0);
    for (int32_t t = 0; t < n_out; t++) {
        if (kara_decode(c, &b) != KARA_OK) {
            fprintf(stderr, "test_cuda_score: kara_decode: %s\n", kara_last_error());
            exit(1);
        }
        const float *lg = kara_get_logits(c, -1);
        int32_t best = 0;
        for (int32_t v = 1; v < n_vocab; v++)
            if (lg[v] > lg[best]) best = v;
        out[t] = best;
        b = kara_batch_one_sequence(&out[t], 1, n_prompt + t, 0);
    }
}

/* The shipped reasoning model with Kara compressing (windows of 32 slots
 * after a buffer of 16, a share of 96 slots), on the CPU and the device:
 * events ran and evicted on both, and the tokens before the first event
 * are the CPU's. Later tokens may differ: the device sums in another
 * order, and a near tie can flip. */
static void test_methods_lockstep(kara_model *m, const int32_t *prompt, int32_t n_prompt);

/* A context of the method on the CPU or the device: windows of 32 slots
 * after a buffer of 16, a share of 96 slots; the test stops if it fails. */
static kara_context *make_context(kara_model *m, kara_kv_method method, bool dev) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 512;
    cp.n_threads = 1;
    cp.device = dev ? KARA_DEVICE_CUDA : KARA_DEVICE_CPU;
    cp.kv.method = method;
    cp.kv.seq_tokens = 96;
    cp.kv.interval = 32;
    kara_status s = kara_kv_params_set(&cp.kv, "kara.buffer", "16");
    kara_context *c = NULL;
    if (!s) s = kara_context_create(m, &cp, &c);
    if (s) {
        fprintf(stderr, "test_cuda_score: %s context (%s): %s\n", kara_kv_method_name(method), dev ? "cuda" : "cpu",
                kara_last_error());
        exit(1);
    }
    return c;
}

static void test_context(void) {
    const char *src = kr_test_source_dir();
    if (!src) {
        fprintf(stderr, "test_cuda_score: the source tree was not found above the binary; set KARA_SOURCE_DIR\n");
        exit(1);
    }
    const char *path = kr_test_path(src, "tools/train/model/kara-reasoner-1m.gguf");
    kara_model_params mp;
    kara_model_params_init(&mp);
    kara_model *m = NULL;
    if (kara_model_load(path, &mp, &m) != KARA_OK) {
        fprintf(stderr, "test_cuda_score: cannot load %s: %s\n", path, kara_last_error());
        exit(1);
    }
    int32_t prompt[64], n_prompt = 0;
    if (kara_tokenize(m, "Compute #1 37*46 + #2 59*21.", -1, prompt, 64, true, false, &n_prompt) != KARA_OK) {
        fprintf(stderr, "test_cuda_score: tokenize: %s\n", kara_last_error());
        exit(1);
    }
    int32_t out[2][200];
    kara_kv_stats st[2];
    for (int dev = 0; dev < 2; dev++) {
        kara_context *c = make_context(m, KARA_KV_METHOD_KARA, dev);
        greedy(c, prompt, n_prompt, out[dev], 200);
        kara_context_kv_stats(c, &st[dev]);
        kara_context_free(c);
    }
    expect(st[0].events > 0 && st[1].events > 0 && st[0].slots_evicted > 0 && st[1].slots_evicted > 0,
           "Kara scored and evicted on both devices");
    int32_t same = 0;
    while (same < 200 && out[0][same] == out[1][same]) same++;
    printf("test_cuda_score: the device's greedy tokens equal the CPU's for %d of 200 (events: CPU %llu, device "
           "%llu; evicted %llu, %llu)\n",
           same, (unsigned long long)st[0].events, (unsigned long long)st[1].events,
           (unsigned long long)st[0].slots_evicted, (unsigned long long)st[1].slots_evicted);
    expect(same >= 24, "the first 24 tokens are the CPU's");
    test_methods_lockstep(m, prompt, n_prompt);
    kara_model_free(m);
}

/* Index of the largest logit, and whether the runner-up is within a near
 * tie of it (a margin the device's other summation order could cross). */
static int32_t top1(const float *lg, int32_t n, bool *near_tie) {
    int32_t best = 0, second = -1;
    for (int32_t v = 1; v < n; v++) {
        if (lg[v] > lg[best]) {
            second = best;
            best = v;
        } else if (second < 0 || lg[v] > lg[second]) {
            second = v;
        }
    }
    *near_tie = second >= 0 && lg[best] - lg[second] <= 1e-3f * (1.0f + fabsf(lg[best]));
    return best;
}

/* Streaming, recent and Kara on the device and on the CPU in lockstep over
 * 200 steps, both fed the CPU's greedy token: at every step where the CPU's
 * choice is not a near tie the device picks the same token, and after
 * every step both caches hold the same positions (the same decision at each
 * eviction) with the same event and eviction counts. */
static void test_methods_lockstep(kara_model *m, const int32_t *prompt, int32_t n_prompt) {
    static const kara_kv_method methods[] = {KARA_KV_METHOD_STREAMING, KARA_KV_METHOD_RECENT, KARA_KV_METHOD_KARA};
    const int32_t n_vocab = kara_model_n_vocab(m);
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        const char *name = kara_kv_method_name(methods[i]);
        kara_context *c[2] = {make_context(m, methods[i], false), make_context(m, methods[i], true)};
        int32_t tok = 0, step, same_tokens = 1, same_cache = 1, ties = 0;
        kara_kv_stats st[2];
        for (step = 0; step < 200 && same_tokens && same_cache; step++) {
            bool tie = false;
            int32_t pick[2];
            for (int dev = 0; dev < 2; dev++) {
                kara_batch b = step ? kara_batch_one_sequence(&tok, 1, n_prompt + step - 1, 0)
                                    : kara_batch_one_sequence(prompt, n_prompt, 0, 0);
                if (kara_decode(c[dev], &b) != KARA_OK) {
                    fprintf(stderr, "test_cuda_score: %s decode: %s\n", name, kara_last_error());
                    exit(1);
                }
                bool t = false;
                pick[dev] = top1(kara_get_logits(c[dev], -1), n_vocab, &t);
                if (!dev) tie = t;
                kara_context_kv_stats(c[dev], &st[dev]);
            }
            ties += tie;
            if (!tie) same_tokens = pick[0] == pick[1];
            const kr_kv_seq *q0 = &c[0]->kv.seqs[0], *q1 = &c[1]->kv.seqs[0];
            same_cache = q0->n == q1->n && memcmp(q0->pos, q1->pos, (size_t)q0->n * sizeof(int32_t)) == 0 &&
                st[0].events == st[1].events && st[0].slots_evicted == st[1].slots_evicted;
            tok = pick[0];
        }
        printf("test_cuda_score: %s: %d steps in lockstep, %d near ties not compared (events %llu, evicted %llu)\n",
               name, step, ties, (unsigned long long)st[0].events, (unsigned long long)st[0].slots_evicted);
        char what[128];
        snprintf(what, sizeof what, "%s: the device's tokens are the CPU's wherever the CPU's is no near tie", name);
        expect(same_tokens, what);
        snprintf(what, sizeof what, "%s: the same positions kept at every step (each eviction's decision)", name);
        expect(same_cache, what);
        snprintf(what, sizeof what, "%s: evicted on both", name);
        expect(st[0].slots_evicted > 0, what);
        kara_context_free(c[0]);
        kara_context_free(c[1]);
    }
}

int main(void) {
    skip_without_gpu("test_cuda_score");
    test_scoring();
    test_moves();
    /* KARA_CUDA_TEST_QUICK=1 (the memcheck run of tools/cuda_device_check.sh,
     * many times slower): the kernels only, not the whole-model runs */
    const char *quick = getenv("KARA_CUDA_TEST_QUICK");
    if (!quick || quick[0] != '1') test_context();
    printf("test_cuda_score: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
