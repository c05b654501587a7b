/* test_reference_logits.c - every model in ../shared/reference against
 * llama.cpp: teacher-forced logits at every position and the greedy
 * continuation of the prompt.
 *
 * Tolerances (max |dlogit| over all positions and the vocabulary, and the
 * mean |dlogit|), per weight type, and why:
 *   F32 weights: 1e-4 max. Both runtimes compute in f32; only summation
 *     order differs (reference/README.md measured 1e-5 for a float64
 *     forward).
 *   F16 weights: 2e-2 max. Activations are rounded to f16 before the dot
 *     products, as libggml does; the remaining difference is accumulation
 *     order over f16-rounded products.
 *   Quantized weights: per model, about 1.5-2x what the scalar kernels
 *     measured (stories Q8_0 0.18/0.013, Q4_0 0.27/0.021; qwen3-d256 Q8_0
 *     0.033/0.0026, Q6_K 0.069/0.0088, Q4_K_M 0.042/0.0004), well inside
 *     reference/README.md's 0.5 / 0.1. We quantize activations to Q8_0/Q8_K
 *     like libggml, but block-scale rounding and accumulation order still
 *     differ between kernels (libggml's own CPU variants differ by up to
 *     0.18), and the SIMD kernels sum in another order.
 * Top-1 must agree at every position whose reference top1-top2 margin
 * exceeds twice the max tolerance (below that a legitimate rounding
 * difference can swap a near-tie). Greedy ids must agree up to the first
 * step whose reference margin is below that same bound.
 * Runs with 1 and 2 threads; both must pass and give identical logits.
 *
 * tests/cuda/test_cuda_reference_logits.c compiles this file again with
 * REF_CUDA defined: the same checks on runtime.device cuda, tolerances
 * doubled (REF_TOL_SCALE) because the teacher-forced batch goes through f16
 * tiles and cuBLAS there (docs/CUDA.md); skipped (77) without a GPU. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kara.h"
#include "ref_json.h"
#include "test_util.h"

#ifdef REF_CUDA
#define REF_DEVICE KARA_DEVICE_CUDA
#define REF_TOL_SCALE 2.0
#define REF_NAME "test_cuda_reference_logits"
#else
#define REF_DEVICE KARA_DEVICE_CPU
#define REF_TOL_SCALE 1.0
#define REF_NAME "test_reference_logits"
#endif

/* A context on REF_DEVICE; on a machine without a usable GPU the test is
 * skipped (exit 77) at the first one. */
static kara_context *make_context(kara_model *m, kara_context_params *cp) {
    cp->device = REF_DEVICE;
    kara_context *ctx = NULL;
    kara_status st = kara_context_create(m, cp, &ctx);
    if (st == KARA_ERR_UNSUPPORTED && strstr(kara_last_error(), "no CUDA device")) {
        printf("%s: skipped: %s\n", REF_NAME, kara_last_error());
        exit(77);
    }
    CHECK_MSG(st == KARA_OK, "context: %s", kara_last_error());
    return ctx;
}

typedef struct ref_case {
    const char *name;
    const char *model; /* under models/ */
    double max_tol, mean_tol;
} ref_case;

static const ref_case cases[] = {
    {"stories260K", "stories260K.gguf", 1e-4, 1e-5},
    {"derived-stories260K-F16", "derived-stories260K-F16.gguf", 2e-2, 5e-3},
    {"derived-stories260K-Q8_0", "derived-stories260K-Q8_0.gguf", 0.3, 0.03},
    {"derived-stories260K-Q4_0", "derived-stories260K-Q4_0.gguf", 0.45, 0.05},
    {"llama-2-tiny-random", "llama-2-tiny-random.gguf", 2e-2, 5e-3},
    {"tiny-random-llama", "synth/tiny-random-llama.gguf", 1e-4, 1e-5},
    {"tiny-random-qwen2", "synth/tiny-random-qwen2.gguf", 1e-4, 1e-5},
    {"tiny-random-qwen3", "synth/tiny-random-qwen3.gguf", 1e-4, 1e-5},
    {"tiny-random-qwen3-d256", "synth/tiny-random-qwen3-d256.gguf", 1e-4, 1e-5},
    {"tiny-random-qwen3-d256-Q8_0", "synth/tiny-random-qwen3-d256-Q8_0.gguf", 0.1, 0.01},
    {"tiny-random-qwen3-d256-Q6_K", "synth/tiny-random-qwen3-d256-Q6_K.gguf", 0.15, 0.02},
    {"tiny-random-qwen3-d256-Q4_K_M", "synth/tiny-random-qwen3-d256-Q4_K_M.gguf", 0.1, 0.005},
};

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Teacher-forced logits of all T tokens in one batch. Returns a malloc'd
 * [T][V] array or NULL. */
