/* test_kv_per_layer.c - `kara.selection_scope: per_layer` (ablation A5,
 * docs/KARA_METHOD.md section 7.3): each layer (each scored layer and the
 * unscored ones after it with `layers: stride:N`) scores the window on its
 * own, keeps its own slots and positions; n, the frontier and the block
 * table stay shared. On the seeded random-weight tiny model (4 layers, 4
 * query heads, 2 KV heads, head dim 32):
 *   - layers made identical (same weights, zero output projections so every
 *     layer sees the same input) select exactly what shared scope selects:
 *     positions, K and V of every layer bit for bit;
 *   - planted signals: layer 0 keeps a slot that layer 1 drops and vice
 *     versa, the per-layer positions and the moved keys show it, a slot of
 *     a protected token id survives in every layer;
 *   - the invariants of docs/KARA_METHOD.md section 8 per layer after
 *     every event, window positions equal across layers, unscored layers
 *     following their scored layer (stride 2);
 *   - KV bytes within the budget at every step over long generations, the
 *     per-layer rows counted in kr_kv_policy_bytes;
 *   - 1 and 2 threads give identical tokens, logits and positions;
 *   - retention 1.0 with per_layer is bit-identical to `full`;
 *   - pool pressure with on_pool_exhausted: recompress_history drops, in
 *     each layer, that layer's lowest stored scores;
 *   - per_layer with the threshold trigger (A8) is refused with a message
 *     naming both keys; the baselines ignore the key. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kv_compact.h"
#include "kv_select.h"
#include "test_models.h"
#include "test_util.h"
#include "kv_tuning.h"

#define N_LAYER 4
#define BLOCK_BYTES (N_LAYER * 2 * 16 * 2 * 32 * 2) /* layers x K,V x slots x KV heads x dim x f16 */
#define N_CTX 1024

static const int32_t prompt[6] = {1, 17, 33, 49, 65, 81};
#define P 6

/* The small windows of test_kv_policy.c: an event every 32 generated slots. */
static void a5_params(kara_kv_params *kv, bool per_layer) {
    kara_kv_params_init(kv);
    kv->method = KARA_KV_METHOD_KARA;
    kr_kv_tune(kv)->evict = KARA_KV_EVICT_PER_WINDOW;
    kr_kv_tune(kv)->evict_lag = 0; /* the paper's eager events, which the expected slots below describe */
    kr_test_small_windows(kv);
    kv->budget = 0;
    kr_kv_tune(kv)->per_layer_selection = per_layer;
}

/* The invariants (docs/KARA_METHOD.md section 8) for every layer of seq:
 * positions strictly increasing with the prompt at 0..P-1, the prompt's
 * bytes (every layer) against prompt_ref, blocks held and pool accounting;
 * and the window [F, n) at the same positions in every layer. */
static bool layers_hold(const kara_context *c, int seq, const uint8_t *prompt_ref, const char *what) {
    const kr_kv_seq *s = &c->kv.seqs[seq];
    const kr_kv_policy_seq *q = &c->policy.seqs[seq];
    int protect = q->prompt_marked ? q->n_prompt : 0, frontier = q->prompt_marked ? q->frontier : -1;
    if (protect > s->n) protect = s->n;
    if (frontier > s->n) frontier = s->n;
    bool ok = true;
    const int32_t *pos0 = kr_kv_layer_pos(&c->kv, seq, 0);
    for (int l = 0; l < c->kv.n_layer && ok; l++) {
        const int32_t *pos = kr_kv_layer_pos(&c->kv, seq, l);
        char msg[256];
        ok = CHECK_MSG(kr_test_kv_invariants(c, seq, pos, protect, frontier, l ? NULL : prompt_ref, msg, sizeof msg) ==
                           KARA_OK,
                       "%s, layer %d: %s", what, l, msg);
        for (int j = frontier < 0 ? s->n : frontier; j < s->n && ok; j++)
            ok = CHECK_MSG(pos[j] == pos0[j], "%s: window slot %d at position %d in layer %d, %d in layer 0", what, j,
                           pos[j], l, pos0[j]);
    }
    return ok;
}

