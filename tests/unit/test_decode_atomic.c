/* Atomic decode under pressure (issue 19): a seeded random driver feeds
 * contexts of several sequences whose KV pool is nearly full - multi-
 * sequence batches, single-token steps, chat turns, batches that must fail
 * (a pool too small, a bad token, sequence, position or size placed at the
 * end of an otherwise good batch), kara_seq_clear and an abort callback
 * firing at a random check - across the KV methods. Before every call each
 * sequence is snapshot (next position, slots, the positions of every layer,
 * the K and V bytes of every slot of every layer, its blocks, the free
 * blocks); after it the context must be what kara.h promises above
 * kara_decode: after a failure nothing appended and, with `full`, eviction
 * on demand and the baselines (streaming, snapkv, h2o), everything as
 * before; under per_window/threshold Kara only slots taken (never changed),
 * and from other sequences only under recompress_history. Every slot ever
 * held must keep the bytes it was written with, and a twin context that
 * sees only the calls that succeed (an aborted batch decoded again counts
 * as one) must stay identical where the contract is exact. Found and fixed
 * with it: an abort left H2O's partial attention sums (forward.c), and a
 * per_window batch failing at one sequence's room left the earlier ones
 * holding blocks for no slot (context.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "context.h"
#include "kara.h"
#include "status.h"
#include "synth_model.h"
#include "test_util.h"
#include "kv_tuning.h"

enum { N_CTX = 160, N_BATCH = 40, MAX_SEQ = 6 };

/* One configuration of the sweep: a KV method, its pool and its seed. */
typedef struct cfg {
    const char *name;
    kara_kv_method method;
    kara_kv_evict evict;
    kara_pool_fallback fallback;
    kara_kv_trigger trigger;
    int32_t n_seq, blocks, seq_tokens, budget_tokens;
    uint64_t seed;
    int steps;
} cfg;

static const cfg k_cfgs[] = {
    {"full", KARA_KV_METHOD_FULL, 0, KARA_POOL_PREEMPT, 0, 4, 20, 0, 0, 11, 500},
    {"kara on_demand", KARA_KV_METHOD_KARA, KARA_KV_EVICT_ON_DEMAND, KARA_POOL_PREEMPT, 0, 4, 16, 96, 0, 12, 500},
    {"kara on_demand recompress", KARA_KV_METHOD_KARA, KARA_KV_EVICT_ON_DEMAND, KARA_POOL_RECOMPRESS_HISTORY, 0, 5, 22,
     72, 0, 13, 500},
    {"kara per_window", KARA_KV_METHOD_KARA, KARA_KV_EVICT_PER_WINDOW, KARA_POOL_PREEMPT, 0, 4, 16, 96, 0, 14, 500},
    {"kara per_window recompress", KARA_KV_METHOD_KARA, KARA_KV_EVICT_PER_WINDOW, KARA_POOL_RECOMPRESS_HISTORY, 0, 6,
     18, 96, 0, 15, 500},
    {"kara threshold recompress", KARA_KV_METHOD_KARA, KARA_KV_EVICT_ON_DEMAND, KARA_POOL_RECOMPRESS_HISTORY,
     KARA_KV_TRIGGER_THRESHOLD, 4, 16, 0, 48, 16, 500},
    {"streaming", KARA_KV_METHOD_STREAMING, 0, KARA_POOL_PREEMPT, 0, 3, 10, 0, 48, 17, 500},
    {"snapkv", KARA_KV_METHOD_SNAPKV, 0, KARA_POOL_PREEMPT, 0, 5, 16, 0, 48, 18, 500},
    {"h2o", KARA_KV_METHOD_H2O, 0, KARA_POOL_PREEMPT, 0, 4, 14, 0, 48, 19, 500},
};

/* What a call was built to do (the failing kinds: what it must fail with). */
enum kind { K_GOOD, K_GEN, K_TOKEN, K_POS_BACK, K_BAD_SEQ, K_PAST_CTX, K_N_BATCH, K_POOL, K_ABORT, K_RETRY, K_COUNT };
static const char *const k_kind_names[K_COUNT] = {"good",         "gen step",   "bad token", "position back",
                                                  "bad sequence", "past n_ctx", "n_batch",   "pool",
                                                  "abort",        "retry"};

