/* test_cuda_math_score.c - the host side of the device's window scorer
 * (kernels_cuda/cuda_score.h), run on the CPU in every build.
 *
 * cuda_score.cu computes a layer's scores from kr_cu_score_row_plan (which
 * keys a row's softmax covers, which key it leaves out, which columns it
 * feeds), kr_cu_kv_value / kr_cu_kv_dot / kr_cu_kv_l1 (row elements, logits
 * and value norms of every KV and query-ring type) and kr_cu_score_column
 * (the reduction over tiles, heads and groups). This test runs the kernel's
 * algorithm serially with those same functions (one unit of 32 query rows
 * at a time, probabilities exp(z - max) / sum) and compares the layer
 * vector with the CPU scorer (runtime/kv/kv_score.c) on random paged spans
 * (tests/common/score_case.h) for every mode, softmax set, exclude_self,
 * GQA reduction, value-aware weighting, KV type f32/f16/q8_0/q4_0, query
 * ring type f32/f16/q8_0, partial query suffixes (n_q < n_w) and sinks.
 * Tolerance: |device - cpu| <= 2e-5 * (1 + |cpu|) per score (the CPU forms
 * logits with its SIMD gemm and its softmax multiplies by 1 / sum; both
 * orders differ from the serial one in the last bits).
 * Any mismatch prints the case and the test exits 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_score.h"
#include "score_case.h"
#include "test_util.h"

/* The kernel's algorithm, serially (cuda_score.cu score_units_kernel,
 * score_columns_kernel). */
static void emulate(const kr_score_case *c, float *layer) {
    const int32_t n_c = c->n_w - c->n_buf, d = c->head_dim, g = c->n_head / c->n_head_kv;
    const bool sinks = c->opts.softmax_over == KR_SOFTMAX_WINDOW_PLUS_SINKS && c->n_sink > 0;
    const int32_t ns = sinks ? c->n_sink : 0;
    const int64_t *offs = c->key_offs + (sinks ? 0 : c->n_sink); /* without sinks the window's keys come first */
    const int32_t q_lo = kr_cu_score_q_lo((int)c->opts.mode, c->n_w, n_c, c->n_q);
    const int32_t n_tiles = (c->n_w - q_lo + KR_CU_SCORE_TILE - 1) / KR_CU_SCORE_TILE;
    const int32_t key_hi = kr_cu_score_key_hi((int)c->opts.softmax_over, c->n_w, n_c);
    float *partial = calloc((size_t)c->n_head * n_tiles * n_c, sizeof(float));
    float *z = malloc((size_t)(ns + c->n_w) * sizeof(float)), *qs = malloc((size_t)d * sizeof(float));
    const float scale = 1.0f / sqrtf((float)d);
    for (int32_t u = 0; u < c->n_head * n_tiles; u++) {
        const int32_t head = u / n_tiles, tile = u % n_tiles, h = head / g;
        const int32_t r0 = q_lo + tile * KR_CU_SCORE_TILE;
        const int32_t r1 = r0 + KR_CU_SCORE_TILE < c->n_w ? r0 + KR_CU_SCORE_TILE : c->n_w;
        float *part = partial + (size_t)u * n_c;
        for (int32_t i = r0; i < r1; i++) {
            const kr_cu_score_row p = kr_cu_score_row_plan((int)c->opts.mode, c->opts.exclude_self, i, n_c, key_hi, ns);
            const uint8_t *qrow = c->ring + (size_t)((c->q_first + i) % c->ring_cap) * c->q_row_bytes;
            for (int32_t t = 0; t < d; t++) qs[t] = kr_cu_kv_value((int)c->q_type, qrow, (int64_t)head * d + t) * scale;
            for (int32_t j = 0; j < ns + p.n_keys; j++)
                z[j] = kr_cu_kv_dot((int)c->kv_type, c->pool + offs[j], (int64_t)h * d, qs, d);
            if (p.anti_ok) {
                const int32_t n = ns + p.anti_n, skip = p.anti_skip >= 0 ? ns + p.anti_skip : -1;
                float m = -INFINITY, s = 0.0f, later = 0.0f;
                for (int32_t j = 0; j < n; j++)
                    if (j != skip) m = fmaxf(m, z[j]);
                for (int32_t j = 0; j < n; j++)
                    if (j != skip) s += expf(z[j] - m);
                for (int32_t j = i + 1; j < p.anti_n; j++)
                    if (j != p.anti_skip) later += expf(z[ns + j] - m) / s;
                part[i] += later;
            }
            if (p.main_ok) {
                const int32_t n = ns + p.main_n;
                const int32_t skip = p.main_skip >= 0 && p.main_skip < p.main_n ? ns + p.main_skip : -1;
                float m = -INFINITY, s = 0.0f;
                for (int32_t j = 0; j < n; j++)
                    if (j != skip) m = fmaxf(m, z[j]);
                for (int32_t j = 0; j < n; j++)
                    if (j != skip) s += expf(z[j] - m);
                for (int32_t j = 0; j < p.add_n; j++)
                    if (j != p.add_skip) part[j] += expf(z[ns + j] - m) / s;
            }
        }
    }
    float vn[64];
    for (int32_t j = 0; j < n_c; j++) {
        const uint8_t *vrow = c->pool + offs[ns + j] + (size_t)c->block_size * c->slot_bytes;
        for (int32_t h = 0; h < c->n_head_kv; h++) vn[h] = kr_cu_kv_l1((int)c->kv_type, vrow, (int64_t)h * d, d);
        layer[j] = kr_cu_score_column(partial, j, n_c, n_tiles, c->n_head_kv, g, c->opts.gqa_reduce == KR_REDUCE_MAX,
                                      c->opts.value_aware ? vn : NULL);
    }
    free(partial);
    free(z);
    free(qs);
}