typedef struct gen_out {
    int32_t *tokens;   /* n_steps */
    float *logits;     /* n_steps x vocab */
    int32_t *pos;      /* N_LAYER x N_CTX: final positions per layer */
    uint8_t *kv_bytes; /* final K and V of every layer, every held slot */
    int32_t n;         /* slots held at the end */
    uint64_t events, evicted;
} gen_out;

static void gen_out_free(gen_out *o) {
    free(o->tokens);
    free(o->logits);
    free(o->pos);
    free(o->kv_bytes);
    memset(o, 0, sizeof *o);
}

/* Decode n_steps tokens of one sequence after the 6-token prompt: greedy,
 * or the given stream (forced). After every step: the KV bytes within the
 * budget; after every event: the per-layer invariants. */
static bool generate(kara_model *m, const kara_kv_params *kv, int threads, int n_steps, const int32_t *forced,
                     gen_out *out, const char *what) {
    memset(out, 0, sizeof *out);
    kara_context *c = kr_test_kv_context(m, kv, 1, threads, N_CTX);
    if (!CHECK_MSG(c != NULL, "%s: context", what)) return false;
    int V = kara_model_n_vocab(m);
    out->tokens = malloc((size_t)n_steps * sizeof(int32_t));
    out->logits = malloc((size_t)n_steps * V * sizeof(float));
    out->pos = calloc((size_t)N_LAYER * N_CTX, sizeof(int32_t));
    kara_batch pb = kara_batch_one_sequence(prompt, P, 0, 0);
    kara_status st = kara_decode(c, &pb);
    uint8_t *ref = malloc(kr_test_kv_prefix_bytes(c, P));
    kr_test_kv_copy_prefix(c, 0, P, ref);
    bool inv_ok = true, budget_ok = true;
    uint64_t events = 0;
    for (int i = 0; i < n_steps && st == KARA_OK; i++) {
        const float *l = kara_get_logits(c, -1);
        memcpy(out->logits + (size_t)i * V, l, (size_t)V * sizeof(float));
        out->tokens[i] = forced ? forced[i] : kr_test_argmax(l, V);
        kara_batch nb = kara_batch_one_sequence(&out->tokens[i], 1, P + i, 0);
        st = kara_decode(c, &nb);
        if (kv->budget && kara_context_kv_bytes(c) > kv->budget) budget_ok = false;
        if (c->policy.stats.events != events && inv_ok) {
            events = c->policy.stats.events;
            inv_ok = layers_hold(c, 0, ref, what);
        }
    }
    bool ok = CHECK_MSG(st == KARA_OK, "%s: decode failed: %s", what, kara_last_error());
    ok &= CHECK_MSG(inv_ok, "%s: invariants", what);
    ok &= CHECK_MSG(budget_ok, "%s: KV bytes exceeded the budget", what);
    ok &= CHECK_MSG(kv->budget == 0 || kara_context_kv_bytes_peak(c) <= kv->budget, "%s: peak %llu > budget %llu", what,
                    (unsigned long long)kara_context_kv_bytes_peak(c), (unsigned long long)kv->budget);
    out->n = c->kv.seqs[0].n;
    for (int l = 0; l < N_LAYER; l++)
        CHECK_EQ_INT(kara_seq_layer_positions(c, 0, l, out->pos + (size_t)l * N_CTX, N_CTX), out->n);
    out->kv_bytes = malloc(kr_test_kv_prefix_bytes(c, out->n));
    kr_test_kv_copy_prefix(c, 0, out->n, out->kv_bytes);
    out->events = c->policy.stats.events;
    out->evicted = c->policy.stats.slots_evicted;
    free(ref);
    kara_context_free(c);
    return ok;
}

static bool same_rows(const int32_t *a, const int32_t *b, int n) { return !memcmp(a, b, (size_t)n * sizeof *a); }

/* (1) Identical layers: every layer gets the weights of layer 0, and zero
 * output and down projections keep the residual stream at the embedding,
 * so every layer computes the same queries and keys. Per-layer selection
 * must then equal shared selection bit for bit. */
