/* test_kv_mirror.c - the hooks through which a device that holds the KV
 * pool follows the KV policy (kv_cache.h kr_kv_mirror, kv_policy.h
 * dev_score; the CUDA backend's are kernels_cuda/cuda_backend_kv.c), on
 * the CPU, with a mock device:
 *   - move_rows replaces the host's compaction copies: the mock does what
 *     cu_move_rows does with the CUDA backend's real memory plan
 *     (kr_cuda_plan_in_ctx, kr_cuda_plan_make): the source and destination
 *     offsets are written to the two move arrays inside an emulated device
 *     allocation of the plan's size, read back from there, and the moves
 *     run as kr_cuda_kv_move does (layer-0 K row offsets, then per layer
 *     and K/V plane, in order) on the host pool, so a wrong layer range,
 *     order or offset, or move arrays that overlap or lie outside the
 *     allocation, change the text or fail the test;
 *   - dev_score is called for every span the policy scores, with the span
 *     the host scorer would score (the mock scores it with the host scorer);
 *   - pull_rows brings the retention prior's layer of a window to the host
 *     before the prior reads it, and sequence state save pulls every row,
 *     load pushes them;
 * and with all of that in place the shipped reasoning model evicting under
 * a 96-slot share gives the plain CPU context's logits bit for bit over 300
 * greedy steps with Kara and its prior, and over 200 with snapkv,
 * streaming, recent and random (each method the device claims that evicts
 * and compacts). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "cuda_admit.h"
#include "kv_policy_impl.h"
#include "kv_tuning.h"
#include "test_models.h"
#include "test_util.h"

typedef struct mock {
    kara_context *c;
    kr_cuda_plan plan;
    uint8_t *dev; /* the emulated device allocation: plan.total bytes */
    int moves, scores, pulls, pushes, prior_pulls;
    int64_t rows_pulled, rows_pushed;
} mock;

/* The byte range of move array `which` in the emulated allocation, or NULL
 * (the test fails) when n_moves offsets do not fit inside it. */
static int64_t *move_array(mock *m, int which, int32_t n_moves) {
    const kr_cuda_plan *p = &m->plan;
    const uint64_t off = p->off[KR_CUDA_R_KVSCORE] + p->score_off[which], bytes = (uint64_t)n_moves * 8;
    if (!CHECK_MSG(n_moves <= p->move_slots && off + bytes <= p->off[KR_CUDA_R_KVSCORE] + p->size[KR_CUDA_R_KVSCORE] &&
                       off + bytes <= p->total,
                   "%d moves fit move array %d at %llu (region ends at %llu, allocation %llu)", n_moves, which,
                   (unsigned long long)off,
                   (unsigned long long)(p->off[KR_CUDA_R_KVSCORE] + p->size[KR_CUDA_R_KVSCORE]),
                   (unsigned long long)p->total))
        return NULL;
    return (int64_t *)(m->dev + off);
}

static kara_status mock_move_rows(void *user, int32_t seq, int32_t l0, int32_t l1, const kr_kv_move *mv,
                                  int32_t n_moves) {
    mock *m = user;
    kr_kv_cache *kv = &m->c->kv;
    const size_t run = (size_t)kv->block_size * kv->slot_bytes, layer_bytes = 2 * run;
    /* cu_move_rows: both arrays of offsets uploaded (sources first), then
     * the kernel reads them back */
    int64_t *src = move_array(m, KR_CUDA_S_MOVE_SRC, n_moves), *dst = move_array(m, KR_CUDA_S_MOVE_DST, n_moves);
    if (!src || !dst) return KARA_ERR_INTERNAL;
    for (int32_t i = 0; i < n_moves; i++) src[i] = (int64_t)((uint8_t *)kr_kv_k(kv, 0, seq, mv[i].src) - kv->pool);
    for (int32_t i = 0; i < n_moves; i++) dst[i] = (int64_t)((uint8_t *)kr_kv_k(kv, 0, seq, mv[i].dst) - kv->pool);
    for (int32_t l = l0; l < l1; l++)
        for (int v = 0; v < 2; v++)
            for (int32_t i = 0; i < n_moves; i++) { /* the device kernel's order: per plane, moves in order */
                const size_t o = (size_t)l * layer_bytes + (size_t)v * run;
                memcpy(kv->pool + (size_t)dst[i] + o, kv->pool + (size_t)src[i] + o, kv->slot_bytes);
            }
    m->moves++;
    return KARA_OK;
}

