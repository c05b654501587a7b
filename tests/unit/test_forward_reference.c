/* test_forward_reference.c - the forward pass against a plain
 * double-precision transformer written here from the architecture
 * definitions, on synthetic models this project writes itself (no
 * ../shared needed): llama, qwen2 and qwen3, F32 and quantized weights.
 *
 * Also checks the batch contract: one batch of T tokens, T single-token
 * decodes, and two sequences interleaved in one batch give the same logits;
 * and that 1 and 3 threads give the same bits.
 *
 * Tolerances: F32 weights 2e-4 max |dlogit| (f32 vs f64 arithmetic over a
 * 4-layer model whose logits are O(1-10)); F16 5e-2 (activations rounded to
 * f16 before each product, as GGML does); Q8_0 0.15 and Q4_K 0.3 (weights
 * dequantized exactly in the reference, so the difference is the 8-bit
 * activation quantization alone). Top-1 must agree wherever the reference
 * margin exceeds twice the tolerance. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "synth_model.h"
#include "test_util.h"

enum { T = 24 };

/* ---- the double-precision reference ---- */

static double *weight_f64(const kr_weight *w) {
    double *out = malloc((size_t)(w->n_rows * w->n_cols) * sizeof *out);
    float *row = malloc((size_t)w->n_cols * sizeof *row);
    for (int64_t r = 0; r < w->n_rows; r++) { /* repacked at load or not */
        kr_dequantize_matrix_row(w->type, w->data, w->row_bytes, w->n_rows, r, w->n_cols, row);
        for (int64_t c = 0; c < w->n_cols; c++) out[r * w->n_cols + c] = row[c];
    }
    free(row);
    return out;
}

static void matvec(const kr_weight *w, const double *x, double *y) {
    double *W = weight_f64(w);
    for (int64_t r = 0; r < w->n_rows; r++) {
        double s = 0;
        for (int64_t c = 0; c < w->n_cols; c++) s += W[r * w->n_cols + c] * x[c];
        y[r] = s;
    }
    free(W);
}

static void rmsnorm(double *y, const double *x, const float *w, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double sc = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * sc * w[i];
}

static void rope(double *v, int pos, const kr_hparams *hp) {
    int half = hp->rope_dim / 2;
    for (int j = 0; j < half; j++) {
        double theta = pos * pow(hp->rope_freq_base, -2.0 * j / hp->rope_dim);
        int a = hp->rope_neox ? j : 2 * j, b = hp->rope_neox ? j + half : 2 * j + 1;
        double x0 = v[a], x1 = v[b];
        v[a] = x0 * cos(theta) - x1 * sin(theta);
        v[b] = x0 * sin(theta) + x1 * cos(theta);
    }
}

