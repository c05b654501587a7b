/*
 * test_cuda_plan.c - the CUDA backend's memory plan (kernels_cuda/cuda_plan.h),
 * on the host, in every build: regions and buffers aligned, disjoint and
 * inside the one allocation; each sized as the backend uses it; the KV pool
 * exactly the host cache's bytes; the query ring and the window scorer's
 * buffers sized for the largest span; the compaction's two move arrays
 * placed, apart and inside the allocation for every method that can evict
 * (the plan of a real context per method: kr_cuda_plan_in_ctx); overflow
 * and bad shapes refused; and the shapes the kernels cannot take refused
 * when the context is made (kr_cuda_check_shapes), naming the tensor or
 * setting, while float rows of any width pass.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "context.h"
#include "cuda_admit.h"
#include "cuda_ops.h"
#include "cuda_plan.h"
#include "cuda_splitk.h"
#include "synth_model.h"
#include "test_models.h"
#include "test_util.h"

/* Qwen3-0.6B's shape, a 64 MiB pool, 512-entry batches, 4 sequences. */
static kr_cuda_plan_in qwen3_06b(void) {
    kr_cuda_plan_in in = {.n_embd = 1024,
                          .n_head = 16,
                          .n_head_kv = 8,
                          .head_dim = 128,
                          .n_ff = 3072,
                          .n_vocab = 151936,
                          .n_batch = 512,
                          .n_seq_max = 4,
                          .max_blocks_per_seq = 2560,
                          .weight_bytes = 394000000,
                          .vector_bytes = 28 * 4 * 4096 + 4096,
                          .pool_bytes = 64ull << 20};
    return in;
}

static bool disjoint(uint64_t a0, uint64_t an, uint64_t b0, uint64_t bn) { return a0 + an <= b0 || b0 + bn <= a0; }

static void test_layout(void) {
    kr_cuda_plan_in in = qwen3_06b();
    kr_cuda_plan p;
    CHECK(kr_cuda_plan_make(&p, &in));
    CHECK_EQ_INT(p.max_cols, 3072); /* n_ff is the widest input (n_head * head_dim = 2048) */
    CHECK_EQ_INT(p.size[KR_CUDA_R_WEIGHTS], in.weight_bytes);
    CHECK_EQ_INT(p.size[KR_CUDA_R_VECTORS], in.vector_bytes);
    CHECK_EQ_INT(p.size[KR_CUDA_R_POOL], in.pool_bytes);
    CHECK_EQ_INT(p.size[KR_CUDA_R_LOGITS], (uint64_t)512 * 151936 * 4);
    CHECK_EQ_INT(p.size[KR_CUDA_R_SCRATCH], kr_cuda_plan_matmul_scratch(3072, 512));
    /* the scratch holds the f16 weight tile and the batch in f16 */
    CHECK(p.size[KR_CUDA_R_SCRATCH] >= (uint64_t)KR_CUDA_TILE_ROWS * 3072 * 2 + (uint64_t)512 * 3072 * 2);
    uint64_t sum = 0;
    for (int r = 0; r < KR_CUDA_R_COUNT; r++) {
        CHECK_MSG(p.off[r] % KR_CUDA_ALIGN == 0, "region %d at %llu is aligned", r, (unsigned long long)p.off[r]);
        CHECK_MSG(p.off[r] + p.size[r] <= p.total, "region %d ends inside the allocation", r);
        for (int q = 0; q < r; q++)
            CHECK_MSG(disjoint(p.off[r], p.size[r], p.off[q], p.size[q]), "regions %d and %d do not overlap", r, q);
        sum += p.size[r];
    }
    /* split-K's partial records: KR_CU_SPLITK_MAX splits of every query
     * head of the most entries split-K runs for, head_dim + 2 floats each */
    CHECK_EQ_INT(p.size[KR_CUDA_R_ATTN_PART], (uint64_t)KR_CU_SPLITK_MAX_ENTRIES * 16 * KR_CU_SPLITK_MAX * 130 * 4);
    /* alignment padding only: at most one alignment unit per region */
    CHECK(p.total >= sum && p.total - sum < (uint64_t)KR_CUDA_R_COUNT * KR_CUDA_ALIGN + KR_CUDA_ALIGN);
    CHECK(p.total % KR_CUDA_ALIGN == 0);

    /* activation buffers: n_batch rows of X, XN, Q, K, V, ATTN, GATE, UP, PROJ */
    const uint64_t cols[KR_CUDA_N_ACTS] = {1024, 1024, 2048, 1024, 1024, 2048, 3072, 3072, 1024};
    for (int b = 0; b < KR_CUDA_N_ACTS; b++) {
        const uint64_t bytes = 512 * cols[b] * 4;
        CHECK_MSG(p.act_off[b] % KR_CUDA_ALIGN == 0, "buffer %d aligned", b);
        CHECK_MSG(p.act_off[b] + bytes <= p.size[KR_CUDA_R_ACTS], "buffer %d inside the activations", b);
        for (int q = 0; q < b; q++)
            CHECK_MSG(disjoint(p.act_off[b], bytes, p.act_off[q], 512 * cols[q] * 4), "buffers %d and %d apart", b, q);
    }
    /* index arrays: the block tables of every sequence fit */
    const uint64_t n_idx[KR_CUDA_I_COUNT] = {512 * 4, 512 * 4,      512 * 8, 512 * 4,
                                             512 * 4, 4 * 2560 * 4, 512 * 4, 512 * 8};
    for (int i = 0; i < KR_CUDA_I_COUNT; i++) {
        CHECK_MSG(p.index_off[i] + n_idx[i] <= p.size[KR_CUDA_R_INDEX], "index array %d inside its region", i);
        for (int q = 0; q < i; q++)
            CHECK_MSG(disjoint(p.index_off[i], n_idx[i], p.index_off[q], n_idx[q]), "index arrays %d and %d apart", i,
                      q);
    }
}