static uint64_t rng_next(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}
static int32_t rng_int(uint64_t *s, int32_t n) { return n > 0 ? (int32_t)(rng_next(s) % (uint64_t)n) : 0; }

/* One sequence as the cache holds it. */
typedef struct seq_snap {
    int32_t n_past, n, n_blocks;
    int32_t *pos; /* n_layer rows of N_CTX */
    uint8_t *kv;  /* [slot][layer][K, V] slot_bytes each */
} seq_snap;

typedef struct snap {
    int32_t n_free;
    seq_snap s[MAX_SEQ];
} snap;

/* The state one driver run carries: the context, its twin, the snapshot
 * and, per sequence and position, the bytes the slot was first held with. */
typedef struct run {
    const cfg *c;
    kara_context *ctx, *twin;
    int32_t n_layer, n_vocab;
    size_t slot_bytes, row_bytes; /* row: one slot, every layer, K and V */
    snap before;
    uint8_t *shadow[MAX_SEQ];  /* [pos] row_bytes */
    uint8_t *written[MAX_SEQ]; /* [pos]: shadow holds it */
    int calls[K_COUNT], fails[K_COUNT];
    int violations, twin_off;
} run;

static void snap_alloc(snap *sn, const run *r) {
    for (int32_t s = 0; s < MAX_SEQ; s++) {
        sn->s[s].pos = calloc((size_t)r->n_layer * N_CTX, sizeof(int32_t));
        sn->s[s].kv = calloc((size_t)N_CTX, r->row_bytes);
    }
}
static void snap_free(snap *sn) {
    for (int32_t s = 0; s < MAX_SEQ; s++) {
        free(sn->s[s].pos);
        free(sn->s[s].kv);
    }
}

/* Copy of a sequence: positions of every layer, K and V of every slot. */
static void take_seq(const kara_context *ctx, int32_t s, seq_snap *o, const run *r) {
    const kr_kv_cache *kv = &ctx->kv;
    o->n_past = kara_seq_n_past(ctx, s);
    o->n = kv->seqs[s].n;
    o->n_blocks = kv->seqs[s].n_blocks;
    for (int32_t l = 0; l < r->n_layer; l++)
        memcpy(o->pos + (size_t)l * N_CTX, kr_kv_layer_pos(kv, s, l), (size_t)o->n * 4);
    for (int32_t i = 0; i < o->n; i++)
        for (int32_t l = 0; l < r->n_layer; l++) {
            uint8_t *d = o->kv + (size_t)i * r->row_bytes + (size_t)l * 2 * r->slot_bytes;
            memcpy(d, kr_kv_k(kv, l, s, i), r->slot_bytes);
            memcpy(d + r->slot_bytes, kr_kv_v(kv, l, s, i), r->slot_bytes);
        }
}

static void take(const kara_context *ctx, snap *sn, const run *r) {
    sn->n_free = ctx->kv.n_free;
    for (int32_t s = 0; s < r->c->n_seq; s++) take_seq(ctx, s, &sn->s[s], r);
}

static bool seq_equal(const seq_snap *a, const seq_snap *b, const run *r) {
    if (a->n_past != b->n_past || a->n != b->n || a->n_blocks != b->n_blocks) return false;
    for (int32_t l = 0; l < r->n_layer; l++)
        if (memcmp(a->pos + (size_t)l * N_CTX, b->pos + (size_t)l * N_CTX, (size_t)a->n * 4)) return false;
    return memcmp(a->kv, b->kv, (size_t)a->n * r->row_bytes) == 0;
}

/* Report a broken promise once per line of the log, and count it. */
static void violation(run *r, int step, const char *fmt, const char *what, int32_t seq, int kind, kara_status st) {
    r->violations++;
    if (r->violations <= 12)
        fprintf(stderr, "  [%s] step %d (%s, status %d): %s sequence %d: %s\n", r->c->name, step, k_kind_names[kind],
                st, fmt, seq, what);
}