/* Logits [T][V] for tokens at positions 0..T-1 of one sequence. */
static double *reference_forward(const kara_model *m, const int32_t *toks) {
    const kr_hparams *hp = &m->hp;
    int E = hp->n_embd, HD = hp->head_dim, QD = hp->n_head * HD, KVD = hp->n_head_kv * HD, V = hp->n_vocab;
    double *x = calloc((size_t)T * E, sizeof *x), *xn = malloc((size_t)E * sizeof *xn);
    double *K = malloc((size_t)T * KVD * sizeof *K), *Vv = malloc((size_t)T * KVD * sizeof *Vv);
    double *q = malloc((size_t)T * QD * sizeof *q), *att = malloc((size_t)QD * sizeof *att);
    double *proj = malloc((size_t)(E > hp->n_ff ? E : hp->n_ff) * sizeof *proj);
    double *g = malloc((size_t)hp->n_ff * sizeof *g), *u = malloc((size_t)hp->n_ff * sizeof *u);
    double *logits = malloc((size_t)T * V * sizeof *logits);
    float *row = malloc((size_t)E * sizeof *row);
    for (int t = 0; t < T; t++) {
        kr_dequantize_matrix_row(m->tok_embd.type, m->tok_embd.data, m->tok_embd.row_bytes, m->tok_embd.n_rows, toks[t],
                                 E, row);
        for (int i = 0; i < E; i++) x[t * E + i] = row[i];
    }
    for (int il = 0; il < hp->n_layer; il++) {
        const kr_layer *L = &m->layers[il];
        for (int t = 0; t < T; t++) {
            rmsnorm(xn, x + t * E, L->attn_norm, E, hp->rms_eps);
            matvec(&L->wq, xn, q + t * QD);
            matvec(&L->wk, xn, K + t * KVD);
            matvec(&L->wv, xn, Vv + t * KVD);
            for (int i = 0; L->bq && i < QD; i++) q[t * QD + i] += L->bq[i];
            for (int i = 0; L->bk && i < KVD; i++) K[t * KVD + i] += L->bk[i];
            for (int i = 0; L->bv && i < KVD; i++) Vv[t * KVD + i] += L->bv[i];
            for (int h = 0; h < hp->n_head; h++) {
                double *qh = q + t * QD + h * HD;
                if (L->q_norm) rmsnorm(qh, qh, L->q_norm, HD, hp->rms_eps);
                rope(qh, t, hp);
            }
            for (int h = 0; h < hp->n_head_kv; h++) {
                double *kh = K + t * KVD + h * HD;
                if (L->k_norm) rmsnorm(kh, kh, L->k_norm, HD, hp->rms_eps);
                rope(kh, t, hp);
            }
        }
        for (int t = 0; t < T; t++) {
            for (int h = 0; h < hp->n_head; h++) {
                int kvh = h / (hp->n_head / hp->n_head_kv);
                double p[T], mx = -1e300, sum = 0;
                for (int s = 0; s <= t; s++) {
                    double d = 0;
                    for (int i = 0; i < HD; i++) d += q[t * QD + h * HD + i] * K[s * KVD + kvh * HD + i];
                    p[s] = d / sqrt((double)HD);
                    mx = p[s] > mx ? p[s] : mx;
                }
                for (int s = 0; s <= t; s++) sum += (p[s] = exp(p[s] - mx));
                for (int i = 0; i < HD; i++) {
                    double a = 0;
                    for (int s = 0; s <= t; s++) a += p[s] / sum * Vv[s * KVD + kvh * HD + i];
                    att[h * HD + i] = a;
                }
            }
            matvec(&L->wo, att, proj);
            for (int i = 0; i < E; i++) x[t * E + i] += proj[i];
            rmsnorm(xn, x + t * E, L->ffn_norm, E, hp->rms_eps);
            matvec(&L->w_gate, xn, g);
            matvec(&L->w_up, xn, u);
            for (int i = 0; i < hp->n_ff; i++) g[i] = g[i] / (1 + exp(-g[i])) * u[i];
            matvec(&L->w_down, g, proj);
            for (int i = 0; i < E; i++) x[t * E + i] += proj[i];
        }
    }
    for (int t = 0; t < T; t++) {
        rmsnorm(xn, x + t * E, m->output_norm, E, hp->rms_eps);
        matvec(&m->output, xn, logits + (size_t)t * V);
    }
    free(x);
    free(xn);
    free(K);
    free(Vv);
    free(q);
    free(att);
    free(proj);
    free(g);
    free(u);
    free(row);
    return logits;
}

/* ---- kara's forward pass, three ways ---- */

static kara_context *new_ctx_threads(kara_model *m, int n_seq, kara_kv_dtype dtype, int n_threads) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 64;
    cp.n_seq_max = n_seq;
    cp.n_threads = n_threads;
    cp.kv.dtype = dtype;
    cp.kv.method = KARA_KV_METHOD_FULL;
    kara_context *c = NULL;
    CHECK_MSG(kara_context_create(m, &cp, &c) == KARA_OK, "context: %s", kara_last_error());
    return c;
}

static kara_context *new_ctx(kara_model *m, int n_seq, kara_kv_dtype dtype) {
    return new_ctx_threads(m, n_seq, dtype, 2);
}

/* Logits of the prompt fed at once (all positions) then of 3 more tokens fed
 * one at a time, into out ((T + 3) x V), with n_threads threads. */
