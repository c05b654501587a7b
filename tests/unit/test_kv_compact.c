/*
 * test_kv_compact.c - the in-place compaction plan and the invariant
 * checker (docs/KARA_METHOD.md section 8): moves go down and in ascending
 * order, never overwrite a source still to be read, produce exactly the
 * layout of section 8;
 * the ring start advances by n_c; a simulated sequence goes through many
 * events (Token2Chunk on random scores) with the invariants checked after
 * each; each invariant violation is reported with its message.
 */
#include <stdlib.h>
#include <string.h>

#include "kv_compact.h"
#include "kv_select.h"
#include "test_util.h"

static uint64_t rng_state = 1;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int irand(int n) { return (int)((rng_next() >> 11) % (uint64_t)n); }

/* A random sorted subset of [0, n_c) of size k. */
static void random_keep(int n_c, int k, int32_t *keep) {
    int c = 0;
    for (int j = 0; j < n_c && c < k; j++)
        if (irand(n_c - j) < k - c) keep[c++] = j; /* selection sampling */
}

/* Callback that copies a slot of a 3-int payload and records the order. */
typedef struct payload {
    int32_t (*rows)[3];
    bool *written;  /* dst written by an earlier move */
    bool clobbered; /* a move read a source an earlier move had overwritten */
    int calls;
} payload;

static void move_payload(void *user, int32_t src, int32_t dst) {
    payload *p = user;
    if (p->written[src]) p->clobbered = true;
    memcpy(p->rows[dst], p->rows[src], sizeof p->rows[0]);
    p->written[dst] = true;
    p->calls++;
}

static void test_plan_random(void) {
    rng_state = 17;
    int bad_layout = 0, bad_order = 0, clobbers = 0;
    for (int it = 0; it < 2000; it++) {
        int F = irand(40), n_c = irand(200), b = irand(40), n = F + n_c + b;
        int k = n_c ? irand(n_c + 1) : 0;
        int32_t *keep = malloc(sizeof(int32_t) * (k + 1));
        random_keep(n_c, k, keep);
        kr_kv_move *moves = malloc(sizeof(kr_kv_move) * (k + b + 1));
        kr_kv_compact_plan plan;
        CHECK_EQ_INT(kr_kv_compact_plan_make(&plan, F, n, b, keep, k, moves), KARA_OK);
        CHECK(plan.new_frontier == F + k && plan.new_n == F + k + b && plan.n_moves <= k + b);
        for (int t = 0; t < plan.n_moves; t++) {
            bool ok = moves[t].dst < moves[t].src && moves[t].dst >= F;
            if (t > 0) ok &= moves[t].src > moves[t - 1].src && moves[t].dst > moves[t - 1].dst;
            bad_order += !ok;
        }
        /* apply to tags through the callback and to a parallel array */
        int32_t(*rows)[3] = malloc(sizeof(*rows) * (n + 1));
        int32_t *pos = malloc(sizeof(int32_t) * (n + 1));
        bool *written = calloc((size_t)n + 1, 1);
        for (int s = 0; s < n; s++) rows[s][0] = s, rows[s][1] = 1000 + s, rows[s][2] = -s, pos[s] = 3 * s + 1;
        payload pl = {rows, written, false, 0};
        kr_kv_compact_apply(&plan, move_payload, &pl);
        kr_kv_compact_apply_array(&plan, pos, sizeof(int32_t));
        clobbers += pl.clobbered;
        CHECK_EQ_INT(pl.calls, plan.n_moves);
        bool ok = true;
        for (int s = 0; s < plan.new_n; s++) {
            int src = s < F ? s : s < F + k ? F + keep[s - F] : n - b + (s - F - k);
            ok &= rows[s][0] == src && rows[s][1] == 1000 + src && rows[s][2] == -src && pos[s] == 3 * src + 1;
        }
        bad_layout += !ok;
        free(keep);
        free(moves);
        free(rows);
        free(pos);
        free(written);
    }
    CHECK_EQ_INT(bad_layout, 0);
    CHECK_EQ_INT(bad_order, 0);
    CHECK_EQ_INT(clobbers, 0);
}

