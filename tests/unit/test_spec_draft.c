/* test_spec_draft.c - speculative decoding with a draft model (spec DRAFT)
 * gives plain decoding's text, greedy and sampled, on synthetic Qwen3
 * models: the target itself in another context as its draft (every draft
 * right), and Q8_0/Q4_0 copies of its weights (some right, some wrong);
 * the sequence holds exactly its history after stops inside a draft and
 * after an abort; a draft context smaller than the target's stops drafting
 * where it is full and the text stays the same; and every bad draft
 * context is refused with a message that says what is wrong with it. */
#include <stdlib.h>
#include <string.h>

#include "kara.h"
#include "spec_run.h"
#include "synth_model.h"
#include "test_util.h"

#define N_CTX 256
#define N_BATCH 32
#define N_PROMPT 40

typedef kr_spec_run_out run_out;

static kara_context *new_context(kara_model *m, kara_kv_method method, int32_t n_ctx, int32_t seq_tokens) {
    kara_context_params cp = kr_spec_ctx_params(method, n_ctx, N_BATCH, seq_tokens);
    return kr_spec_context(m, &cp);
}

static const int32_t *prompt(void) {
    static int32_t p[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) p[i] = 3 + (i * 37) % 200;
    return p;
}

static void params(kara_generator_params *gp, float temp, int32_t max_tokens, kara_context *draft) {
    kr_spec_params(gp, temp, max_tokens, draft ? KARA_SPEC_DRAFT : KARA_SPEC_NONE);
    gp->draft_ctx = draft;
    gp->draft_p_min = 0.0f; /* always draft draft_max: the most drafted tokens to take back */
}

/* One start over ctx, run to its end (abort_at >= 0: aborted after that many calls of the callback). */
static int abort_left;
static bool abort_cb(void *user) {
    (void)user;
    return --abort_left < 0;
}
static void run(kara_context *ctx, kara_generator_params *gp, int abort_at, run_out *o) {
    if (abort_at >= 0) {
        abort_left = abort_at;
        gp->abort = abort_cb;
    }
    kr_spec_run(ctx, gp, prompt(), N_PROMPT, o);
}

/* Plain and drafted runs give the same text and counts; the target's
 * sequence holds prompt + output (the last chosen token not decoded). */
static void check_same(kara_model *target, kara_context *draft, float temp, int32_t max_tokens, const char *what,
                       kara_generator_stats *out) {
    static run_out a, b;
    kara_generator_params gp;
    kara_context *ctx = new_context(target, KARA_KV_METHOD_FULL, N_CTX, 0);
    if (!ctx) return;
    params(&gp, temp, max_tokens, NULL);
    run(ctx, &gp, -1, &a);
    params(&gp, temp, max_tokens, draft);
    run(ctx, &gp, -1, &b);
    CHECK_MSG(a.status == KARA_DONE && b.status == KARA_DONE, "%s: statuses %d, %d", what, a.status, b.status);
    CHECK_MSG(b.st.spec_on, "%s: speculation off", what);
    CHECK_MSG(a.len == b.len && !memcmp(a.text, b.text, a.len), "%s: drafted text differs from plain", what);
    CHECK_EQ_INT(b.st.n_generated, a.st.n_generated);
    CHECK_EQ_INT(b.n_past, N_PROMPT + b.st.n_generated - 1);
    CHECK(b.st.n_accepted <= b.st.n_drafted);
    *out = b.st;
    kara_context_free(ctx);
}

static kara_model *write_and_load(const char *name, kr_ftype ftype, int32_t n_vocab) {
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    snprintf(sp.arch, sizeof sp.arch, "qwen3");
    sp.ftype = ftype;
    if (n_vocab) sp.n_vocab = n_vocab;
    char err[512];
    const char *path = kr_test_path(kr_test_tmpdir(), name);
    if (!CHECK_MSG(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK, "synth: %s", err)) return NULL;
    kara_model *m = NULL;
    CHECK_MSG(kara_model_load(path, NULL, &m) == KARA_OK, "load %s: %s", name, kara_last_error());
    return m;
}

/* The target as its own draft: every drafted token is the target's choice. */
static void test_self_draft(kara_model *m) {
    kara_context *d = new_context(m, KARA_KV_METHOD_FULL, N_CTX, 0);
    if (!d) return;
    kara_generator_stats st;
    check_same(m, d, 0.0f, 150, "self draft, greedy", &st);
    /* all but the last step's drafts, which may run past max_tokens unchecked */
    CHECK_MSG(st.n_drafted >= 100 && st.n_accepted >= st.n_drafted - 6, "self draft: %d drafted, %d accepted",
              st.n_drafted, st.n_accepted);
    /* stops at every length inside a draft of 6 */
    for (int32_t max = 60; max <= 66; max++) check_same(m, d, 0.0f, max, "self draft, max_tokens", &st);
    kara_context_free(d);
}