/* Every slot held must carry exactly the bytes its position was first
 * stored with, at strictly increasing positions below n_past, and its
 * blocks just cover its slots. New positions are recorded first. */
static void check_cache(run *r, int step, int kind, kara_status st, snap *now) {
    const kr_kv_cache *kv = &r->ctx->kv;
    int32_t blocks = kv->n_free;
    for (int32_t s = 0; s < r->c->n_seq; s++) {
        seq_snap *o = &now->s[s];
        blocks += o->n_blocks;
        if (o->n_blocks != kr_kv_blocks_for(kv, o->n))
            violation(r, step, "blocks", "holds blocks for no slot (not released)", s, kind, st);
        for (int32_t l = 0; l < r->n_layer; l++) {
            const int32_t *p = o->pos + (size_t)l * N_CTX;
            for (int32_t i = 0; i < o->n; i++) {
                bool ordered = p[i] >= 0 && p[i] < o->n_past && (i == 0 || p[i] > p[i - 1]);
                if (!ordered) {
                    violation(r, step, "positions", "not increasing or past n_past", s, kind, st);
                    break;
                }
            }
        }
        /* bytes: layer l's slot i holds position pos[l][i] */
        for (int32_t i = 0; i < o->n; i++)
            for (int32_t l = 0; l < r->n_layer; l++) {
                int32_t p = o->pos[(size_t)l * N_CTX + i];
                if (p < 0 || p >= N_CTX) continue;
                const uint8_t *got = o->kv + (size_t)i * r->row_bytes + (size_t)l * 2 * r->slot_bytes;
                uint8_t *sh = r->shadow[s] + (size_t)p * r->row_bytes + (size_t)l * 2 * r->slot_bytes;
                if (!(r->written[s][p] & (1u << l))) {
                    violation(r, step, "slot", "holds a position never written", s, kind, st);
                    continue;
                }
                if (memcmp(got, sh, 2 * r->slot_bytes)) violation(r, step, "bytes", "K/V bytes changed", s, kind, st);
            }
    }
    if (blocks != kv->n_blocks) violation(r, step, "pool", "blocks lost or doubled", -1, kind, st);
}

/* After a successful call: record the batch's new slots in the shadow. */
static void record_new(run *r, const snap *now, const int32_t *seq, const int32_t *pos, int32_t n) {
    for (int32_t e = 0; e < n; e++) {
        const seq_snap *o = &now->s[seq[e]];
        for (int32_t l = 0; l < r->n_layer; l++)
            for (int32_t i = o->n - 1; i >= 0; i--) {
                int32_t p = o->pos[(size_t)l * N_CTX + i];
                if (p < pos[e]) break;
                if (p != pos[e]) continue;
                memcpy(r->shadow[seq[e]] + (size_t)p * r->row_bytes + (size_t)l * 2 * r->slot_bytes,
                       o->kv + (size_t)i * r->row_bytes + (size_t)l * 2 * r->slot_bytes, 2 * r->slot_bytes);
                r->written[seq[e]][p] |= (uint8_t)(1u << l);
            }
    }
}

/* Positions of `now` a subset of `was` in every layer (slots only taken). */
static bool seq_subset(const seq_snap *now, const seq_snap *was, const run *r) {
    if (now->n_past != was->n_past || now->n > was->n) return false;
    for (int32_t l = 0; l < r->n_layer; l++) {
        const int32_t *a = now->pos + (size_t)l * N_CTX, *b = was->pos + (size_t)l * N_CTX;
        int32_t j = 0;
        for (int32_t i = 0; i < now->n; i++) {
            while (j < was->n && b[j] < a[i]) j++;
            if (j == was->n || b[j] != a[i]) return false;
        }
    }
    return true;
}

/* The contract makes a failing call exact (the whole context as before)
 * for `full`, eviction on demand and the baselines; per_window and the
 * threshold trigger may evict first (from the batch's sequences, and
 * under recompress_history from any). */