/* The exact moves of a small case. */
static void test_plan_example(void) {
    /* F 4, n 14, b 3: C = slots 4..10 (7), keep {0, 2, 3, 6} -> slots 4, 6, 7, 10 */
    int32_t keep[4] = {0, 2, 3, 6};
    kr_kv_move moves[7];
    kr_kv_compact_plan plan;
    CHECK_EQ_INT(kr_kv_compact_plan_make(&plan, 4, 14, 3, keep, 4, moves), KARA_OK);
    /* 4->4 skipped; 6->5, 7->6, 10->7; buffer 11->8, 12->9, 13->10 */
    kr_kv_move expect[6] = {{6, 5}, {7, 6}, {10, 7}, {11, 8}, {12, 9}, {13, 10}};
    CHECK_EQ_INT(plan.n_moves, 6);
    CHECK(!memcmp(moves, expect, sizeof expect));
    CHECK(plan.new_frontier == 8 && plan.new_n == 11);
    /* stored scores of the new frozen slots */
    float s[7] = {0.5f, 0.1f, 0.7f, 0.6f, 0.2f, 0.3f, 0.9f}, store[14] = {0};
    kr_kv_compact_store_scores(&plan, keep, s, store);
    CHECK(store[4] == 0.5f && store[5] == 0.7f && store[6] == 0.6f && store[7] == 0.9f && store[8] == 0.0f);
    /* keep everything: no moves at all */
    int32_t all[7] = {0, 1, 2, 3, 4, 5, 6};
    CHECK_EQ_INT(kr_kv_compact_plan_make(&plan, 4, 14, 3, all, 7, moves), KARA_OK);
    CHECK_EQ_INT(plan.n_moves, 0);
    CHECK_EQ_INT(plan.new_n, 14);
    /* decode-time use: F 0, b 0, keep over the whole cache */
    int32_t sk[5] = {0, 1, 7, 8, 9};
    CHECK_EQ_INT(kr_kv_compact_plan_make(&plan, 0, 10, 0, sk, 5, moves), KARA_OK);
    CHECK(plan.n_moves == 3 && moves[0].src == 7 && moves[0].dst == 2 && plan.new_n == 5);
}

static void test_plan_errors(void) {
    kr_kv_move moves[8];
    kr_kv_compact_plan plan;
    int32_t unsorted[3] = {0, 3, 2};
    CHECK_EQ_INT(kr_kv_compact_plan_make(&plan, 2, 12, 2, unsorted, 3, moves), KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "keep[2] = 2") != NULL, "message: %s", kara_last_error());
    int32_t outside[2] = {1, 8}; /* n_c = 8: slot 8 is the buffer */
    CHECK_EQ_INT(kr_kv_compact_plan_make(&plan, 2, 12, 2, outside, 2, moves), KARA_ERR_ARG);
    CHECK_EQ_INT(kr_kv_compact_plan_make(&plan, 2, 12, 11, outside, 0, moves), KARA_ERR_ARG);
    int32_t many[9] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    CHECK_EQ_INT(kr_kv_compact_plan_make(&plan, 2, 12, 2, many, 9, moves), KARA_ERR_ARG);
}

static void test_ring(void) {
    /* cap 200, window at ring[150..], n_c 128: the buffer's entries at
     * ring[(150 + 128 + u) % 200] become the new window's first rows */
    CHECK_EQ_INT(kr_kv_ring_first_after(150, 200, 128), 78);
    CHECK_EQ_INT(kr_kv_ring_first_after(0, 200, 0), 0);
    CHECK_EQ_INT(kr_kv_ring_first_after(199, 200, 1), 0);
    /* simulated: ring entries tagged by window slot */
    int32_t ring[40];
    int first = 33, cap = 40, n_w = 20, b = 6, n_c = n_w - b;
    for (int i = 0; i < n_w; i++) ring[(first + i) % cap] = 500 + i;
    int nf = kr_kv_ring_first_after(first, cap, n_c);
    for (int u = 0; u < b; u++) CHECK_EQ_INT(ring[(nf + u) % cap], 500 + n_c + u);
}

/* A sequence through 30 events: append tokens, compress with Token2Chunk on
 * random scores, apply the plan to pos[] and a payload, check the
 * invariants (docs/KARA_METHOD.md section 8) after each event (including
 * that the prompt bytes never change). */