/* Quantized copies of the target's weights: some drafts right, some wrong. */
static void test_quantized_drafts(kara_model *m, kara_model *q8, kara_model *q4) {
    kara_model *drafts[2] = {q8, q4};
    for (int i = 0; i < 2; i++) {
        kara_context *d = new_context(drafts[i], KARA_KV_METHOD_FULL, N_CTX, 0);
        if (!d) continue;
        kara_generator_stats st;
        check_same(m, d, 0.0f, 180, i ? "q4_0 draft, greedy" : "q8_0 draft, greedy", &st);
        CHECK_MSG(st.n_accepted > 0 && st.n_accepted < st.n_drafted,
                  "%s draft: %d drafted, %d accepted: both a kept and a rejected draft should occur",
                  i ? "q4_0" : "q8_0", st.n_drafted, st.n_accepted);
        check_same(m, d, 0.8f, 180, i ? "q4_0 draft, sampled" : "q8_0 draft, sampled", &st);
        CHECK(st.n_drafted > 0);
        for (int32_t max = 30; max <= 34; max++) check_same(m, d, 0.0f, max, "quantized draft, max_tokens", &st);
        kara_context_free(d);
    }
}

/* A draft context of 64 positions for a run that goes past it: drafting
 * stops where it is full, and the text stays plain decoding's. */
static void test_small_draft_context(kara_model *m, kara_model *q8) {
    kara_context *d = new_context(q8, KARA_KV_METHOD_FULL, 64, 0);
    if (!d) return;
    kara_generator_stats st;
    check_same(m, d, 0.0f, 120, "draft context of 64", &st);
    CHECK_MSG(st.n_drafted > 0 && st.n_drafted <= 64 - N_PROMPT + 6, "draft context of 64: %d drafted", st.n_drafted);
    kara_context_free(d);
}

/* An abort between steps, maybe inside a draft: the sequence holds what was
 * generated, as in plain decoding. */
static void test_abort(kara_model *m, kara_model *q8) {
    kara_context *d = new_context(q8, KARA_KV_METHOD_FULL, N_CTX, 0);
    kara_context *ctx = new_context(m, KARA_KV_METHOD_FULL, N_CTX, 0);
    static run_out o;
    for (int k = 20; d && ctx && k < 25; k++) {
        kara_generator_params gp;
        params(&gp, 0.0f, 150, d);
        run(ctx, &gp, k, &o);
        CHECK_EQ_INT(o.status, KARA_STOPPED);
        CHECK_EQ_INT(o.n_past, N_PROMPT + o.st.n_generated);
    }
    kara_context_free(ctx);
    kara_context_free(d);
}

static void expect_refused(kara_context *ctx, kara_generator_params *gp, const char *needle) {
    kara_generator *g = NULL;
    CHECK_EQ_INT(kara_generator_create(ctx, gp, &g), KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), needle) != NULL, "expected \"%s\" in: %s", needle, kara_last_error());
    CHECK(g == NULL);
}

static void test_bad_drafts(kara_model *m, kara_model *other_vocab) {
    kara_context *ctx = new_context(m, KARA_KV_METHOD_FULL, N_CTX, 0);
    kara_context *wrong = new_context(other_vocab, KARA_KV_METHOD_FULL, N_CTX, 0);
    kara_context *squeezed = new_context(m, KARA_KV_METHOD_KARA, N_CTX, 128);
    if (!ctx || !wrong || !squeezed) goto out;
    kara_generator_params gp;
    params(&gp, 0.0f, 10, NULL);
    gp.spec = KARA_SPEC_DRAFT;
    expect_refused(ctx, &gp, "draft_ctx");
    gp.draft_ctx = ctx;
    expect_refused(ctx, &gp, "another context");
    gp.draft_ctx = wrong;
    expect_refused(ctx, &gp, "same vocabulary");
    CHECK(kara_context_kv_compressing(squeezed));
    gp.draft_ctx = squeezed;
    expect_refused(ctx, &gp, "compresses its KV cache");
    kara_context *fine = new_context(m, KARA_KV_METHOD_FULL, N_CTX, 0);
    gp.draft_ctx = fine;
    gp.draft_p_min = 1.5f;
    expect_refused(ctx, &gp, "draft_p_min");
    kara_context_free(fine);
out:
    kara_context_free(squeezed);
    kara_context_free(wrong);
    kara_context_free(ctx);
}

int main(void) {
    kara_model *m = write_and_load("draft-target.gguf", KR_FTYPE_ALL_F32, 0);
    kara_model *q8 = write_and_load("draft-q8.gguf", KR_FTYPE_MOSTLY_Q8_0, 0);
    kara_model *q4 = write_and_load("draft-q4.gguf", KR_FTYPE_MOSTLY_Q4_0, 0);
    kara_model *other = write_and_load("draft-vocab.gguf", KR_FTYPE_ALL_F32, 600);
    if (m && q8 && q4 && other) {
        test_self_draft(m);
        test_quantized_drafts(m, q8, q4);
        test_small_draft_context(m, q8);
        test_abort(m, q8);
        test_bad_drafts(m, other);
    }
    kara_model_free(other);
    kara_model_free(q4);
    kara_model_free(q8);
    kara_model_free(m);
    return kr_test_finish();
}