static bool exact_method(const cfg *c) {
    if (c->method != KARA_KV_METHOD_KARA) return true;
    return c->evict == KARA_KV_EVICT_ON_DEMAND && c->trigger != KARA_KV_TRIGGER_THRESHOLD;
}

static bool message_names(kara_status st, int kind, const char *msg) {
    if (!msg || !msg[0]) return false;
    switch (st) {
    case KARA_ERR_TOKEN: return strstr(msg, "token") != NULL;
    case KARA_ERR_CONTEXT_FULL: return strstr(msg, "full") != NULL || strstr(msg, "context") != NULL;
    case KARA_ERR_KV_BUDGET: return strstr(msg, "KV") != NULL || strstr(msg, "budget") != NULL;
    case KARA_ERR_ABORTED: return strstr(msg, "abort") != NULL;
    case KARA_ERR_ARG:
        return kind == K_N_BATCH ? strstr(msg, "n_batch") != NULL
            : kind == K_BAD_SEQ  ? strstr(msg, "sequence") != NULL
            : kind == K_POS_BACK ? strstr(msg, "position") != NULL
                                 : true;
    default: return true;
    }
}

typedef struct abort_at {
    int calls, fire_at;
} abort_at;
static bool fire(void *user) {
    abort_at *a = user;
    return ++a->calls == a->fire_at;
}

/* A good batch: a few sequences each fed its next tokens (a prompt for an
 * empty one, a token or a chat turn for one that runs), entries of the
 * sequences interleaved at random; K_POOL gives two sequences as many as
 * fit, K_GEN each running sequence one token. */
static int32_t build_good(run *r, uint64_t *rng, int kind, int32_t max, int32_t *tok, int32_t *pos, int32_t *seq) {
    const int32_t n_seq = r->c->n_seq;
    int32_t want[MAX_SEQ] = {0}, next[MAX_SEQ], total = 0;
    int32_t first = rng_int(rng, n_seq);
    for (int32_t k = 0; k < n_seq; k++) {
        int32_t s = (first + k) % n_seq;
        next[s] = kara_seq_n_past(r->ctx, s);
        int32_t room = N_CTX - 1 - next[s], w;
        if (kind == K_GEN)
            w = next[s] > 0 && rng_int(rng, 4) ? 1 : 0;
        else if (kind == K_POOL)
            w = k < 2 ? max : 0;
        else if (rng_int(rng, 3) == 0 && k > 0)
            w = 0;
        else if (next[s] == 0)
            w = 4 + rng_int(rng, 21);
        else
            w = rng_int(rng, 4) ? 1 : 2 + rng_int(rng, 11);
        if (w > room) w = room;
        if (w > max - total) w = max - total;
        if (w < 0) w = 0;
        want[s] = w;
        total += w;
    }
    int32_t n = 0, left[MAX_SEQ];
    memcpy(left, want, sizeof left);
    while (n < total) {
        int32_t s = rng_int(rng, n_seq);
        if (!left[s]) continue;
        seq[n] = s;
        pos[n] = next[s] + want[s] - left[s];
        tok[n] = 3 + rng_int(rng, r->n_vocab - 3);
        left[s]--;
        n++;
    }
    return n;
}

/* Compare the context with its twin, which saw only the calls that
 * succeeded (and the clears): hidden state a failing call left behind
 * shows up here, at once or at a later eviction. */
static void check_twin(run *r, int step, int kind, const snap *now, snap *tw) {
    if (!r->twin || r->twin_off) return;
    take(r->twin, tw, r);
    for (int32_t s = 0; s < r->c->n_seq; s++) {
        bool same = seq_equal(&now->s[s], &tw->s[s], r);
        const kr_kv_policy_seq *a = &r->ctx->policy.seqs[s], *b = &r->twin->policy.seqs[s];
        if (same && a->h2o_acc && b->h2o_acc && r->c->method == KARA_KV_METHOD_H2O)
            same = memcmp(a->h2o_acc, b->h2o_acc, (size_t)now->s[s].n * sizeof(float)) == 0;
        if (same)
            same = a->prompt_marked == b->prompt_marked && a->n_prompt == b->n_prompt && a->frontier == b->frontier &&
                a->n_win == b->n_win;
        if (!same) {
            fprintf(stderr, "  twin: n_past %d/%d n %d/%d blocks %d/%d frontier %d/%d prompt %d/%d n_win %d/%d\n",
                    now->s[s].n_past, tw->s[s].n_past, now->s[s].n, tw->s[s].n, now->s[s].n_blocks, tw->s[s].n_blocks,
                    a->frontier, b->frontier, a->n_prompt, b->n_prompt, a->n_win, b->n_win);
            violation(r, step, "twin", "differs from a context that never saw the failing calls", s, kind, 0);
            r->twin_off = 1; /* one divergence says it; the rest would repeat it */
            return;
        }
    }
}