static const char *mode_name[] = {"bidirectional", "two_sided", "causal", "buffer_only"};
static const char *over_name[] = {"window", "compressible", "window_plus_sinks"};
static const char *type_name[] = {"f16", "f32", "q8_0", "q4_0"};

static int n_cases;

static void check_case(uint64_t seed, int32_t n_w, int32_t n_buf, int32_t n_q, int32_t hq, int32_t hkv, int32_t d,
                       int32_t ns, kara_kv_dtype kt, kara_kv_dtype qt, kr_score_mode mode, kr_softmax_over over,
                       bool excl, kr_reduce gqa, bool va) {
    kr_kv_score_opts o;
    kr_kv_score_opts_init(&o);
    o.mode = mode;
    o.softmax_over = over;
    o.exclude_self = excl;
    o.gqa_reduce = gqa;
    o.value_aware = va;
    kr_score_case c;
    kr_score_case_make(&c, seed, n_w, n_buf, n_q, hq, hkv, d, ns, kt, qt, &o, 1.5f);
    const int32_t n_c = n_w - n_buf;
    float *ref = malloc((size_t)n_c * sizeof(float)), *got = malloc((size_t)n_c * sizeof(float));
    CHECK_EQ_INT(kr_score_case_cpu(&c, ref), KARA_OK);
    emulate(&c, got);
    int32_t at = 0;
    const float worst = kr_score_case_worst(got, ref, n_c, &at);
    CHECK_MSG(worst <= 2e-5f,
              "%s over %s, exclude_self %d, gqa %s, value_aware %d, K %s, Q %s, n_w %d n_buf %d n_q %d, %d/%d heads, "
              "d %d, %d sinks: score %d is %.9g, CPU %.9g (error %.3g)",
              mode_name[mode], over_name[over], excl, gqa == KR_REDUCE_MAX ? "max" : "mean", va, type_name[kt],
              type_name[qt], n_w, n_buf, n_q, hq, hkv, d, ns, at, got[at], ref[at], worst);
    n_cases++;
    kr_score_case_free(&c);
    free(ref);
    free(got);
}

/* The per-row rules on their own, at the edges: the first and last rows,
 * the buffer, exclude_self on and off. */