static void logits_with_threads(kara_model *m, const int32_t *toks, int n_threads, float *out) {
    const int V = m->hp.n_vocab;
    kara_context *c = new_ctx_threads(m, 1, KARA_KV_F16, n_threads);
    if (!c) return;
    int32_t pos[T + 3];
    int8_t want[T];
    for (int i = 0; i < T + 3; i++) pos[i] = i;
    for (int i = 0; i < T; i++) want[i] = 1;
    kara_batch b = {.n_tokens = T, .tokens = toks, .pos = pos, .seq_id = NULL, .logits = want};
    CHECK(kara_decode(c, &b) == KARA_OK);
    for (int i = 0; i < T; i++) memcpy(out + (size_t)i * V, kara_get_logits(c, i), (size_t)V * sizeof(float));
    for (int i = 0; i < 3; i++) {
        kara_batch one = {.n_tokens = 1, .tokens = &toks[i], .pos = &pos[T + i], .seq_id = NULL, .logits = NULL};
        CHECK(kara_decode(c, &one) == KARA_OK);
        memcpy(out + (size_t)(T + i) * V, kara_get_logits(c, 0), (size_t)V * sizeof(float));
    }
    kara_context_free(c);
}

static int n_tied_interleaved; /* cases whose tied embeddings were interleaved */
static bool g_tied;            /* models written with tied embeddings (one matrix for lookup and output) */