/* The pool follows the budget byte for byte, and nothing else moves. */
static void test_pool_follows_budget(void) {
    kr_cuda_plan_in in = qwen3_06b();
    kr_cuda_plan a, b;
    CHECK(kr_cuda_plan_make(&a, &in));
    in.pool_bytes += 1ull << 30;
    CHECK(kr_cuda_plan_make(&b, &in));
    CHECK_EQ_INT(b.total - a.total, 1ull << 30);
    CHECK_EQ_INT(b.size[KR_CUDA_R_ACTS], a.size[KR_CUDA_R_ACTS]);
    /* one entry per pass: activations and logits shrink, weights stay */
    in = qwen3_06b();
    in.n_batch = 1;
    CHECK(kr_cuda_plan_make(&b, &in));
    CHECK(b.size[KR_CUDA_R_ACTS] < a.size[KR_CUDA_R_ACTS] && b.size[KR_CUDA_R_LOGITS] == 151936 * 4);
    CHECK_EQ_INT(b.size[KR_CUDA_R_WEIGHTS], a.size[KR_CUDA_R_WEIGHTS]);
}

/* Kara's scoring on the device: the ring region is the host ring's bytes;
 * the scorer's buffers hold every (query head, tile) unit's column sums and
 * logit row for the largest span, and the moves of a whole sequence;
 * without scoring nothing is reserved. */