static void test_identical_layers(void) {
    kara_model *m = kr_test_synth_model("tiny", "qwen3", 12, 2048, "tiny-qwen3-a5-same.gguf");
    if (!CHECK(m != NULL)) return;
    const kr_layer *L0 = &m->layers[0];
    void *wo = calloc((size_t)L0->wo.n_rows, L0->wo.row_bytes);
    void *wd = calloc((size_t)L0->w_down.n_rows, L0->w_down.row_bytes);
    for (int l = 0; l < m->hp.n_layer; l++) {
        m->layers[l] = m->layers[0];
        m->layers[l].wo.data = wo;
        m->layers[l].w_down.data = wd;
    }
    /* with zero projections the logits ignore attention: force a varied stream */
    int32_t forced[300];
    for (int i = 0; i < 300; i++) forced[i] = (i * 37 + 11) % kara_model_n_vocab(m);
    const int stride[] = {1, 2};
    for (int t = 0; t < 2; t++) {
        kara_kv_params shared, per;
        a5_params(&shared, false);
        a5_params(&per, true);
        kr_kv_tune(&shared)->layer_stride = kr_kv_tune(&per)->layer_stride = stride[t];
        gen_out a, b;
        bool ok = generate(m, &shared, 1, 300, forced, &a, "identical layers, shared");
        ok &= generate(m, &per, 1, 300, forced, &b, "identical layers, per_layer");
        if (ok) {
            CHECK_MSG(a.events >= 8 && a.evicted > 0, "stride %d: %llu events", stride[t],
                      (unsigned long long)a.events);
            CHECK_EQ_INT(b.events, a.events);
            CHECK_EQ_INT(b.evicted, a.evicted);
            CHECK_EQ_INT(b.n, a.n);
            for (int l = 0; l < N_LAYER; l++)
                CHECK_MSG(same_rows(a.pos + (size_t)l * N_CTX, b.pos + (size_t)l * N_CTX, a.n),
                          "stride %d: layer %d keeps other positions than shared scope", stride[t], l);
            CHECK_MSG(b.n == a.n && !memcmp(a.kv_bytes, b.kv_bytes, (size_t)N_LAYER * a.n * 2 * 2 * 32 * 2),
                      "stride %d: K/V differ from shared scope", stride[t]);
            CHECK_MSG(!memcmp(a.logits, b.logits, (size_t)300 * kara_model_n_vocab(m) * sizeof(float)),
                      "stride %d: logits differ from shared scope", stride[t]);
        }
        gen_out_free(&a);
        gen_out_free(&b);
    }
    kara_model_free(m);
    free(wo);
    free(wd);
}

/* Queries of every window slot (rows of the ring) set to ones in `layer`,
 * keys of the window set to c * ones: c = +1 at slot hi, -1 at slot lo,
 * 0.5 - 0.01 * (F + 31 - j) at the other compressible slots j (the newer,
 * the higher), 0 in the buffer. Every query then sees z_j = c * sqrt(32):
 * hi is attended most, lo least, and the ranking of the rest is known. */
static void plant(kara_context *c, int layer, int F, int n, int hi, int lo) {
    const int hd = c->kv.head_dim, qn = c->policy.n_head * hd, kn = c->kv.n_head_kv * hd;
    for (int slot = F; slot < n; slot++) {
        float *q = kr_kv_policy_query_row(&c->policy, 0, layer, slot, c->kv.seqs[0].pos[slot]);
        if (!CHECK_MSG(q != NULL, "no ring row for slot %d", slot)) return;
        for (int e = 0; e < qn; e++) q[e] = 1.0f;
        float *k = kr_kv_k(&c->kv, layer, 0, slot);
        float v = slot == hi ? 1.0f : slot == lo ? -1.0f : slot < F + 32 ? 0.5f - 0.01f * (float)(F + 31 - slot) : 0.0f;
        for (int e = 0; e < kn; e++) k[e] = v;
    }
}

static int slot_of(const int32_t *pos, int n, int32_t want) {
    for (int j = 0; j < n; j++)
        if (pos[j] == want) return j;
    return -1;
}

/* (2) Planted per-layer signals: slot a is attended in layer 0 and shunned
 * in layer 1, slot b the opposite; a protected token sits between them.
 * With Top-K (kappa 1) and K = 6 each layer keeps exactly: its attended
 * slot, the protected one and the 4 newest others. (A selection that read
 * token ids already moved by another layer would protect a second slot.) */