static float *teacher_forced(kara_model *m, const double *toks, int T, int threads) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 256;
    cp.n_batch = 256;
    cp.n_threads = threads;
    cp.kv.dtype = KARA_KV_F32;
    cp.kv.method = KARA_KV_METHOD_FULL;
    kara_context *ctx = make_context(m, &cp);
    if (!ctx) return NULL;
    int32_t *ids = malloc((size_t)T * sizeof *ids), *pos = malloc((size_t)T * sizeof *pos);
    int32_t *seq = calloc((size_t)T, sizeof *seq);
    int8_t *want = malloc((size_t)T);
    for (int i = 0; i < T; i++) {
        ids[i] = (int32_t)toks[i];
        pos[i] = i;
        want[i] = 1;
    }
    kara_batch b = {.n_tokens = T, .tokens = ids, .pos = pos, .seq_id = seq, .logits = want};
    int V = kara_model_n_vocab(m);
    float *out = NULL;
    if (CHECK_MSG(kara_decode(ctx, &b) == KARA_OK, "decode: %s", kara_last_error())) {
        out = malloc((size_t)T * (size_t)V * sizeof *out);
        for (int i = 0; i < T; i++) memcpy(out + (size_t)i * V, kara_get_logits(ctx, i), (size_t)V * sizeof *out);
    }
    free(ids);
    free(pos);
    free(seq);
    free(want);
    kara_context_free(ctx);
    return out;
}

/* Greedy continuation of the prompt: prompt in one batch, then one token
 * per decode, G tokens, not stopping at end-of-generation tokens. */
static int32_t *greedy(kara_model *m, const double *prompt, int P, int G) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 256;
    cp.n_threads = 1;
    cp.kv.dtype = KARA_KV_F32;
    cp.kv.method = KARA_KV_METHOD_FULL;
    kara_context *ctx = make_context(m, &cp);
    if (!ctx) return NULL;
    int32_t *ids = malloc((size_t)(P + G) * sizeof *ids);
    for (int i = 0; i < P; i++) ids[i] = (int32_t)prompt[i];
    kara_batch b = kara_batch_one_sequence(ids, P, 0, 0);
    int V = kara_model_n_vocab(m);
    int32_t *out = malloc((size_t)G * sizeof *out);
    kara_status st = kara_decode(ctx, &b);
    for (int g = 0; g < G && st == KARA_OK; g++) {
        out[g] = argmax(kara_get_logits(ctx, -1), V);
        kara_batch nb = kara_batch_one_sequence(&out[g], 1, P + g, 0);
        if (g + 1 < G) st = kara_decode(ctx, &nb);
    }
    free(ids);
    kara_context_free(ctx);
    if (st != KARA_OK) {
        free(out);
        return NULL;
    }
    return out;
}