static void check_case(const char *arch, kr_ftype ftype, const char *tname, double tol) {
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    bool k_quant = ftype == KR_FTYPE_MOSTLY_Q4_K_M || ftype == KR_FTYPE_MOSTLY_Q5_K_M || ftype == KR_FTYPE_MOSTLY_Q6_K;
    kr_synth_preset(&sp, k_quant ? "tiny-k" : "tiny"); /* K-quant rows need 256 columns */
    snprintf(sp.arch, sizeof sp.arch, "%s", arch);
    sp.ftype = ftype;
    sp.tied = g_tied;
    sp.seed = 7;
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s-%s%s.gguf", kr_test_tmpdir(), arch, tname, g_tied ? "-tied" : "");
    if (!CHECK_MSG(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK, "write: %s", err)) return;
    kara_model *m;
    if (!CHECK_MSG(kara_model_load(path, NULL, &m) == KARA_OK, "load: %s", kara_last_error())) return;
    /* on AVX-512 the Q4_K matrices are interleaved at load: this case then
     * checks the interleaved kernels against the reference */
    if (ftype == KR_FTYPE_MOSTLY_Q4_K_M && kr_kernels_get()->repack[KR_TYPE_Q4_K])
        CHECK_MSG(m->repacked_bytes > 0, "%s Q4_K_M: no matrix was interleaved at load", arch);
    /* a tied output matrix is interleaved too; the embedding lookup then reads its rows back */
    if (m->output.data == m->tok_embd.data && kr_kernels_get()->repack[kr_layout_source(m->tok_embd.type)] &&
        m->hp.n_vocab % KR_X16_ROWS == 0) {
        CHECK_MSG(m->tok_embd.type != kr_layout_source(m->tok_embd.type) && m->tok_embd.type == m->output.type,
                  "%s %s: tied embeddings were not interleaved", arch, tname);
        n_tied_interleaved++;
    }
    int V = m->hp.n_vocab;
    int32_t toks[T];
    for (int i = 0; i < T; i++) toks[i] = (int32_t)((i * 37 + 11) % V);
    double *ref = reference_forward(m, toks);

    /* (a) one batch, logits everywhere */
    kara_context *c = new_ctx(m, 2, KARA_KV_F32);
    int32_t pos[2 * T], seq[2 * T], ids[2 * T];
    int8_t want[2 * T];
    for (int i = 0; i < T; i++) {
        pos[i] = i;
        seq[i] = 0;
        want[i] = 1;
    }
    kara_batch b = {.n_tokens = T, .tokens = toks, .pos = pos, .seq_id = seq, .logits = want};
    CHECK(kara_decode(c, &b) == KARA_OK);
    float *batch = malloc((size_t)T * V * sizeof *batch);
    for (int i = 0; i < T; i++) memcpy(batch + (size_t)i * V, kara_get_logits(c, i), (size_t)V * sizeof(float));
    double max_d = 0;
    int top1_bad = 0;
    for (int t = 0; t < T; t++) {
        const double *r = ref + (size_t)t * V;
        const float *g = batch + (size_t)t * V;
        int ar = 0, ag = 0, second = -1;
        for (int j = 0; j < V; j++) {
            double d = fabs(r[j] - g[j]);
            max_d = d > max_d ? d : max_d;
            if (r[j] > r[ar]) ar = j;
            if (g[j] > g[ag]) ag = j;
        }
        for (int j = 0; j < V; j++)
            if (j != ar && (second < 0 || r[j] > r[second])) second = j;
        if (ar != ag && r[ar] - r[second] > 2 * tol) top1_bad++;
    }
    printf("%-6s %-5s max|d| vs f64 reference: %.3g (tolerance %.3g)\n", arch, tname, max_d, tol);
    CHECK_MSG(max_d <= tol, "%s %s: max |dlogit| %.4g > %.4g", arch, tname, max_d, tol);
    CHECK_MSG(top1_bad == 0, "%s %s: top-1 differs at %d positions", arch, tname, top1_bad);

    /* (b) token by token on sequence 1 gives the batch's logits. Float
     * weights: to rounding (1e-5 relative). Quantized weights: within the
     * type's tolerance, since the SIMD kernels for one row and for many sum
     * in different orders and a last-bit change can move an activation
     * across an 8-bit rounding boundary. */
    const float inc_tol = ftype == KR_FTYPE_ALL_F32 || ftype == KR_FTYPE_MOSTLY_F16 ? 0.0f : (float)tol;
    bool same = true;
    for (int t = 0; t < T; t++) {
        kara_batch one = {.n_tokens = 1, .tokens = &toks[t], .pos = &pos[t], .seq_id = (int32_t[]){1}, .logits = NULL};
        if (kara_decode(c, &one) != KARA_OK) {
            same = false;
            break;
        }
        const float *g = kara_get_logits(c, 0);
        for (int j = 0; j < V; j++)
            same &= fabsf(g[j] - batch[(size_t)t * V + j]) <= inc_tol + 1e-5f * (1 + fabsf(g[j]));
    }
    CHECK_MSG(same, "%s %s: incremental decode differs from the batch", arch, tname);

    /* (c) two sequences interleaved in one batch equal the single-sequence run */
    kara_seq_clear(c, -1);
    for (int i = 0; i < 2 * T; i++) {
        ids[i] = toks[i / 2];
        pos[i] = i / 2;
        seq[i] = i % 2;
        want[i] = 1;
    }
    kara_batch two = {.n_tokens = 2 * T, .tokens = ids, .pos = pos, .seq_id = seq, .logits = want};
    CHECK(kara_decode(c, &two) == KARA_OK);
    same = true;
    for (int i = 0; i < 2 * T; i++) {
        const float *g = kara_get_logits(c, i);
        for (int j = 0; j < V; j++)
            same &= fabsf(g[j] - batch[(size_t)(i / 2) * V + j]) <= inc_tol + 1e-5f * (1 + fabsf(g[j]));
    }
    CHECK_MSG(same, "%s %s: interleaved sequences differ from a single sequence", arch, tname);
    kara_context_free(c);

    /* (d) an f16 KV cache stays within the type's bound of the reference
     * (f16 rounding of K and V adds about 1e-3 relative error, so the F32
     * bound is widened to 0.02) */
    c = new_ctx(m, 1, KARA_KV_F16);
    kara_batch b16 = {.n_tokens = T, .tokens = toks, .pos = (int32_t[T]){0}, .seq_id = NULL, .logits = NULL};
    int32_t p16[T];
    for (int i = 0; i < T; i++) p16[i] = i;
    b16.pos = p16;
    CHECK(kara_decode(c, &b16) == KARA_OK);
    const float *g = kara_get_logits(c, -1);
    double d16 = 0;
    for (int j = 0; j < V; j++) d16 = fmax(d16, fabs(g[j] - ref[(size_t)(T - 1) * V + j]));
    CHECK_MSG(d16 <= fmax(tol, 0.02), "%s %s: f16 KV logits differ from the reference by %.4g", arch, tname, d16);
    kara_context_free(c);

    /* (e) the thread count changes no bit: threads split the matrix rows by
     * whole groups and attention by sequences and KV heads, and every
     * product is computed the same way in any slice */
    float *l1 = malloc((size_t)(T + 3) * V * sizeof *l1), *l3 = malloc((size_t)(T + 3) * V * sizeof *l3);
    logits_with_threads(m, toks, 1, l1);
    logits_with_threads(m, toks, 3, l3);
    CHECK_MSG(memcmp(l1, l3, (size_t)(T + 3) * V * sizeof *l1) == 0, "%s %s: logits differ between 1 and 3 threads",
              arch, tname);
    free(l1);
    free(l3);

    free(batch);
    free(ref);
    kara_model_free(m);
    remove(path);
}