static void test_planted(kara_model *m) {
    kara_kv_params kv;
    a5_params(&kv, true);
    kv.dtype = KARA_KV_F32;
    kr_kv_tune(&kv)->query_cache_dtype = KARA_KV_F32;
    kr_kv_tune(&kv)->candidate_frac = 1.0f; /* Top-K: the shunned slot cannot ride in a chunk */
    kr_kv_tune(&kv)->value_aware = false;   /* the planted keys steer attention alone; value norms would reorder it */
    kr_kv_tune(&kv)->n_protect_token_ids = 1;
    kr_kv_tune(&kv)->protect_token_ids[0] = 7;
    kara_context *c = kr_test_kv_context(m, &kv, 1, 1, N_CTX);
    if (!CHECK(c != NULL)) return;
    CHECK_EQ_INT(c->kv.n_groups, N_LAYER);
    kara_batch pb = kara_batch_one_sequence(prompt, P, 0, 0);
    bool ok = CHECK(kara_decode(c, &pb) == KARA_OK);
    /* fill a window of 32 compressible + 8 buffer slots with no event yet */
    c->policy.p.interval = 1 << 20;
    for (int i = 0; i < 40 && ok; i++) {
        int32_t tok = i == 15 ? 7 : 100 + i;
        kara_batch one = kara_batch_one_sequence(&tok, 1, P + i, 0);
        ok = CHECK(kara_decode(c, &one) == KARA_OK);
    }
    c->policy.p.interval = 32;
    if (!ok || !CHECK_EQ_INT(c->policy.stats.events, 0)) {
        kara_context_free(c);
        return;
    }
    const int F = c->policy.seqs[0].frontier, n = c->kv.seqs[0].n, a = F + 2, b = F + 29, prot = F + 15;
    CHECK_EQ_INT(F, P);
    CHECK_EQ_INT(n, P + 40);
    const int32_t pa = c->kv.seqs[0].pos[a], pb_ = c->kv.seqs[0].pos[b], pp = c->kv.seqs[0].pos[prot];
    plant(c, 0, F, n, a, b);
    plant(c, 1, F, n, b, a);
    uint8_t *ref = malloc(kr_test_kv_prefix_bytes(c, P));
    kr_test_kv_copy_prefix(c, 0, P, ref);
    CHECK(kr_kv_policy_step(&c->policy) == KARA_OK);
    CHECK_EQ_INT(c->policy.stats.events, 1);
    const int k = kr_kv_keep_count(32, kv.retention, kr_kv_tune(&kv)->min_keep),
              n_new = F + k + kr_kv_tune(&kv)->buffer;
    CHECK_EQ_INT(c->kv.seqs[0].n, n_new);
    CHECK_EQ_INT(c->policy.seqs[0].frontier, F + k);
    const int32_t *pos0 = kr_kv_layer_pos(&c->kv, 0, 0), *pos1 = kr_kv_layer_pos(&c->kv, 0, 1);
    int a0 = slot_of(pos0, n_new, pa), b0 = slot_of(pos0, n_new, pb_);
    int a1 = slot_of(pos1, n_new, pa), b1 = slot_of(pos1, n_new, pb_);
    CHECK_MSG(a0 >= 0 && b0 < 0, "layer 0 should keep position %d (slot %d) and drop %d (slot %d)", pa, a0, pb_, b0);
    CHECK_MSG(b1 >= 0 && a1 < 0, "layer 1 should keep position %d (slot %d) and drop %d (slot %d)", pb_, b1, pa, a1);
    /* the whole frozen region of each layer: window offsets kept */
    const int want0[6] = {2, 15, 27, 28, 30, 31}, want1[6] = {15, 27, 28, 29, 30, 31};
    CHECK_EQ_INT(k, 6);
    for (int t = 0; t < 6 && k == 6; t++) {
        CHECK_MSG(pos0[F + t] == pa - 2 + want0[t], "layer 0 frozen slot %d holds position %d, want %d", F + t,
                  pos0[F + t], pa - 2 + want0[t]);
        CHECK_MSG(pos1[F + t] == pa - 2 + want1[t], "layer 1 frozen slot %d holds position %d, want %d", F + t,
                  pos1[F + t], pa - 2 + want1[t]);
    }
    /* the planted keys moved with their positions, in their own layer */
    const int kn = c->kv.n_head_kv * c->kv.head_dim;
    if (a0 >= 0 && b1 >= 0) {
        const float *k0 = kr_kv_k(&c->kv, 0, 0, a0), *k1 = kr_kv_k(&c->kv, 1, 0, b1);
        bool moved = true;
        for (int e = 0; e < kn; e++) moved &= k0[e] == 1.0f && k1[e] == 1.0f;
        CHECK_MSG(moved, "the attended keys did not move with their positions (layer 0 slot %d, layer 1 slot %d)", a0,
                  b1);
    }
    for (int l = 0; l < N_LAYER; l++)
        CHECK_MSG(slot_of(kr_kv_layer_pos(&c->kv, 0, l), n_new, pp) >= 0,
                  "layer %d dropped the protected token at position %d", l, pp);
    layers_hold(c, 0, ref, "planted");
    /* the public accessors agree */
    int32_t got[N_CTX];
    CHECK_EQ_INT(kara_seq_positions(c, 0, got, N_CTX), n_new);
    CHECK(same_rows(got, pos0, n_new));
    CHECK_EQ_INT(kara_seq_layer_positions(c, 0, 1, got, N_CTX), n_new);
    CHECK(same_rows(got, pos1, n_new));
    CHECK_EQ_INT(kara_seq_layer_positions(c, 0, N_LAYER, got, N_CTX), 0);
    /* decoding goes on, every event keeping the per-layer invariants */
    uint64_t events = c->policy.stats.events;
    int V = kara_model_n_vocab(m);
    for (int i = 0; i < 200 && ok; i++) {
        int32_t tok = kr_test_argmax(kara_get_logits(c, -1), V);
        kara_batch one = kara_batch_one_sequence(&tok, 1, P + 40 + i, 0);
        ok = CHECK_MSG(kara_decode(c, &one) == KARA_OK, "step %d: %s", i, kara_last_error());
        if (c->policy.stats.events != events) {
            events = c->policy.stats.events;
            ok &= layers_hold(c, 0, ref, "planted, later events");
        }
    }
    CHECK(events >= 5);
    free(ref);
    kara_context_free(c);
}