static void test_sequence_events(void) {
    rng_state = 99;
    enum { P = 23, B = 16, INTERVAL = 40, BUF = 8, MAXN = 2048 };
    int32_t *pos = malloc(sizeof(int32_t) * MAXN), *data = malloc(sizeof(int32_t) * MAXN);
    int32_t prompt_ref[P];
    kr_kv_move moves[INTERVAL + BUF];
    int32_t keep[INTERVAL];
    float s[INTERVAL];
    size_t bytes = kr_kv_select_scratch_bytes(INTERVAL);
    void *scr = malloc(bytes);
    int n = 0, F = P, next_pos = 0, pool_total = 400;
    for (; n < P; n++) pos[n] = next_pos, data[n] = 7 * next_pos + 3, next_pos++;
    memcpy(prompt_ref, data, sizeof prompt_ref);
    int events = 0;
    bool all_ok = true;
    for (int step = 0; step < 1500; step++) {
        pos[n] = next_pos, data[n] = 7 * next_pos + 3, next_pos++, n++;
        if (n - F - BUF < INTERVAL) continue;
        int n_c = n - F - BUF;
        for (int j = 0; j < n_c; j++) s[j] = (float)(rng_next() % 1000);
        int k = kr_kv_keep_count(n_c, 0.2f, 4);
        kr_kv_t2c_params tp = {k, 0.5f, 16, 1.0f, NULL};
        CHECK_EQ_INT(kr_kv_select_t2c(s, n_c, &tp, NULL, keep, scr, bytes), KARA_OK);
        kr_kv_compact_plan plan;
        CHECK_EQ_INT(kr_kv_compact_plan_make(&plan, F, n, BUF, keep, k, moves), KARA_OK);
        kr_kv_compact_apply_array(&plan, pos, sizeof(int32_t));
        kr_kv_compact_apply_array(&plan, data, sizeof(int32_t));
        F = plan.new_frontier, n = plan.new_n;
        events++;
        int held = (n + B - 1) / B;
        kr_kv_invariants inv = {pos,  n,         P, F, data, prompt_ref, sizeof prompt_ref, B, held, pool_total - held,
                                held, pool_total};
        char msg[256];
        kara_status st = kr_kv_check_invariants(&inv, msg, sizeof msg);
        if (st != KARA_OK) {
            CHECK_MSG(false, "event %d: %s", events, msg);
            all_ok = false;
            break;
        }
        /* data travelled with its position */
        for (int t = 0; t < n; t++) all_ok &= data[t] == 7 * pos[t] + 3;
    }
    CHECK(all_ok);
    CHECK(events > 30);
    /* every event keeps k + b of n_c + b: the sequence stays small */
    CHECK_MSG(n < P + 2 * (INTERVAL + BUF) + 1500 / 4, "n %d after %d events", n, events);
    free(pos);
    free(data);
    free(scr);
}

static void test_invariant_violations(void) {
    int32_t pos[10] = {0, 1, 2, 3, 7, 9, 12, 13, 20, 21};
    uint8_t prompt[8] = {1, 2, 3, 4, 5, 6, 7, 8}, ref[8];
    memcpy(ref, prompt, 8);
    char msg[256];
    kr_kv_invariants good = {pos, 10, 4, 6, prompt, ref, 8, 4, 3, 5, 3, 8};
    CHECK_EQ_INT(kr_kv_check_invariants(&good, msg, sizeof msg), KARA_OK);
    CHECK_EQ_INT(msg[0], 0);

    kr_kv_invariants v = good;
    int32_t p2[10];
    memcpy(p2, pos, sizeof pos);
    p2[6] = 9; /* repeats 9 */
    v.pos = p2;
    CHECK_EQ_INT(kr_kv_check_invariants(&v, msg, sizeof msg), KARA_ERR_INTERNAL);
    CHECK_MSG(strstr(msg, "not strictly increasing at slot 6") != NULL, "message: %s", msg);
    CHECK_MSG(strstr(kara_last_error(), "slot 6") != NULL, "last error: %s", kara_last_error());

    memcpy(p2, pos, sizeof pos);
    p2[2] = 5, p2[3] = 6; /* increasing, but the prompt moved */
    v.pos = p2;
    CHECK_EQ_INT(kr_kv_check_invariants(&v, msg, sizeof msg), KARA_ERR_INTERNAL);
    CHECK_MSG(strstr(msg, "prompt slot 2 holds position 5") != NULL, "message: %s", msg);

    v = good;
    prompt[5] ^= 1;
    CHECK_EQ_INT(kr_kv_check_invariants(&v, msg, sizeof msg), KARA_ERR_INTERNAL);
    CHECK_MSG(strstr(msg, "prompt bytes changed at offset 5") != NULL, "message: %s", msg);
    prompt[5] ^= 1;

    v = good;
    v.blocks_held = 4; /* 10 slots of 4 need 3 */
    CHECK_EQ_INT(kr_kv_check_invariants(&v, msg, sizeof msg), KARA_ERR_INTERNAL);
    CHECK_MSG(strstr(msg, "4 blocks held for 10 slots") != NULL, "message: %s", msg);

    v = good;
    v.pool_free = 4;
    CHECK_EQ_INT(kr_kv_check_invariants(&v, msg, sizeof msg), KARA_ERR_INTERNAL);
    CHECK_MSG(strstr(msg, "free 4 + used 3 blocks != pool 8") != NULL, "message: %s", msg);

    v = good;
    v.frontier = 2; /* below the prompt */
    CHECK_EQ_INT(kr_kv_check_invariants(&v, msg, sizeof msg), KARA_ERR_INTERNAL);
    CHECK_MSG(strstr(msg, "frontier 2") != NULL, "message: %s", msg);

    /* skipped checks stay skipped */
    v = good;
    v.blocks_held = 99, v.block_size = 0, v.pool_total = -1, v.pool_free = 99, v.prompt_ref = NULL, v.frontier = -1;
    CHECK_EQ_INT(kr_kv_check_invariants(&v, msg, sizeof msg), KARA_OK);
}

int main(void) {
    test_plan_example();
    test_plan_random();
    test_plan_errors();
    test_ring();
    test_sequence_events();
    test_invariant_violations();
    return kr_test_finish();
}