static void test_scoring_buffers(void) {
    kr_cuda_plan_in in = qwen3_06b();
    kr_cuda_plan p;
    CHECK(kr_cuda_plan_make(&p, &in));
    CHECK_EQ_INT(p.size[KR_CUDA_R_RING], 0);
    CHECK_EQ_INT(p.size[KR_CUDA_R_KVSCORE], 0);
    in.ring_bytes = 4ull * 28 * 320 * 2048 * 2; /* 4 sequences, 28 layers, 320 rows of 16 x 128 f16 */
    in.score_q_max = 320;
    in.score_slots_max = 40960;
    in.score_keys_max = 40964;          /* 4 sinks */
    CHECK(!kr_cuda_plan_make(&p, &in)); /* no room for a compaction's moves */
    in.move_slots_max = 40960;
    CHECK(kr_cuda_plan_make(&p, &in));
    CHECK_EQ_INT(p.move_slots, 40960);
    CHECK_EQ_INT(p.size[KR_CUDA_R_RING], in.ring_bytes);
    CHECK_EQ_INT(p.score_tiles, 10);
    const uint64_t units = 16 * 10;
    const uint64_t n[KR_CUDA_S_COUNT] = {units * 40960 * 4, units * 40964 * 4, 40960 * 4, 40960 * 4,
                                         40964 * 8,         40960 * 8,         40960 * 8};
    uint64_t sum = 0;
    for (int i = 0; i < KR_CUDA_S_COUNT; i++) {
        CHECK_MSG(p.score_off[i] % KR_CUDA_ALIGN == 0, "scorer buffer %d aligned", i);
        CHECK_MSG(p.score_off[i] + n[i] <= p.size[KR_CUDA_R_KVSCORE], "scorer buffer %d inside its region", i);
        for (int q = 0; q < i; q++)
            CHECK_MSG(disjoint(p.score_off[i], n[i], p.score_off[q], n[q]), "scorer buffers %d and %d apart", i, q);
        sum += n[i];
    }
    CHECK(p.size[KR_CUDA_R_KVSCORE] >= sum && p.size[KR_CUDA_R_KVSCORE] - sum < KR_CUDA_S_COUNT * KR_CUDA_ALIGN);
    /* a tile more for one query row more */
    in.score_q_max = 321;
    CHECK(kr_cuda_plan_make(&p, &in));
    CHECK_EQ_INT(p.score_tiles, 11);
    /* half a request is refused, as is fewer keys than slots or a negative size */
    in.score_q_max = 0;
    CHECK(!kr_cuda_plan_make(&p, &in));
    in.score_q_max = 320;
    in.score_keys_max = 100;
    CHECK(!kr_cuda_plan_make(&p, &in));
    in.score_keys_max = -1;
    CHECK(!kr_cuda_plan_make(&p, &in));
    in.score_keys_max = INT64_MAX / 8; /* units x keys overflows */
    CHECK(!kr_cuda_plan_make(&p, &in));
}

/* The two move arrays of KVSCORE: n int64 offsets each, aligned, apart
 * from each other and from every other buffer of the region, inside the
 * region and the allocation. */
static void check_moves(const kr_cuda_plan *p, int64_t n, const char *what) {
    CHECK_MSG(p->move_slots == n, "%s: room for %lld moves (%lld)", what, (long long)n, (long long)p->move_slots);
    const uint64_t bytes = (uint64_t)n * 8,
                   sizes[KR_CUDA_S_COUNT] = {(uint64_t)p->size[KR_CUDA_R_KVSCORE], 0, 0, 0, 0, bytes, bytes};
    for (int i = KR_CUDA_S_MOVE_SRC; i <= KR_CUDA_S_MOVE_DST; i++) {
        const uint64_t off = p->score_off[i];
        CHECK_MSG(off % KR_CUDA_ALIGN == 0, "%s: move array %d aligned", what, i);
        CHECK_MSG(off + sizes[i] <= p->size[KR_CUDA_R_KVSCORE],
                  "%s: move array %d (%llu + %llu) inside the region (%llu)", what, i, (unsigned long long)off,
                  (unsigned long long)sizes[i], (unsigned long long)p->size[KR_CUDA_R_KVSCORE]);
        CHECK_MSG(p->off[KR_CUDA_R_KVSCORE] + off + sizes[i] <= p->total, "%s: move array %d inside the allocation",
                  what, i);
    }
    CHECK_MSG(disjoint(p->score_off[KR_CUDA_S_MOVE_SRC], bytes, p->score_off[KR_CUDA_S_MOVE_DST], bytes),
              "%s: the source and destination arrays apart (%llu, %llu)", what,
              (unsigned long long)p->score_off[KR_CUDA_S_MOVE_SRC],
              (unsigned long long)p->score_off[KR_CUDA_S_MOVE_DST]);
    /* the scorer's buffers, when there are any, come before the moves */
    CHECK_MSG(p->score_tiles == 0 || p->score_off[KR_CUDA_S_KEY_OFFS] < p->score_off[KR_CUDA_S_MOVE_SRC],
              "%s: the moves after the scorer's buffers", what);
}