/* (3)-(5) Long generations (300 steps, 9 events) with per_layer inside a
 * budget of the policy's reservations plus 10 blocks: invariants per layer, bytes within budget,
 * 1 vs 2 threads identical; the layers really choose differently; with
 * stride 2 the unscored layers follow their scored layer. */
static void test_budget_threads(kara_model *m) {
    kara_kv_params shared;
    a5_params(&shared, false);
    const kara_kv_method methods[] = {KARA_KV_METHOD_KARA, KARA_KV_METHOD_CHUNKKV};
    for (int mi = 0; mi < 2; mi++)
        for (int stride = 1; stride <= 2 - mi; stride++) { /* kara: strides 1 and 2; chunkkv: 1 */
            kara_kv_params kv;
            a5_params(&kv, true);
            kv.method = methods[mi];
            kr_kv_tune(&kv)->layer_stride = stride;
            shared.method = kv.method;
            kr_kv_tune(&shared)->layer_stride = stride;
            int groups = (N_LAYER + stride - 1) / stride;
            /* the extra groups' positions and stored scores are reserved in the budget */
            uint64_t extra = kr_kv_policy_bytes(&kv, N_LAYER, 4, 2, 32, 1, N_CTX) -
                kr_kv_policy_bytes(&shared, N_LAYER, 4, 2, 32, 1, N_CTX);
            CHECK_EQ_INT(extra, (uint64_t)(groups - 1) * N_CTX * 8);
            kv.budget = kr_kv_budget_for_blocks(&kv, N_LAYER, 4, 2, 32, 1, N_CTX, 10);
            char what[64];
            snprintf(what, sizeof what, "%s per_layer stride %d", kara_kv_method_name(kv.method), stride);
            gen_out o1, o2;
            bool ok = generate(m, &kv, 1, 300, NULL, &o1, what);
            ok &= generate(m, &kv, 2, 300, NULL, &o2, what);
            if (ok) {
                CHECK_MSG(o1.events >= 8, "%s: %llu events", what, (unsigned long long)o1.events);
                CHECK_MSG(!memcmp(o1.tokens, o2.tokens, 300 * sizeof(int32_t)), "%s: tokens differ, 1 vs 2 threads",
                          what);
                CHECK_MSG(!memcmp(o1.logits, o2.logits, (size_t)300 * kara_model_n_vocab(m) * sizeof(float)),
                          "%s: logits differ, 1 vs 2 threads", what);
                CHECK_MSG(o1.n == o2.n && same_rows(o1.pos, o2.pos, N_LAYER * N_CTX),
                          "%s: positions differ, 1 vs 2 threads", what);
                bool differ = false;
                for (int l = 0; l < N_LAYER; l++) {
                    const int32_t *pl = o1.pos + (size_t)l * N_CTX, *g = o1.pos + (size_t)(l - l % stride) * N_CTX;
                    differ |= !same_rows(pl, o1.pos, o1.n);
                    CHECK_MSG(same_rows(pl, g, o1.n), "%s: unscored layer %d differs from its scored layer %d", what, l,
                              l - l % stride);
                }
                CHECK_MSG(differ, "%s: every layer kept the same positions", what);
            }
            gen_out_free(&o1);
            gen_out_free(&o2);
        }
}

