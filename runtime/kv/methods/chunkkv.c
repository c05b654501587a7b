/* chunkkv.c - the ChunkKV baseline (docs/KARA_METHOD.md section 11): Kara's
 * windows and scores, kept in fixed chunks of chunk_len slots. */
#include "kv_method.h"
#include "kv_params.h"
#include "kv_tuning.h"
#include "kv_baselines.h"
#include "kv_select_impl.h"
#include "status.h"

/* kv_baselines.h: chunks ranked by their mean score. */
kara_status kr_kv_select_chunks(const float *s, int32_t n_c, int32_t k, int32_t chunk_len, const kr_kv_protect *protect,
                                int32_t *keep, void *scratch, size_t scratch_bytes) {
    const char *who = "chunkkv";
    kr_select_scratch w;
    int32_t left;
    kara_status st =
        kr_kvs_start_ranked(who, s, n_c, k, keep, "chunk_len", chunk_len, protect, scratch, scratch_bytes, &w, &left);
    if (st != KARA_OK || k == 0) return st;

    int32_t n_chunk = 0;
    for (int32_t lo = 0; lo < n_c; lo += chunk_len) {
        int32_t len = lo + chunk_len <= n_c ? chunk_len : n_c - lo;
        double sum = 0.0;
        for (int32_t j = lo; j < lo + len; j++) sum += (double)kr_kvs_score_key(s[j]);
        kr_chunk_entry *c = &w.chunk[n_chunk++];
        c->score = sum / (double)len;
        c->len = len;
        c->lo = lo;
    }
    kr_kvs_take_chunks(&w, n_chunk, n_c, left);
    return kr_kvs_finish_window(who, w.flag, n_c, k, keep);
}

/* It scores with Kara's scorer; kara.score.mode online and online_max
 * (no scorer) are Kara's alone. */
static kara_status check(const kara_kv_params *p) {
    if (kr_score_is_online(kr_kv_tune(p)->score_mode))
        return kr_set_error(KARA_ERR_CONFIG,
                            "method chunkkv scores windows with Kara's scorer; kara.score.mode: %s is method "
                            "kara's only",
                            kr_score_mode_name(kr_kv_tune(p)->score_mode));
    return KARA_OK;
}

/* The window's queries; read tracking sums the newest query's attention. */
static void reserve(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots) {
    const kr_kv_tuning *t = kr_kv_tune(p);
    int32_t stride = kr_kv_layer_stride(t);
    (void)max_slots;
    s->window_method = s->needs_scores = true;
    s->ring_cap = kr_kv_window_slots(p);
    s->score_n = s->ring_cap;
    s->score_buf = t->buffer;
    s->n_scored = (n_layer + stride - 1) / stride;
    s->needs_h2o = t->reads_weight > 0.0f;
}

static kara_status select_window(const kara_kv_params *p, const kr_kv_window_in *in, int32_t k, int32_t *keep,
                                 void *scratch, size_t scratch_bytes) {
    return kr_kv_select_chunks(in->scores, in->n_c, k, kr_kv_tune(p)->chunkkv.chunk_len, in->protect, keep, scratch,
                               scratch_bytes);
}

/* Its settings, under baselines.chunkkv (configs/README.md): the YAML keys
 * with their bounds and help, and their defaults. */
static const key_spec keys[] = {
    {"baselines.chunkkv.chunk_len", K_INT, KR_TUNE(chunkkv.chunk_len), 1, 4096, NULL, 0, "tokens per chunk"},
};

static void defaults(kr_kv_tuning *t) { t->chunkkv.chunk_len = 10; }

const kr_kv_method kr_kvm_chunkkv = {.name = "chunkkv",
                                     .kind = kr_kv_kind_windows,
                                     .check = check,
                                     .reserve = reserve,
                                     .keeps_prompt = kr_kv_keeps_prompt_always,
                                     .select_window = select_window,
                                     .per_layer = true,
                                     .keys = keys,
                                     .n_keys = (int32_t)(sizeof keys / sizeof keys[0]),
                                     .defaults = defaults};