/* Without scoring (streaming, recent, random) the move arrays are still
 * placed: a compaction uploads its offsets there. */
static void test_move_buffers(void) {
    kr_cuda_plan_in in = qwen3_06b();
    kr_cuda_plan p;
    in.move_slots_max = 40960;
    CHECK(kr_cuda_plan_make(&p, &in));
    CHECK(p.size[KR_CUDA_R_KVSCORE] >= 2 * 40960 * 8);
    check_moves(&p, 40960, "no scoring");
    in.move_slots_max = 1; /* the smallest: still two aligned, separate ranges */
    CHECK(kr_cuda_plan_make(&p, &in));
    check_moves(&p, 1, "one move");
    in.move_slots_max = -1;
    CHECK(!kr_cuda_plan_make(&p, &in));
}

/* The plan of a real context per method, as the backend makes it at attach. */
static void test_moves_per_method(void) {
    kara_model *m = kr_test_synth_model("tiny", "qwen3", 12, 2048, "tiny-qwen3-plan.gguf");
    if (!CHECK(m)) return;
    static const kara_kv_method methods[] = {KARA_KV_METHOD_KARA,      KARA_KV_METHOD_SNAPKV, KARA_KV_METHOD_CHUNKKV,
                                             KARA_KV_METHOD_STREAMING, KARA_KV_METHOD_RECENT, KARA_KV_METHOD_RANDOM,
                                             KARA_KV_METHOD_FULL};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        kara_kv_params kv;
        kara_kv_params_init(&kv);
        kv.method = methods[i];
        kr_test_small_windows(&kv);
        kv.seq_tokens = 96;
        kara_context *c = kr_test_kv_context(m, &kv, 2, 1, 256);
        if (!CHECK_MSG(c, "context for %s", kara_kv_method_name(methods[i]))) continue;
        kr_cuda_plan_in in = {.weight_bytes = 4096, .vector_bytes = 256};
        kr_cuda_plan_in_ctx(c, &in);
        kr_cuda_plan p;
        const char *name = kara_kv_method_name(methods[i]);
        if (CHECK_MSG(kr_cuda_plan_make(&p, &in), "plan for %s", name)) {
            check_moves(&p, c->kv.max_slots, name);
            const bool scored = kr_cuda_scores_on_device(&c->policy);
            CHECK_MSG(scored ==
                          (methods[i] == KARA_KV_METHOD_KARA || methods[i] == KARA_KV_METHOD_SNAPKV ||
                           methods[i] == KARA_KV_METHOD_CHUNKKV),
                      "%s scored on the device: %d", name, scored);
            CHECK_MSG((p.score_tiles > 0) == scored && (p.size[KR_CUDA_R_RING] > 0) == scored, "%s: scorer buffers %s",
                      name, scored ? "placed" : "absent");
        }
        kara_context_free(c);
    }
    kara_model_free(m);
}

/* A synthetic F32 model of the given shape, written to the test's folder. */
static kara_model *odd_model(int32_t n_embd, int32_t n_head, int32_t n_head_kv, int32_t head_dim, int32_t n_ff,
                             const char *file) {
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    snprintf(sp.arch, sizeof sp.arch, "qwen3");
    sp.n_layer = 2;
    sp.n_embd = n_embd;
    sp.n_head = n_head;
    sp.n_head_kv = n_head_kv;
    sp.head_dim = head_dim;
    sp.n_ff = n_ff;
    sp.n_ctx = 256;
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/%s", kr_test_tmpdir(), file);
    if (!CHECK_MSG(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK, "synth: %s", err)) return NULL;
    kara_model *m = NULL;
    CHECK_MSG(kara_model_load(path, NULL, &m) == KARA_OK, "load: %s", kara_last_error());
    return m;
}