/* (6) Retention 1.0: every event keeps every slot, so per_layer must give
 * the logits of `full` bit for bit. */
static void test_retention_one(kara_model *m) {
    kara_kv_params full, k1;
    kara_kv_params_init(&full);
    full.method = KARA_KV_METHOD_FULL;
    full.budget = 0;
    a5_params(&k1, true);
    k1.retention = 1.0f;
    gen_out a, b;
    bool ok = generate(m, &full, 2, 512, NULL, &a, "full");
    ok &= generate(m, &k1, 2, 512, NULL, &b, "per_layer retention 1");
    if (ok) {
        CHECK(b.events >= 10);
        CHECK_MSG(!memcmp(a.logits, b.logits, (size_t)512 * kara_model_n_vocab(m) * sizeof(float)),
                  "per_layer at retention 1.0 differs from full over 512 steps");
    }
    gen_out_free(&a);
    gen_out_free(&b);
}

/* Pool pressure: a pool of 6 blocks with on_pool_exhausted:
 * recompress_history, retention 0.5. min_compressible = interval, so no
 * event can be forced (a due sequence has compressed at the end of the
 * previous step) and every relief is a history recompression: scored
 * history is dropped evenly across the windows (each keeps the same
 * fraction of the slots it had when scored, to the rounding of one slot)
 * and, inside a window, each layer keeps what the method's selection
 * (Token2Chunk) picks on that layer's own stored scores. */