static void test_row_plans(void) {
    /* bidirectional, exclude_self: every key but i, every column but i */
    kr_cu_score_row r = kr_cu_score_row_plan(KR_SCORE_BIDIRECTIONAL, true, 3, 6, 8, 0);
    CHECK(r.main_ok && r.main_n == 8 && r.main_skip == 3 && r.add_n == 6 && r.add_skip == 3 && !r.anti_ok);
    /* a buffer row of bidirectional has no column to leave out */
    r = kr_cu_score_row_plan(KR_SCORE_BIDIRECTIONAL, true, 7, 6, 6, 0);
    CHECK(r.main_skip == -1 && r.add_skip == -1 && r.main_n == 6);
    /* causal row 0 with exclude_self sees nothing (no sinks): no softmax */
    r = kr_cu_score_row_plan(KR_SCORE_CAUSAL, true, 0, 6, 8, 0);
    CHECK(!r.main_ok && r.add_n == 0);
    /* ... but with sinks it has a softmax over the sinks alone */
    r = kr_cu_score_row_plan(KR_SCORE_CAUSAL, true, 0, 6, 8, 4);
    CHECK(r.main_ok && r.main_n == 0 && r.add_n == 0);
    /* causal without exclude_self: keys up to and with i */
    r = kr_cu_score_row_plan(KR_SCORE_CAUSAL, false, 4, 6, 8, 0);
    CHECK(r.main_n == 5 && r.add_n == 5 && r.n_keys == 5);
    /* two_sided: strictly earlier columns in the causal half, the anti-causal
     * half over every key for rows of C only */
    r = kr_cu_score_row_plan(KR_SCORE_TWO_SIDED, false, 4, 6, 8, 0);
    CHECK(r.main_n == 5 && r.add_n == 4 && r.anti_ok && r.anti_n == 8 && r.anti_skip == -1 && r.n_keys == 8);
    r = kr_cu_score_row_plan(KR_SCORE_TWO_SIDED, true, 6, 6, 8, 0);
    CHECK(!r.anti_ok && r.main_n == 6 && r.add_n == 6);
    /* buffer_only reads the buffer's rows, and never rows without queries */
    CHECK_EQ_INT(kr_cu_score_q_lo(KR_SCORE_BUFFER_ONLY, 10, 6, 10), 6);
    CHECK_EQ_INT(kr_cu_score_q_lo(KR_SCORE_BIDIRECTIONAL, 10, 6, 10), 0);
    CHECK_EQ_INT(kr_cu_score_q_lo(KR_SCORE_BIDIRECTIONAL, 10, 6, 3), 7);
    CHECK_EQ_INT(kr_cu_score_key_hi(KR_SOFTMAX_COMPRESSIBLE, 10, 6), 6);
    CHECK_EQ_INT(kr_cu_score_key_hi(KR_SOFTMAX_WINDOW_PLUS_SINKS, 10, 6), 10);
}

int main(void) {
    test_row_plans();
    uint64_t seed = 21000;
    /* every mode x softmax set x exclude_self x GQA reduction, one value-aware
     * setting each, on f16 keys and queries (the defaults' types) */
    for (int mode = 0; mode <= KR_SCORE_BUFFER_ONLY; mode++)
        for (int over = 0; over <= KR_SOFTMAX_WINDOW_PLUS_SINKS; over++)
            for (int excl = 0; excl < 2; excl++)
                for (int gqa = 0; gqa < 2; gqa++)
                    check_case(seed++, 70, 20, 70, 4, 2, 64, 4, KARA_KV_F16, KARA_KV_F16, (kr_score_mode)mode,
                               (kr_softmax_over)over, excl, gqa ? KR_REDUCE_MAX : KR_REDUCE_MEAN,
                               (excl + gqa + over) % 2 == 0);
    /* every KV type x query ring type, under the defaults */
    const kara_kv_dtype qtypes[] = {KARA_KV_F32, KARA_KV_F16, KARA_KV_Q8_0};
    for (int kt = 0; kt <= KARA_KV_Q4_0; kt++)
        for (int qt = 0; qt < 3; qt++)
            check_case(seed++, 45, 13, 45, 8, 2, 32, 0, (kara_kv_dtype)kt, qtypes[qt], KR_SCORE_BIDIRECTIONAL,
                       KR_SOFTMAX_WINDOW, true, KR_REDUCE_MEAN, true);
    /* queries for a suffix only (the threshold trigger, SnapKV's observation
     * window), longer windows over several tiles, MHA, one KV head */
    check_case(seed++, 200, 8, 8, 4, 4, 64, 0, KARA_KV_F16, KARA_KV_F16, KR_SCORE_BUFFER_ONLY, KR_SOFTMAX_WINDOW, false,
               KR_REDUCE_MEAN, false);
    check_case(seed++, 150, 30, 57, 6, 1, 64, 4, KARA_KV_F32, KARA_KV_F32, KR_SCORE_TWO_SIDED,
               KR_SOFTMAX_WINDOW_PLUS_SINKS, true, KR_REDUCE_MAX, true);
    check_case(seed++, 256, 128, 256, 16, 8, 128, 0, KARA_KV_F16, KARA_KV_F16, KR_SCORE_BIDIRECTIONAL,
               KR_SOFTMAX_WINDOW, true, KR_REDUCE_MEAN, true);
    check_case(seed++, 2, 1, 2, 2, 1, 32, 0, KARA_KV_Q8_0, KARA_KV_F16, KR_SCORE_CAUSAL, KR_SOFTMAX_COMPRESSIBLE, true,
               KR_REDUCE_MEAN, false);
    printf("test_cuda_math_score: %d spans\n", n_cases);
    return kr_test_finish();
}