/* One seeded run of a configuration. */
static void drive(kara_model *m, const cfg *c) {
    run r;
    memset(&r, 0, sizeof r);
    r.c = c;
    r.n_vocab = kara_model_n_vocab(m);
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = N_CTX;
    cp.n_batch = N_BATCH;
    cp.n_seq_max = c->n_seq;
    cp.n_threads = 1; /* bit-identical twin */
    cp.kv.method = c->method;
    kr_kv_tune(&cp.kv)->evict = c->evict;
    kr_kv_tune(&cp.kv)->on_pool_exhausted = c->fallback;
    kr_kv_tune(&cp.kv)->trigger = c->trigger;
    cp.kv.interval = 8;
    kr_kv_tune(&cp.kv)->buffer = 8;
    kr_kv_tune(&cp.kv)->min_compressible = 8;
    cp.kv.retention = 0.5f;
    cp.kv.seq_tokens = c->seq_tokens;
    kr_kv_tune(&cp.kv)->budget_tokens = c->budget_tokens;
    kr_kv_tune(&cp.kv)->trigger_slack = 16;
    kr_kv_tune(&cp.kv)->snapkv.trigger_slack = 16;
    cp.kv.budget = 64u << 20;
    /* the pool: `blocks` blocks past the policy's reservation */
    kara_context *probe = NULL;
    if (!CHECK_MSG(kara_context_create(m, &cp, &probe) == KARA_OK, "[%s] context: %s", c->name, kara_last_error()))
        return;
    kara_kv_stats ks;
    kara_context_kv_stats(probe, &ks);
    uint64_t bpb = ks.pool_bytes / (uint64_t)ks.blocks_total;
    kara_context_free(probe);
    cp.kv.budget = ks.reserved_bytes + (uint64_t)c->blocks * bpb;
    if (!CHECK_MSG(kara_context_create(m, &cp, &r.ctx) == KARA_OK, "[%s] context: %s", c->name, kara_last_error()))
        return;
    if (exact_method(c) && !CHECK(kara_context_create(m, &cp, &r.twin) == KARA_OK)) {
        kara_context_free(r.ctx);
        return;
    }
    r.n_layer = r.ctx->kv.n_layer;
    r.slot_bytes = r.ctx->kv.slot_bytes;
    r.row_bytes = 2 * r.slot_bytes * (size_t)r.n_layer;
    snap now, tw;
    snap_alloc(&r.before, &r);
    snap_alloc(&now, &r);
    snap_alloc(&tw, &r);
    for (int32_t s = 0; s < MAX_SEQ; s++) {
        r.shadow[s] = calloc(N_CTX, r.row_bytes);
        r.written[s] = calloc(N_CTX, 1);
    }
    uint64_t rng = c->seed * 0x9e3779b97f4a7c15ull + 1;
    int32_t tok[N_BATCH + 8], pos[N_BATCH + 8], seq[N_BATCH + 8];
    int8_t logits[N_BATCH + 8];
    int n_clear = 0, kind = K_GOOD, abort_evicted = 0;
    int32_t n = 0;
    kara_batch b;
    bool retry = false;
    for (int step = 0; step < c->steps; step++) {
        int32_t roll = rng_int(&rng, 100);
        if (retry) { /* the batch an abort stopped, again, without the callback */
            retry = false;
            kind = K_RETRY;
            goto decode;
        }
        if (roll < 2) { /* forget a sequence */
            int32_t s = rng_int(&rng, c->n_seq);
            take(r.ctx, &r.before, &r);
            CHECK(kara_seq_clear(r.ctx, s) == KARA_OK);
            if (r.twin) kara_seq_clear(r.twin, s);
            memset(r.written[s], 0, N_CTX);
            take(r.ctx, &now, &r);
            CHECK_EQ_INT(now.s[s].n_past, 0);
            for (int32_t o = 0; o < c->n_seq; o++)
                if (o != s && !seq_equal(&now.s[o], &r.before.s[o], &r))
                    violation(&r, step, "clear", "changed another sequence", o, K_GOOD, 0);
            n_clear++;
            continue;
        }
        kind = roll < 40 ? K_GEN : roll < 55 ? K_GOOD : roll < 85 ? K_TOKEN + (roll - 55) / 5 : K_ABORT;
        n = build_good(&r, &rng, kind,
                       kind == K_GOOD || kind == K_GEN || kind == K_POOL || kind == K_ABORT ? N_BATCH : N_BATCH - 2,
                       tok, pos, seq);
        kara_status expect = KARA_OK;
        int32_t s_last = rng_int(&rng, c->n_seq);
        switch (kind) {
        case K_TOKEN: /* the last entry of a good batch, out of the vocabulary */
            if (n == 0) {
                seq[0] = s_last;
                pos[0] = kara_seq_n_past(r.ctx, s_last);
                n = 1;
            }
            tok[n - 1] = rng_int(&rng, 2) ? r.n_vocab + rng_int(&rng, 100) : -1 - rng_int(&rng, 5);
            expect = KARA_ERR_TOKEN; /* the token is checked before the position */
            break;
        case K_POS_BACK: { /* an entry before its sequence's next position */
            int32_t hi = kara_seq_n_past(r.ctx, s_last);
            for (int32_t e = 0; e < n; e++)
                if (seq[e] == s_last && pos[e] + 1 > hi) hi = pos[e] + 1;
            if (hi == 0) { /* nothing to go back from: a duplicate of the first */
                tok[n] = 5, seq[n] = s_last, pos[n] = 0;
                tok[n + 1] = 6, seq[n + 1] = s_last, pos[n + 1] = 0;
                n += 2;
            } else {
                tok[n] = 7, seq[n] = s_last, pos[n] = rng_int(&rng, hi);
                n++;
            }
            expect = KARA_ERR_ARG;
            break;
        }
        case K_BAD_SEQ:
            tok[n] = 9, pos[n] = 0;
            seq[n] = rng_int(&rng, 2) ? c->n_seq + rng_int(&rng, 4) : -1 - rng_int(&rng, 3);
            n++;
            expect = KARA_ERR_ARG;
            break;
        case K_PAST_CTX:
            tok[n] = 11, seq[n] = s_last, pos[n] = N_CTX + rng_int(&rng, 3);
            n++;
            expect = KARA_ERR_CONTEXT_FULL;
            break;
        case K_N_BATCH: /* good entries, one too many of them */
            while (n <= N_BATCH) {
                tok[n] = 12, seq[n] = s_last, pos[n] = N_CTX - 1;
                n++;
            }
            n += rng_int(&rng, N_BATCH + 8 - n);
            for (int32_t e = N_BATCH + 1; e < n; e++) tok[e] = 12, seq[e] = s_last, pos[e] = N_CTX - 1;
            expect = KARA_ERR_ARG;
            break;
        default: break;
        }
        if (n == 0) continue;
        for (int32_t e = 0; e < n; e++) logits[e] = (int8_t)(rng_int(&rng, 4) == 0);
        b = (kara_batch){
            .n_tokens = n, .tokens = tok, .pos = pos, .seq_id = seq, .logits = rng_int(&rng, 2) ? logits : NULL};
    decode:;
        abort_at ab = {0, 1 + rng_int(&rng, r.n_layer + 2)}; /* n_layer + 1 checks */
        if (kind == K_ABORT) kara_context_set_abort(r.ctx, fire, &ab);
        take(r.ctx, &r.before, &r);
        kr_set_error(KARA_OK, "%s", "");
        kara_status st = kara_decode(r.ctx, &b);
        kara_context_set_abort(r.ctx, NULL, NULL);
        r.calls[kind]++;
        take(r.ctx, &now, &r);
        const char *msg = kara_last_error();
        if (getenv("KR_ATOMIC_TRACE"))
            fprintf(stderr, "%s %d %s n=%d st=%d %s\n", c->name, step, k_kind_names[kind], n, st, msg);
        if (expect != KARA_OK) {
            CHECK_MSG(st == expect, "[%s] step %d %s: status %d, expected %d (%s)", c->name, step, k_kind_names[kind],
                      st, expect, msg);
        } else if (st != KARA_OK) {
            bool allowed = (st == KARA_ERR_KV_BUDGET && kind != K_RETRY) || (kind == K_ABORT && st == KARA_ERR_ABORTED);
            CHECK_MSG(allowed, "[%s] step %d %s: status %d (%s)", c->name, step, k_kind_names[kind], st, msg);
        }
        if (kind == K_ABORT && st == KARA_ERR_ABORTED) {
            CHECK_MSG(ab.calls == ab.fire_at, "[%s] aborted without the callback saying so", c->name);
            /* the documented use: the same batch again, which must give what
             * one uninterrupted call gives (the twin's); Kara always, as
             * what an on-demand abort leaves is the preparation for it */
            retry = c->method == KARA_KV_METHOD_KARA || c->method == KARA_KV_METHOD_SNAPKV || rng_int(&rng, 2);
        }
        if (st != KARA_OK) {
            r.fails[kind]++;
            CHECK_MSG(message_names(st, kind, msg), "[%s] step %d %s: status %d with message '%s'", c->name, step,
                      k_kind_names[kind], st, msg);
            CHECK(kara_get_logits(r.ctx, -1) == NULL || st != KARA_ERR_ABORTED);
        } else {
            record_new(&r, &now, seq, pos, n);
        }
        /* which sequences the batch named */
        bool in_batch[MAX_SEQ] = {false};
        for (int32_t e = 0; e < n; e++)
            if (seq[e] >= 0 && seq[e] < c->n_seq) in_batch[seq[e]] = true;
        bool exact = exact_method(c);
        bool others_exact = exact || c->fallback != KARA_POOL_RECOMPRESS_HISTORY;
        for (int32_t s = 0; s < c->n_seq; s++) {
            const seq_snap *a = &now.s[s], *w = &r.before.s[s];
            if (st != KARA_OK) {
                bool own_evicted = st == KARA_ERR_ABORTED && in_batch[s] && c->method == KARA_KV_METHOD_KARA && exact &&
                    !seq_equal(a, w, &r) && seq_subset(a, w, &r);
                if (own_evicted) {
                    /* on demand makes room within the share (evicts) after
                     * every check and before the forward pass; an abort
                     * then takes out the batch but not the eviction, which
                     * kara.h's "rolled back as above" does not say (see
                     * the report of issue 19 part 4): counted, allowed */
                    abort_evicted++;
                } else if (exact || (!in_batch[s] && others_exact)) {
                    if (!seq_equal(a, w, &r))
                        violation(&r, step, "failed call", "changed (the contract says: as before)", s, kind, st);
                } else if (!seq_subset(a, w, &r)) {
                    violation(&r, step, "failed call", "gained or moved slots", s, kind, st);
                } else if (!seq_equal(a, w, &r) && st != KARA_ERR_KV_BUDGET && st != KARA_ERR_ABORTED) {
                    violation(&r, step, "failed call", "lost slots with a status other than KV_BUDGET", s, kind, st);
                }
            } else if (!in_batch[s]) {
                /* on demand never touches a sequence outside the batch;
                 * pool relief and events may only take slots */
                if (exact ? !seq_equal(a, w, &r) : !seq_subset(a, w, &r))
                    violation(&r, step, "good call", "outside the batch, changed", s, kind, st);
            } else {
                int32_t last = -1;
                for (int32_t e = 0; e < n; e++)
                    if (seq[e] == s && pos[e] > last) last = pos[e];
                if (a->n_past != last + 1) violation(&r, step, "good call", "wrong n_past", s, kind, st);
            }
        }
        if (st != KARA_OK && exact && now.n_free != r.before.n_free && !(st == KARA_ERR_ABORTED && abort_evicted))
            violation(&r, step, "failed call", "free blocks changed", -1, kind, st);
        check_cache(&r, step, kind, st, &now);
        /* the twin gets what succeeded; a failing call it never sees */
        if (r.twin && st == KARA_OK) {
            kara_status st2 = kara_decode(r.twin, &b);
            CHECK_MSG(st2 == KARA_OK, "[%s] step %d: twin status %d (%s)", c->name, step, st2, kara_last_error());
            check_twin(&r, step, kind, &now, &tw);
        }
        /* preempt: a pool that cannot take the batch frees a sequence */
        if (st == KARA_ERR_KV_BUDGET && rng_int(&rng, 2)) {
            int32_t s = 0;
            for (int32_t o = 1; o < c->n_seq; o++)
                if (now.s[o].n_blocks > now.s[s].n_blocks) s = o;
            kara_seq_clear(r.ctx, s);
            if (r.twin) kara_seq_clear(r.twin, s);
            memset(r.written[s], 0, N_CTX);
            n_clear++;
        }
        for (int32_t s = 0; s < c->n_seq; s++)
            if (kara_seq_n_past(r.ctx, s) >= N_CTX - 2 && rng_int(&rng, 2)) {
                kara_seq_clear(r.ctx, s);
                if (r.twin) kara_seq_clear(r.twin, s);
                memset(r.written[s], 0, N_CTX);
                n_clear++;
            }
    }
    kara_kv_stats st_end;
    kara_context_kv_stats(r.ctx, &st_end);
    int total = 0, failed = 0;
    for (int k = 0; k < K_COUNT; k++) total += r.calls[k], failed += r.fails[k];
    printf("%-28s %d blocks, %d calls, %d failed (token %d, pos %d, seq %d, ctx %d, n_batch %d, pool %d/%d, "
           "abort %d/%d, retry %d/%d, good %d/%d), %d clears, %llu events (%llu forced, %llu recompress), %llu "
           "evicted, %d aborts kept an eviction, violations %d\n",
           c->name, st_end.blocks_total, total, failed, r.fails[K_TOKEN], r.fails[K_POS_BACK], r.fails[K_BAD_SEQ],
           r.fails[K_PAST_CTX], r.fails[K_N_BATCH], r.fails[K_POOL], r.calls[K_POOL], r.fails[K_ABORT],
           r.calls[K_ABORT], r.fails[K_RETRY], r.calls[K_RETRY], r.fails[K_GOOD] + r.fails[K_GEN],
           r.calls[K_GOOD] + r.calls[K_GEN], n_clear, (unsigned long long)st_end.events,
           (unsigned long long)st_end.forced_events, (unsigned long long)st_end.recompress_events,
           (unsigned long long)st_end.slots_evicted, abort_evicted, r.violations);
    CHECK_MSG(r.violations == 0, "[%s] %d violations of the decode contract", c->name, r.violations);
    for (int32_t s = 0; s < MAX_SEQ; s++) {
        free(r.shadow[s]);
        free(r.written[s]);
    }
    snap_free(&r.before);
    snap_free(&now);
    snap_free(&tw);
    kara_context_free(r.twin);
    kara_context_free(r.ctx);
}

int main(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/atomic.gguf", kr_test_tmpdir());
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    kr_synth_preset(&sp, "tiny");
    char err[256];
    kara_model *m = NULL;
    clock_t t0 = clock();
    if (CHECK_MSG(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK, "synth: %s", err) &&
        CHECK(kara_model_load(path, NULL, &m) == KARA_OK)) {
        for (size_t i = 0; i < sizeof k_cfgs / sizeof k_cfgs[0]; i++) drive(m, &k_cfgs[i]);
    }
    printf("%.2f s of CPU\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    kara_model_free(m);
    return kr_test_finish();
}