static void test_recompress_history(kara_model *m) {
    kara_kv_params kv;
    a5_params(&kv, true);
    kr_kv_tune(&kv)->min_compressible = 32;
    kv.retention = 0.5f; /* 16 slots of history per event: pressure after a few events, then at every one */
    kr_kv_tune(&kv)->on_pool_exhausted = KARA_POOL_RECOMPRESS_HISTORY;
    kr_kv_tune(&kv)->reads_weight = 0.0f; /* the expected selection below is on the stored scores alone */
    kv.budget = kr_kv_budget_for_blocks(&kv, N_LAYER, 4, 2, 32, 1, N_CTX, 6);
    kara_context *c = kr_test_kv_context(m, &kv, 1, 1, N_CTX);
    if (!CHECK(c != NULL)) return;
    CHECK_EQ_INT(c->kv.n_blocks, 6);
    int V = kara_model_n_vocab(m);
    kara_batch pb = kara_batch_one_sequence(prompt, P, 0, 0);
    bool ok = CHECK(kara_decode(c, &pb) == KARA_OK);
    uint8_t *ref = malloc(kr_test_kv_prefix_bytes(c, P));
    kr_test_kv_copy_prefix(c, 0, P, ref);
    /* before each step: every layer's positions and stored scores, the windows */
    int32_t *pos_before = malloc((size_t)N_LAYER * N_CTX * sizeof(int32_t));
    float *sc_before = malloc((size_t)N_LAYER * N_CTX * sizeof(float));
    int32_t *win_before = malloc(N_CTX * sizeof(int32_t)), *size_before = malloc(N_CTX * sizeof(int32_t));
    int32_t *held = calloc(N_CTX, sizeof(int32_t)), *kept = calloc(N_CTX, sizeof(int32_t));
    int32_t *sel = malloc(N_CTX * sizeof(int32_t));
    size_t scratch_bytes = kr_kv_select_scratch_bytes(N_CTX);
    void *scratch = aligned_alloc(64, (scratch_bytes + 63) / 64 * 64);
    int checked = 0;
    bool differ = false;
    for (int i = 0; i < 400 && ok; i++) {
        const kr_kv_policy_seq *q = &c->policy.seqs[0];
        int F0 = q->frontier, n_win = q->n_win;
        memcpy(pos_before, c->kv.seqs[0].pos, (size_t)N_LAYER * N_CTX * sizeof(int32_t));
        /* the policy's score rows are max_slots long (the budget's slots), the cache's position rows N_CTX */
        memcpy(sc_before, q->scores, (size_t)N_LAYER * (size_t)c->policy.max_slots * sizeof(float));
        memcpy(win_before, q->win, (size_t)c->policy.max_slots * sizeof(int32_t));
        memcpy(size_before, q->win_size, (size_t)c->policy.max_slots * sizeof(int32_t));
        uint64_t rec = c->policy.stats.recompress_events, ev = c->policy.stats.events;
        int32_t tok = kr_test_argmax(kara_get_logits(c, -1), V);
        kara_batch one = kara_batch_one_sequence(&tok, 1, P + i, 0);
        ok = CHECK_MSG(kara_decode(c, &one) == KARA_OK, "step %d: %s", i, kara_last_error());
        if (c->policy.stats.events != ev || c->policy.stats.recompress_events != rec)
            ok &= layers_hold(c, 0, ref, "recompress");
        if (c->policy.stats.recompress_events != rec + 1 || c->policy.stats.events != ev) continue;
        /* one recompression and nothing else: per window, held before and kept after */
        int F = q->frontier;
        memset(held, 0, (size_t)n_win * sizeof(int32_t));
        memset(kept, 0, (size_t)n_win * sizeof(int32_t));
        for (int x = P; x < F0; x++) held[win_before[x]]++;
        for (int x = P; x < F; x++) kept[q->win[x]]++;
        /* the same fraction everywhere: the windows that lost slots keep
         * within one slot's rounding of one fraction, and no window kept
         * whole keeps a larger share than that (it would have given some) */
        double lo = 2, hi = -1;
        int lost = 0;
        for (int w = 0; w < n_win; w++)
            if (kept[w] < held[w]) {
                double r = (double)kept[w] / size_before[w];
                lo = r < lo ? r : lo;
                hi = r > hi ? r : hi;
                lost++;
            }
        ok &= CHECK_MSG(lost > 0, "step %d: a recompression that dropped nothing", i);
        for (int w = 0; w < n_win && ok; w++) {
            double slack = 1.0 / size_before[w];
            if (kept[w] < held[w])
                ok &= CHECK_MSG(hi - lo <= 2.0 * slack + 1e-9, "step %d: window %d keeps %d/%d, range %.3f..%.3f", i, w,
                                kept[w], size_before[w], lo, hi);
            else
                ok &= CHECK_MSG((double)kept[w] / size_before[w] <= hi + slack + 1e-9,
                                "step %d: window %d kept whole at %d/%d above the others' %.3f", i, w, kept[w],
                                size_before[w], hi);
        }
        /* inside each window, each layer keeps its own selection */
        int32_t first_kept[N_LAYER][N_CTX];
        for (int l = 0; l < N_LAYER && ok; l++) {
            const int32_t *pb4 = pos_before + (size_t)l * N_CTX;
            const float *s4 = sc_before + (size_t)l * (size_t)c->policy.max_slots;
            const int32_t *pos = kr_kv_layer_pos(&c->kv, 0, l);
            int t = 0;
            for (int x = P; x < F0 && ok;) {
                int w = win_before[x], y = x;
                while (y < F0 && win_before[y] == w) y++;
                int k = kept[w];
                if (k == y - x) {
                    for (int z = 0; z < k; z++) sel[z] = z;
                } else {
                    ok &= CHECK(kr_kv_select_window_k(&c->policy.p, s4 + x, NULL, NULL, y - x, k, 0, sel, scratch,
                                                      scratch_bytes) == KARA_OK);
                }
                for (int z = 0; z < k && ok; z++, t++) {
                    ok &=
                        CHECK_MSG(pos[P + t] == pb4[x + sel[z]], "step %d layer %d: slot %d holds position %d, want %d",
                                  i, l, P + t, pos[P + t], pb4[x + sel[z]]);
                    first_kept[l][t] = pb4[x + sel[z]];
                }
                x = y;
            }
            ok &= CHECK_EQ_INT(t, F - P);
            if (l > 0 && !same_rows(first_kept[l], first_kept[0], F - P)) differ = true;
        }
        checked++;
    }
    CHECK_MSG(checked >= 5, "%d recompressions checked (%llu in all)", checked,
              (unsigned long long)c->policy.stats.recompress_events);
    CHECK_MSG(differ, "every layer dropped the same history");
    CHECK(kara_context_kv_bytes_peak(c) <= kv.budget);
    free(pos_before);
    free(sc_before);
    free(win_before);
    free(size_before);
    free(held);
    free(kept);
    free(sel);
    free(scratch);
    free(ref);
    kara_context_free(c);
}