static kara_status mock_pull(void *user, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n) {
    mock *m = user;
    const kr_kv_policy *pol = &m->c->policy;
    CHECK(seq >= 0 && first >= 0 && first + n <= m->c->kv.seqs[seq].n && l0 < l1 && l1 <= m->c->kv.n_layer);
    if (pol->use_prior && l0 == pol->prior.layer && l1 == l0 + 1) m->prior_pulls++;
    m->pulls++;
    m->rows_pulled += (int64_t)n * (l1 - l0);
    return KARA_OK;
}

static kara_status mock_push(void *user, int32_t seq, int32_t l0, int32_t l1, int32_t first, int32_t n) {
    mock *m = user;
    (void)seq;
    (void)first;
    m->pushes++;
    m->rows_pushed += (int64_t)n * (l1 - l0);
    return KARA_OK;
}

/* The host scorer on the span it was given (the hook is off while it runs). */
static kara_status mock_score(void *user, const kr_kv_span *sp, float *out) {
    mock *m = user;
    kr_kv_policy *pol = &m->c->policy;
    CHECK(out == pol->scores);
    pol->dev_score = NULL;
    kara_status st = kr_kvp_score_span(pol, sp->seq, sp->first, sp->n_w, sp->n_buf, sp->n_q, sp->q_first_pos, sp->mode,
                                       sp->exclude_self, sp->l_begin, sp->l_end);
    pol->dev_score = mock_score;
    m->scores++;
    return st;
}

static kara_context *make(kara_model *model, kara_kv_method method) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 512;
    cp.n_threads = 1;
    cp.kv.method = method;
    kr_test_small_windows(&cp.kv);
    cp.kv.seq_tokens = 96;
    kr_kv_tune(&cp.kv)->snapkv.trigger_slack = 32; /* snapkv evicts as the others do, not once */
    kara_context *c = NULL;
    CHECK_MSG(kara_context_create(model, &cp, &c) == KARA_OK, "context: %s", kara_last_error());
    return c;
}

/* The mock device on dev, as kr_cu_kv_attach hooks the real one: the
 * mirror always, the scorer when the device scores; its allocation laid
 * out by the backend's own plan for this context. */
static bool attach_mock(mock *mk, kara_context *dev) {
    kr_cuda_plan_in in = {.weight_bytes = 1, .vector_bytes = 1};
    kr_cuda_plan_in_ctx(dev, &in);
    if (!CHECK_MSG(kr_cuda_plan_make(&mk->plan, &in), "the device plan for %s",
                   kara_kv_method_name(dev->params.kv.method)))
        return false;
    /* the whole of both arrays (what cu_move_rows may write) inside the
     * region and apart, before any event needs them */
    const kr_cuda_plan *p = &mk->plan;
    const uint64_t src = p->score_off[KR_CUDA_S_MOVE_SRC], dst = p->score_off[KR_CUDA_S_MOVE_DST];
    const uint64_t bytes = (uint64_t)p->move_slots * 8;
    if (!CHECK_MSG(p->move_slots >= dev->kv.max_slots && src + bytes <= p->size[KR_CUDA_R_KVSCORE] &&
                       dst + bytes <= p->size[KR_CUDA_R_KVSCORE] && (src + bytes <= dst || dst + bytes <= src),
                   "%s: move arrays of %lld at %llu and %llu in a region of %llu",
                   kara_kv_method_name(dev->params.kv.method), (long long)p->move_slots, (unsigned long long)src,
                   (unsigned long long)dst, (unsigned long long)p->size[KR_CUDA_R_KVSCORE]))
        return false;
    mk->c = dev;
    mk->dev = calloc(1, mk->plan.total);
    if (!CHECK(mk->dev)) return false;
    dev->kv.mirror = (kr_kv_mirror){mk, NULL, mock_move_rows, mock_pull, mock_push};
    if (kr_cuda_scores_on_device(&dev->policy)) {
        dev->policy.dev_score = mock_score;
        dev->policy.dev_user = mk;
    }
    return true;
}

/* Greedy decoding of the prompt on a plain context and on one with the
 * mock device, step by step: the logits must be equal bit for bit, and
 * the budget must have made the method evict (through move_rows). */