static void run_case(const char *shared, const ref_case *rc) {
    char path[4096], json_path[4096], logits_path[4096];
    snprintf(path, sizeof path, "%s/models/%s", shared, rc->model);
    snprintf(json_path, sizeof json_path, "%s/reference/%s.json", shared, rc->name);
    snprintf(logits_path, sizeof logits_path, "%s/reference/%s.logits.f32", shared, rc->name);
    char *json = kr_test_read_file(json_path, NULL);
    size_t ref_size = 0;
    float *ref = (float *)kr_test_read_file(logits_path, &ref_size);
    if (!CHECK_MSG(json && ref, "%s: reference files missing", rc->name)) return;

    kara_model *m;
    if (!CHECK_MSG(kara_model_load(path, NULL, &m) == KARA_OK, "%s: %s", rc->name, kara_last_error())) return;
    double T_d = 0, V_d = 0;
    kr_ref_number(json, "T", &T_d);
    kr_ref_number(json, "n_vocab", &V_d);
    int T = (int)T_d, V = (int)V_d;
    CHECK_EQ_INT(kara_model_n_vocab(m), V);
    CHECK_EQ_INT(ref_size, (size_t)T * (size_t)V * sizeof(float));
    double *toks, *margins;
    int nt = kr_ref_array(json, "teacher_forced_tokens", &toks);
    kr_ref_array(json, "teacher_forced_top1_margin", &margins);
    CHECK_EQ_INT(nt, T);

    float *got1 = teacher_forced(m, toks, T, 1);
    float *got2 = teacher_forced(m, toks, T, 2);
    if (got1 && got2) {
        double max_d = 0, sum_d = 0, worst_rel = 0;
        int top1_bad = 0, top1_checked = 0;
        for (int i = 0; i < T; i++) {
            const float *r = ref + (size_t)i * V, *g = got1 + (size_t)i * V;
            float lo = r[0], hi = r[0];
            double row_max = 0;
            for (int j = 0; j < V; j++) {
                double d = fabs((double)r[j] - g[j]);
                row_max = d > row_max ? d : row_max;
                sum_d += d;
                lo = r[j] < lo ? r[j] : lo;
                hi = r[j] > hi ? r[j] : hi;
            }
            max_d = row_max > max_d ? row_max : max_d;
            if (hi > lo && row_max / (hi - lo) > worst_rel) worst_rel = row_max / (hi - lo);
            if (margins[i] > 2 * REF_TOL_SCALE * rc->max_tol) {
                top1_checked++;
                if (argmax(g, V) != argmax(r, V)) top1_bad++;
            }
        }
        double mean_d = sum_d / ((double)T * V);
        printf("%-32s max|d| %.3g  mean|d| %.3g  max|d|/spread %.3g  top1 %d/%d\n", rc->name, max_d, mean_d, worst_rel,
               top1_checked - top1_bad, top1_checked);
        const double max_tol = REF_TOL_SCALE * rc->max_tol, mean_tol = REF_TOL_SCALE * rc->mean_tol;
        CHECK_MSG(max_d <= max_tol, "%s: max |dlogit| %.4g > %.4g", rc->name, max_d, max_tol);
        CHECK_MSG(mean_d <= mean_tol, "%s: mean |dlogit| %.4g > %.4g", rc->name, mean_d, mean_tol);
        CHECK_MSG(top1_bad == 0, "%s: top-1 differs at %d of %d positions", rc->name, top1_bad, top1_checked);
        CHECK_MSG(memcmp(got1, got2, (size_t)T * V * sizeof(float)) == 0, "%s: 1 and 2 threads differ", rc->name);
    }

    double *prompt, *gids, *gmargin, G_d = 0;
    int P = kr_ref_array(json, "prompt_ids", &prompt);
    kr_ref_number(json, "G", &G_d);
    int G = (int)G_d;
    kr_ref_array(json, "greedy_ids", &gids);
    kr_ref_array(json, "greedy_top1_margin", &gmargin);
    int32_t *gen = greedy(m, prompt, P, G);
    if (CHECK_MSG(gen != NULL, "%s: greedy generation failed: %s", rc->name, kara_last_error())) {
        int agree = 0;
        for (int g = 0; g < G; g++) {
            if (gen[g] != (int32_t)gids[g]) break;
            agree++;
            if (gmargin[g] < 2 * rc->max_tol) break; /* fragile from here on */
        }
        int firm = 0;
        while (firm < G && gmargin[firm] >= 2 * rc->max_tol) firm++;
        int must = firm;
        printf("%-32s greedy: %d tokens agree (%d required before the first fragile step)\n", rc->name, agree, must);
        CHECK_MSG(agree >= must, "%s: greedy diverges at step %d (required %d)", rc->name, agree, must);
    }
    free(gen);
    free(prompt);
    free(gids);
    free(gmargin);
    free(got1);
    free(got2);
    free(toks);
    free(margins);
    kara_model_free(m);
    free(json);
    free(ref);
}

int main(void) {
    const char *shared = kr_test_require_shared(REF_NAME);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(shared, &cases[i]);
    return kr_test_finish();
}