static void test_params(kara_model *m) {
    kara_kv_params kv;
    a5_params(&kv, true);
    kr_kv_tune(&kv)->trigger = KARA_KV_TRIGGER_THRESHOLD;
    kr_kv_tune(&kv)->budget_tokens = 96;
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = N_CTX;
    cp.kv = kv;
    kara_context *c = NULL;
    CHECK_EQ_INT(kara_context_create(m, &cp, &c), KARA_ERR_CONFIG);
    CHECK_MSG(strstr(kara_last_error(), "kara.selection_scope: per_layer") &&
                  strstr(kara_last_error(), "kara.trigger: threshold"),
              "message: %s", kara_last_error());
    /* the baselines and the unscored window methods ignore the key */
    const kara_kv_method ignore[] = {KARA_KV_METHOD_FULL, KARA_KV_METHOD_STREAMING, KARA_KV_METHOD_SNAPKV,
                                     KARA_KV_METHOD_H2O,  KARA_KV_METHOD_RECENT,    KARA_KV_METHOD_RANDOM,
                                     KARA_KV_METHOD_RKV,  KARA_KV_METHOD_LAZY};
    for (int i = 0; i < (int)(sizeof ignore / sizeof ignore[0]); i++) {
        kara_kv_params a, b;
        a5_params(&a, true);
        a5_params(&b, false);
        a.method = b.method = ignore[i];
        CHECK(!kr_kv_params_per_layer(&a));
        CHECK_EQ_INT(kr_kv_n_groups(&a, N_LAYER), 1);
        CHECK_EQ_INT(kr_kv_policy_bytes(&a, N_LAYER, 4, 2, 32, 1, N_CTX),
                     kr_kv_policy_bytes(&b, N_LAYER, 4, 2, 32, 1, N_CTX));
    }
    /* groups: one per scored layer; a stride beyond the layers leaves one */
    a5_params(&kv, true);
    CHECK_EQ_INT(kr_kv_n_groups(&kv, N_LAYER), 4);
    kr_kv_tune(&kv)->layer_stride = 3;
    CHECK_EQ_INT(kr_kv_n_groups(&kv, N_LAYER), 2);
    CHECK_EQ_INT(kr_kv_layers_per_group(&kv, N_LAYER), 3);
    kr_kv_tune(&kv)->layer_stride = 5;
    CHECK_EQ_INT(kr_kv_n_groups(&kv, N_LAYER), 1);
    kr_kv_tune(&kv)->per_layer_selection = false;
    kr_kv_tune(&kv)->layer_stride = 1;
    CHECK_EQ_INT(kr_kv_n_groups(&kv, N_LAYER), 1);
    CHECK_EQ_INT(kr_kv_layers_per_group(&kv, N_LAYER), N_LAYER);
}

int main(void) {
    test_identical_layers();
    kara_model *m = kr_test_synth_model("tiny", "qwen3", 12, 2048, "tiny-qwen3-a5.gguf");
    if (!CHECK(m != NULL)) return kr_test_finish();
    test_planted(m);
    test_budget_threads(m);
    test_retention_one(m);
    test_recompress_history(m);
    test_params(m);
    kara_model_free(m);
    return kr_test_finish();
}