/* kr_cuda_check_shapes on a context with the given KV type and method:
 * KARA_OK, or the refusal whose message must hold `want`. */
static void expect_shapes(kara_model *m, kara_kv_dtype dtype, kara_kv_method method, const char *want) {
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    kv.dtype = dtype;
    kv.method = method;
    kara_context *c = kr_test_kv_context(m, &kv, 1, 1, 256);
    if (!CHECK_MSG(c, "context (%s)", kara_last_error())) return;
    const kara_status st = kr_cuda_check_shapes(c);
    if (!want)
        CHECK_MSG(st == KARA_OK, "shapes accepted: %s", st ? kara_last_error() : "");
    else
        CHECK_MSG(st == KARA_ERR_UNSUPPORTED && strstr(kara_last_error(), want) &&
                      strstr(kara_last_error(), "use runtime.device cpu"),
                  "refused with \"%s\": got %d \"%s\"", want, st, kara_last_error());
    kara_context_free(c);
}

/* Row widths that are not multiples of 32 (n_embd 40, n_ff 172, heads of
 * 16) pass in F32; a q8_0 / q4_0 cache over heads of 16 does not, nor a
 * head wider than the attention kernel's, nor a quantised matrix whose rows
 * are not whole blocks. The CPU takes all of them. */
static void test_shape_refusals(void) {
    kara_model *m = odd_model(40, 4, 2, 16, 172, "odd-widths.gguf");
    if (m) {
        expect_shapes(m, KARA_KV_F16, KARA_KV_METHOD_KARA, NULL);
        expect_shapes(m, KARA_KV_F32, KARA_KV_METHOD_STREAMING, NULL);
        expect_shapes(m, KARA_KV_Q8_0, KARA_KV_METHOD_FULL, "kv_cache.dtype q8_0 with heads of 16 values");
        expect_shapes(m, KARA_KV_Q4_0, KARA_KV_METHOD_RECENT, "kv_cache.dtype q4_0 with heads of 16 values");
        /* a quantised ffn_down of 172 columns (only the type and width are read) */
        kr_weight *w = &m->layers[1].w_down;
        const kr_type was = w->type;
        w->type = KR_TYPE_Q8_0;
        expect_shapes(m, KARA_KV_F16, KARA_KV_METHOD_FULL,
                      "tensor blk.1.ffn_down (Q8_0) has rows of 172 values, not whole 32-value blocks");
        w->type = was;
        kara_model_free(m);
    }
    m = odd_model(64, 2, 1, 288, 64, "wide-heads.gguf");
    if (m) {
        expect_shapes(m, KARA_KV_F16, KARA_KV_METHOD_FULL, "heads of 288 key and 288 value values");
        kara_model_free(m);
    }
}

static void test_refusals(void) {
    kr_cuda_plan p;
    kr_cuda_plan_in in = qwen3_06b();
    in.n_head_kv = 0;
    CHECK(!kr_cuda_plan_make(&p, &in));
    CHECK_EQ_INT(p.total, 0);
    in = qwen3_06b();
    in.pool_bytes = UINT64_MAX - 1000; /* a budget that cannot be added to the rest */
    CHECK(!kr_cuda_plan_make(&p, &in));
    in = qwen3_06b();
    in.n_vocab = INT64_MAX / 2; /* logits rows overflow */
    CHECK(!kr_cuda_plan_make(&p, &in));
    in = qwen3_06b();
    in.n_seq_max = INT64_MAX / 2; /* block tables overflow */
    CHECK(!kr_cuda_plan_make(&p, &in));
}

int main(void) {
    test_layout();
    test_pool_follows_budget();
    test_scoring_buffers();
    test_move_buffers();
    test_moves_per_method();
    test_shape_refusals();
    test_refusals();
    return kr_test_finish();
}
