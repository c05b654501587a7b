/* score_case.c - random scoring spans and their CPU reference (score_case.h). */
#include "score_case.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kv_quant.h"

static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float gauss(uint64_t *s) {
    double u = (double)(next(s) >> 11) / 9007199254740992.0, v = (double)(next(s) >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v));
}

static void random_row(uint64_t *s, kara_kv_dtype t, void *row, int64_t n, float amp) {
    float *x = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = amp * gauss(s);
    kr_kv_row_store(t, x, row, n);
    free(x);
}

void kr_score_case_make(kr_score_case *c, uint64_t seed, int32_t n_w, int32_t n_buf, int32_t n_q, int32_t n_head,
                        int32_t n_head_kv, int32_t head_dim, int32_t n_sink, kara_kv_dtype kv_type,
                        kara_kv_dtype q_type, const kr_kv_score_opts *opts, float amp) {
    memset(c, 0, sizeof *c);
    uint64_t s = seed;
    c->n_w = n_w;
    c->n_buf = n_buf;
    c->n_q = n_q;
    c->n_head = n_head;
    c->n_head_kv = n_head_kv;
    c->head_dim = head_dim;
    c->n_sink = n_sink;
    c->kv_type = kv_type;
    c->q_type = q_type;
    c->opts = *opts;
    c->block_size = 16;
    c->first = n_sink + (int32_t)(next(&s) % 40); /* the window after the sinks and some history */
    const int32_t n_slots = c->first + n_w, n_blocks = (n_slots + c->block_size - 1) / c->block_size;
    c->slot_bytes = kr_kv_row_bytes(kv_type, (int64_t)n_head_kv * head_dim);
    c->block_bytes = 2 * (size_t)c->block_size * c->slot_bytes;
    c->pool_bytes = (size_t)(n_blocks + 3) * c->block_bytes; /* spare blocks: the table is not the identity */
    c->pool = calloc(1, c->pool_bytes);
    c->table = malloc((size_t)(n_blocks + 3) * sizeof(int32_t));
    for (int32_t b = 0; b < n_blocks + 3; b++) c->table[b] = b;
    for (int32_t b = n_blocks + 2; b > 0; b--) { /* shuffle */
        int32_t j = (int32_t)(next(&s) % (uint64_t)(b + 1)), t = c->table[b];
        c->table[b] = c->table[j];
        c->table[j] = t;
    }
    for (int32_t slot = 0; slot < n_slots; slot++) {
        uint8_t *k = c->pool + (size_t)c->table[slot / c->block_size] * c->block_bytes +
            (size_t)(slot % c->block_size) * c->slot_bytes;
        random_row(&s, kv_type, k, (int64_t)n_head_kv * head_dim, amp);
        random_row(&s, kv_type, k + (size_t)c->block_size * c->slot_bytes, (int64_t)n_head_kv * head_dim, amp);
    }
    c->key_offs = malloc((size_t)(n_sink + n_w) * sizeof(int64_t));
    for (int32_t r = 0; r < n_sink + n_w; r++) {
        const int32_t slot = r < n_sink ? r : c->first + r - n_sink;
        c->key_offs[r] = (int64_t)c->table[slot / c->block_size] * (int64_t)c->block_bytes +
            (int64_t)(slot % c->block_size) * (int64_t)c->slot_bytes;
    }
    c->ring_cap = n_w + (int32_t)(next(&s) % 8);
    c->q_first = 1000 + (int64_t)(next(&s) % (uint64_t)c->ring_cap); /* wraps for most starts */
    c->q_row_bytes = kr_kv_row_bytes(q_type, (int64_t)n_head * head_dim);
    c->ring_bytes = (size_t)c->ring_cap * c->q_row_bytes;
    c->ring = calloc(1, c->ring_bytes);
    for (int32_t i = n_w - n_q; i < n_w; i++)
        random_row(&s, q_type, c->ring + (size_t)((c->q_first + i) % c->ring_cap) * c->q_row_bytes,
                   (int64_t)n_head * head_dim, amp);
}

kara_status kr_score_case_cpu(const kr_score_case *c, float *layer_out) {
    kr_kv_score_shape sh = {c->n_w, c->n_buf, c->n_head, c->n_head_kv, c->head_dim, c->n_sink};
    kr_kv_rows q = {c->q_type, c->ring, c->q_row_bytes, 0, c->q_first, c->ring_cap, NULL, 0, 0};
    kr_kv_rows k = {c->kv_type, c->pool, c->slot_bytes, 0, c->first, 0, c->table, c->block_size, c->block_bytes};
    kr_kv_rows sink = k;
    sink.first = 0;
    size_t bytes = kr_kv_score_scratch_bytes_q(&sh, c->n_q, 1);
    void *scratch = malloc(bytes);
    kr_kv_score_job job;
    kara_status st = kr_kv_score_prepare_q(&job, &sh, c->n_q, &c->opts, &q, &k, &sink, scratch, bytes, 1);
    if (!st) {
        if (c->opts.value_aware) {
            job.v = k;
            job.v.base = c->pool + (size_t)c->block_size * c->slot_bytes;
        }
        kr_kv_score_run(&job, layer_out, NULL);
    }
    free(scratch);
    return st;
}

void kr_score_case_free(kr_score_case *c) {
    free(c->pool);
    free(c->table);
    free(c->ring);
    free(c->key_offs);
    memset(c, 0, sizeof *c);
}

float kr_score_case_worst(const float *got, const float *ref, int32_t n, int32_t *at) {
    float worst = 0.0f;
    *at = 0;
    for (int32_t j = 0; j < n; j++) {
        const float e = fabsf(got[j] - ref[j]) / (1.0f + fabsf(ref[j]));
        if (isnan(worst)) break; /* NaN is the worst: keep the first */
        if (isnan(e) || e > worst) {
            worst = e;
            *at = j;
        }
    }
    return worst;
}