static void run_method(kara_model *model, kara_kv_method method, int n_steps, const int32_t *prompt, int32_t n_prompt) {
    const char *name = kara_kv_method_name(method);
    kara_context *plain = make(model, method), *dev = make(model, method);
    mock mk = {0};
    if (!plain || !dev || !attach_mock(&mk, dev)) goto done;
    const int32_t n_vocab = kara_model_n_vocab(model);
    int32_t tok[2] = {0, 0};
    int32_t step, same = 1;
    for (step = 0; step < n_steps && same; step++) {
        kara_context *cs[2] = {plain, dev};
        const float *lg[2];
        for (int i = 0; i < 2; i++) {
            kara_batch b = step ? kara_batch_one_sequence(&tok[i], 1, n_prompt + step - 1, 0)
                                : kara_batch_one_sequence(prompt, n_prompt, 0, 0);
            if (!CHECK_MSG(kara_decode(cs[i], &b) == KARA_OK, "%s: decode step %d: %s", name, step, kara_last_error()))
                goto done;
            lg[i] = kara_get_logits(cs[i], -1);
        }
        same = CHECK_MSG(memcmp(lg[0], lg[1], (size_t)n_vocab * sizeof(float)) == 0,
                         "%s: logits differ at step %d (moves %d, scores %d)", name, step, mk.moves, mk.scores);
        tok[0] = tok[1] = kr_test_argmax(lg[0], n_vocab);
    }
    kara_kv_stats st;
    kara_context_kv_stats(dev, &st);
    printf("test_kv_mirror: %s: %d steps, %llu events, %llu slots evicted; %d scores, %d moves, %d prior pulls\n", name,
           step, (unsigned long long)st.events, (unsigned long long)st.slots_evicted, mk.scores, mk.moves,
           mk.prior_pulls);
    CHECK_MSG(st.slots_evicted > 0 && mk.moves > 0, "%s: evictions ran through move_rows (%d)", name, mk.moves);
    if (kr_cuda_scores_on_device(&dev->policy))
        CHECK_MSG(mk.scores > 0, "%s: spans scored through dev_score (%d)", name, mk.scores);
    else
        CHECK_MSG(mk.scores == 0 && mk.plan.size[KR_CUDA_R_RING] == 0, "%s: nothing scored on the device", name);
    if (method == KARA_KV_METHOD_KARA) {
        CHECK(dev->policy.use_prior); /* the shipped model's prior is on by default */
        CHECK_MSG(mk.prior_pulls > 0, "the prior's layer pulled (%d)", mk.prior_pulls);
    }
    CHECK_EQ_INT(mk.pushes, 0);
    if (method == KARA_KV_METHOD_KARA) {
        /* state save pulls every row of every layer; load pushes them (on a
         * sequence holding its prompt only: a compressed one cannot be saved) */
        CHECK(kara_seq_clear(dev, 0) == KARA_OK);
        kara_batch b = kara_batch_one_sequence(prompt, n_prompt, 0, 0);
        CHECK(kara_decode(dev, &b) == KARA_OK);
        const int32_t n = dev->kv.seqs[0].n, n_past = kara_seq_n_past(dev, 0);
        size_t bytes = kara_seq_state_size(dev, 0), written = 0;
        uint8_t *buf = malloc(bytes);
        const int64_t pulled = mk.rows_pulled;
        CHECK_EQ_INT(n, n_prompt);
        CHECK_MSG(kara_seq_state_save(dev, 0, prompt, n_past, buf, bytes, &written) == KARA_OK, "save: %s",
                  kara_last_error());
        CHECK_EQ_INT(mk.rows_pulled - pulled, (int64_t)n * dev->kv.n_layer);
        int32_t n_loaded = 0;
        CHECK(kara_seq_state_load(dev, 0, buf, written, NULL, 0, &n_loaded) == KARA_OK);
        CHECK_EQ_INT(mk.rows_pushed, (int64_t)n * dev->kv.n_layer);
        free(buf);
    }
done:
    kara_context_free(plain);
    kara_context_free(dev);
    free(mk.dev);
}

int main(void) {
    kara_model_params mp;
    kara_model_params_init(&mp);
    kara_model *model = NULL;
    const char *src = kr_test_source_dir();
    if (!CHECK_MSG(src != NULL, "the source tree (set KARA_SOURCE_DIR)")) return kr_test_finish();
    const char *path = kr_test_path(src, "tools/train/model/kara-reasoner-1m.gguf");
    if (!CHECK_MSG(kara_model_load(path, &mp, &model) == KARA_OK, "load %s: %s", path, kara_last_error()))
        return kr_test_finish();
    int32_t prompt[64], n_prompt = 0;
    CHECK(kara_tokenize(model, "Compute #1 37*46 + #2 59*21.", -1, prompt, 64, true, false, &n_prompt) == KARA_OK);
    run_method(model, KARA_KV_METHOD_KARA, 300, prompt, n_prompt);
    static const kara_kv_method others[] = {KARA_KV_METHOD_SNAPKV, KARA_KV_METHOD_STREAMING, KARA_KV_METHOD_RECENT,
                                            KARA_KV_METHOD_RANDOM};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) run_method(model, others[i], 200, prompt, n_prompt);
    kara_model_free(model);
    return kr_test_finish();
}
