/* eval_kv_run.c - one KV method measured against the `full` reference:
 * teacher-forced replay (KL, top-1 agreement, NLL, memory, event cost),
 * retention per region, free-running divergence and the needle in
 * generated text. Every run starts from the same prompt; the prompt ends
 * at the first single-token decode, as in the runtime (kv_policy.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_args.h"
#include "eval_kv.h"
#include "monotonic_clock.h"

/* Greedy choice, ties to the lowest id (as the sampler at temperature 0). */
static int32_t argmax(const float *x, int32_t n) {
    int32_t b = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Log-softmax in double. Both sides of a comparison go through this same
 * function, so identical logits give a KL of exactly 0. */
static void log_softmax(const float *x, int32_t n, double *out) {
    double m = x[0];
    for (int32_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) sum += exp((double)x[i] - m);
    double lse = m + log(sum);
    for (int32_t i = 0; i < n; i++) out[i] = (double)x[i] - lse;
}

typedef struct run_state {
    const kr_eval_setup *s;
    kara_context *ctx;
    char *err;
    size_t err_size;
    double decode_s; /* wall time of the single-token decodes */
} run_state;

static kara_status fail(run_state *r, kara_status st, const char *what) {
    snprintf(r->err, r->err_size, "%s: %s", what, kara_last_error());
    return st;
}

/* Clear the sequence and decode the prompt in n_batch chunks. */
static kara_status start(run_state *r, int32_t n_batch) {
    kara_seq_clear(r->ctx, 0);
    for (int32_t i = 0; i < r->s->n_prompt; i += n_batch) {
        int32_t n = r->s->n_prompt - i < n_batch ? r->s->n_prompt - i : n_batch;
        kara_batch b = kara_batch_one_sequence(r->s->prompt + i, n, i, 0);
        kara_status st = kara_decode(r->ctx, &b);
        if (st) return fail(r, st, "prompt");
    }
    return KARA_OK;
}

static kara_status feed(run_state *r, int32_t tok, int32_t pos) {
    kara_batch b = kara_batch_one_sequence(&tok, 1, pos, 0);
    double t0 = kr_monotonic_seconds();
    kara_status st = kara_decode(r->ctx, &b);
    r->decode_s += kr_monotonic_seconds() - t0;
    return st ? fail(r, st, "decode") : KARA_OK;
}

/* Teacher-forced replay of the text: per step KL against the reference,
 * top-1 agreement, NLL, slots held; then the retention per region. */
static kara_status replay(run_state *r, const kara_context_params *cp, kr_eval_ref *ref, bool make_ref,
                          kr_eval_row *row, double *lp_ref, double *lp) {
    const kr_eval_setup *s = r->s;
    const int32_t V = s->n_vocab;
    kara_status st = start(r, cp->n_batch);
    if (st) return st;
    double kl_sum = 0.0, kl_comp = 0.0, nll = 0.0, slots = 0.0;
    int32_t agree = 0, n_comp = 0;
    bool evicted_before = false; /* the cache the current logits saw had lost slots */
    for (int32_t t = 0; t < s->n_text; t++) {
        const float *l = kara_get_logits(r->ctx, -1);
        if (!l) return fail(r, KARA_ERR_INTERNAL, "no logits");
        if (make_ref) memcpy(ref->logits + (size_t)t * V, l, (size_t)V * sizeof(float));
        const float *lr = ref->logits + (size_t)t * V;
        log_softmax(lr, V, lp_ref);
        log_softmax(l, V, lp);
        double kl = 0.0;
        for (int32_t v = 0; v < V; v++) kl += exp(lp_ref[v]) * (lp_ref[v] - lp[v]);
        if (kl < 0.0) kl = 0.0; /* rounding on near-identical distributions */
        kl_sum += kl;
        if (kl > row->kl_max) row->kl_max = kl;
        if (evicted_before) {
            kl_comp += kl;
            n_comp++;
        }
        agree += argmax(lr, V) == argmax(l, V);
        nll -= lp[s->text[t]];
        if (t + 1 == s->n_text) break;
        kara_kv_stats ks;
        kara_context_kv_stats(r->ctx, &ks);
        evicted_before = ks.slots_evicted > 0;
        st = feed(r, s->text[t], s->n_prompt + t);
        if (st) return st;
        slots += kara_seq_n_cached(r->ctx, 0);
    }
    row->steps = s->n_text;
    row->kl_mean = kl_sum / s->n_text;
    row->steps_compressed = n_comp;
    row->kl_mean_compressed = n_comp ? kl_comp / n_comp : 0.0;
    row->top1 = (double)agree / s->n_text;
    row->nll_mean = nll / s->n_text;
    if (make_ref) ref->nll_mean = row->nll_mean;
    row->ppl_ratio = exp(row->nll_mean - ref->nll_mean);
    row->mean_slots = s->n_text > 1 ? slots / (s->n_text - 1) : (double)s->n_prompt;
    row->peak_kv_bytes = kara_context_kv_bytes_peak(r->ctx);
    kara_kv_stats ks;
    kara_context_kv_stats(r->ctx, &ks);
    row->events = ks.events;
    row->slots_evicted = ks.slots_evicted;
    row->event_s = ks.event_seconds;
    row->decode_s = r->decode_s;

    /* retention per region of the fed text, the mean over layers (with
     * kara.selection_scope: per_layer each layer holds its own positions) */
    int32_t n_ctx = kara_context_n_ctx(r->ctx), n_layer = kara_model_n_layer(s->model);
    int32_t *pos = malloc((size_t)n_ctx * sizeof *pos);
    if (!pos) return fail(r, KARA_ERR_NOMEM, "positions");
    int32_t lo = s->n_prompt, hi = s->n_prompt + s->n_text - 1; /* positions fed after the prompt */
    int32_t n_reg = (hi - lo + s->region - 1) / s->region;
    if (n_reg > KR_EVAL_MAX_REGIONS) n_reg = KR_EVAL_MAX_REGIONS;
    int32_t kept[KR_EVAL_MAX_REGIONS] = {0};
    for (int32_t l = 0; l < n_layer; l++) {
        int32_t held = kara_seq_layer_positions(r->ctx, 0, l, pos, n_ctx);
        for (int32_t i = 0; i < held && i < n_ctx; i++)
            if (pos[i] >= lo && pos[i] < hi && (pos[i] - lo) / s->region < n_reg) kept[(pos[i] - lo) / s->region]++;
    }
    row->n_regions = n_reg;
    row->region_min = n_reg ? 1.0f : 0.0f;
    for (int32_t g = 0; g < n_reg; g++) {
        /* layers x kept over layers x size: the same float as kept / size when every layer agrees */
        int32_t a = lo + g * s->region, b = a + s->region < hi ? a + s->region : hi;
        row->region_kept[g] = (float)kept[g] / (float)(n_layer * (b - a));
        if (row->region_kept[g] < row->region_min) row->region_min = row->region_kept[g];
    }
    free(pos);
    return KARA_OK;
}

/* Greedy generation from the prompt until the first token that differs
 * from the reference's greedy stream (capped at n_free). */
static kara_status free_run(run_state *r, const kara_context_params *cp, kr_eval_ref *ref, bool make_ref,
                            kr_eval_row *row) {
    const kr_eval_setup *s = r->s;
    kara_status st = start(r, cp->n_batch);
    if (st) return st;
    row->first_div = s->n_free;
    for (int32_t i = 0; i < s->n_free; i++) {
        int32_t tok = argmax(kara_get_logits(r->ctx, -1), s->n_vocab);
        if (make_ref) ref->greedy[i] = tok;
        if (tok != ref->greedy[i]) {
            row->first_div = i;
            break;
        }
        if (i + 1 == s->n_free) break;
        st = feed(r, tok, s->n_prompt + i);
        if (st) return st;
    }
    return KARA_OK;
}

/* Teacher-force the filler with the needle at `depth`, then the question;
 * does the greedy answer start with the code? */
static kara_status needle_run(run_state *r, const kara_context_params *cp, float depth, bool *hit, int32_t *digits,
                              float *kept) {
    const kr_eval_setup *s = r->s;
    kara_status st = start(r, cp->n_batch);
    if (st) return st;
    int32_t at = (int32_t)lroundf(depth * (float)s->n_filler), pos = s->n_prompt;
    for (int32_t i = 0; i < s->n_filler + s->n_needle + s->n_question; i++) {
        int32_t tok = i < at                ? s->text[i]
            : i < at + s->n_needle          ? s->needle[i - at]
            : i < s->n_filler + s->n_needle ? s->text[i - s->n_needle]
                                            : s->question[i - s->n_filler - s->n_needle];
        st = feed(r, tok, pos++);
        if (st) return st;
    }
    /* needle tokens still held when the question has been read */
    int32_t n_ctx = kara_context_n_ctx(r->ctx);
    int32_t *p = malloc((size_t)n_ctx * sizeof *p);
    if (!p) return fail(r, KARA_ERR_NOMEM, "positions");
    int32_t a = s->n_prompt + at, b = a + s->n_needle, in = 0, n_layer = kara_model_n_layer(s->model);
    for (int32_t l = 0; l < n_layer; l++) { /* the mean over layers, as for the regions */
        int32_t held = kara_seq_layer_positions(r->ctx, 0, l, p, n_ctx);
        for (int32_t i = 0; i < held && i < n_ctx; i++) in += p[i] >= a && p[i] < b;
    }
    free(p);
    *kept = s->n_needle ? (float)in / (float)(n_layer * s->n_needle) : 0.0f;
    /* greedy answer, as text */
    char answer[256];
    size_t len = 0;
    for (int32_t i = 0; i < s->n_answer; i++) {
        int32_t tok = argmax(kara_get_logits(r->ctx, -1), s->n_vocab);
        char piece[64];
        int32_t n = 0;
        kara_token_to_piece(s->model, tok, piece, sizeof piece, false, &n); /* a longer piece counts as none */
        for (int32_t c = 0; c < n && len + 1 < sizeof answer; c++) answer[len++] = piece[c];
        if (i + 1 == s->n_answer || kara_token_is_eog(s->model, tok)) break;
        st = feed(r, tok, pos++);
        if (st) return st;
    }
    answer[len] = 0;
    const char *ans = answer;
    while (*ans == ' ') ans++;
    int32_t d = 0;
    while (s->code[d] && ans[d] == s->code[d]) d++;
    *digits = d;
    *hit = s->code[d] == 0;
    return KARA_OK;
}

kara_status kr_eval_method(const kr_eval_setup *s, const kara_context_params *cp, kr_eval_ref *ref, bool make_ref,
                           kr_eval_row *row, char *err, size_t err_size) {
    run_state r = {s, NULL, err, err_size, 0.0};
    if (make_ref) {
        memset(ref, 0, sizeof *ref);
        size_t bytes = (size_t)s->n_text * (size_t)s->n_vocab * sizeof(float);
        ref->logits = malloc(bytes);
        ref->greedy = malloc(((size_t)s->n_free + 1) * sizeof(int32_t));
        if (!ref->logits || !ref->greedy) {
            snprintf(err, err_size,
                     "out of memory for the reference logits (%zu bytes: %d steps x %d vocab; "
                     "shorten the text with --max-tokens)",
                     bytes, s->n_text, s->n_vocab);
            return KARA_ERR_NOMEM;
        }
    }
    double *lp = malloc(2 * (size_t)s->n_vocab * sizeof(double));
    if (!lp) {
        snprintf(err, err_size, "out of memory for log-probabilities");
        return KARA_ERR_NOMEM;
    }
    kara_status st = kara_context_create(s->model, cp, &r.ctx);
    if (st) {
        free(lp);
        return fail(&r, st, "context");
    }
    st = replay(&r, cp, ref, make_ref, row, lp, lp + s->n_vocab);
    if (!st) st = free_run(&r, cp, ref, make_ref, row);
    row->n_depths = s->n_depths;
    for (int32_t i = 0; !st && i < s->n_depths; i++)
        st = needle_run(&r, cp, s->depths[i], &row->needle_hit[i], &row->needle_digits[i], &row->needle_kept[i]);
    kara_context_free(r.ctx);
    free(lp);
    return st;
}

void kr_eval_ref_free(kr_eval_ref *ref) {
    free(ref->logits);
    free(ref->greedy);
    memset(ref, 0, sizeof *ref);
}