/* A weight of a type Kara cannot compute (Q2_K) is refused at load with a
 * message naming the tensor and the type. */
static void check_unsupported_type(void) {
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    kr_synth_preset(&sp, "tiny-k");
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/q2k.gguf", kr_test_tmpdir());
    if (!CHECK(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK)) return;
    /* rewrite blk.1.ffn_up.weight's type id in the tensor table: Q2_K is 10,
     * and its blocks (84 bytes per 256) are smaller than F32's, so the data
     * still lies inside the file */
    size_t size = 0;
    char *img = kr_test_read_file(path, &size);
    kara_gguf *g = NULL;
    if (!CHECK(img && kr_gguf_parse(img, size, &g) == KARA_OK)) return;
    const kara_gguf_tensor *t = kara_gguf_find_tensor(g, "blk.1.ffn_up.weight");
    /* the type field follows the name, the rank and the dims */
    size_t type_off = (size_t)t->info_offset + 8 + t->name.len + 4 + 8 * (size_t)t->n_dims;
    kara_gguf_close(g);
    uint32_t q2k = KR_TYPE_Q2_K;
    memcpy(img + type_off, &q2k, 4);
    FILE *f = fopen(path, "wb");
    fwrite(img, 1, size, f);
    fclose(f);
    free(img);
    kara_model *m = NULL;
    CHECK(kara_model_load(path, NULL, &m) == KARA_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(kara_last_error(), "blk.1.ffn_up.weight") && strstr(kara_last_error(), "Q2_K"), "message: %s",
              kara_last_error());
    kara_model_free(m);
}

int main(void) {
    const char *archs[] = {"llama", "qwen2", "qwen3"};
    for (int a = 0; a < 3; a++) {
        check_case(archs[a], KR_FTYPE_ALL_F32, "F32", 2e-4);
        check_case(archs[a], KR_FTYPE_MOSTLY_F16, "F16", 5e-2);
        check_case(archs[a], KR_FTYPE_MOSTLY_Q8_0, "Q8_0", 0.15);
        check_case(archs[a], KR_FTYPE_MOSTLY_Q4_K_M, "Q4_K_M", 0.3);
    }
    /* every other weight type once, on qwen3 (BF16 activations are rounded
     * to bf16 like GGML: 8 bits of mantissa, hence its bound) */
    check_case("qwen3", KR_FTYPE_MOSTLY_BF16, "BF16", 0.1);
    check_case("qwen3", KR_FTYPE_MOSTLY_Q4_0, "Q4_0", 0.3);
    check_case("qwen3", KR_FTYPE_MOSTLY_Q4_1, "Q4_1", 0.3);
    check_case("qwen3", KR_FTYPE_MOSTLY_Q5_0, "Q5_0", 0.3);
    check_case("qwen3", KR_FTYPE_MOSTLY_Q5_1, "Q5_1", 0.3);
    check_case("qwen3", KR_FTYPE_MOSTLY_Q5_K_M, "Q5_K_M", 0.3);
    check_case("qwen3", KR_FTYPE_MOSTLY_Q6_K, "Q6_K", 0.3);
    /* tied embeddings: the output matrix is also looked up by row, and on
     * AVX-512 it is interleaved at load like the others */
    g_tied = true;
    check_case("qwen3", KR_FTYPE_MOSTLY_Q4_K_M, "Q4_K_M", 0.3);
    check_case("qwen3", KR_FTYPE_MOSTLY_Q4_0, "Q4_0", 0.3);
    g_tied = false;
    if (kr_kernels_get()->repack[KR_TYPE_Q6_K]) /* Q4_K_M's tied matrix is Q6_K */
        CHECK_MSG(n_tied_interleaved >= 1, "no tied embedding matrix was interleaved");
    check_unsupported_type();
    printf("tied embeddings interleaved at load in %d cases\n", n_tied_interleaved);
    return kr_test_finish();
}
