/* test_generate.c - the pull-based generator on a synthetic Qwen3 model:
 * its text equals a hand-written greedy loop's; thinking split by channel;
 * max_tokens; stop strings cut exactly with nothing leaking; the reasoning
 * budget forcing "</think>"; the abort callback; a prompt longer than the
 * context refused before any work; prompt-prefix reuse giving the same
 * output as a fresh start; no heap growth per token. */
#include <stdlib.h>
#include <string.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "kara.h"
#include "synth_model.h"
#include "test_util.h"
#include "think_splitter.h"
#include "kv_tuning.h"

#define N_CTX 160
#define N_BATCH 16

static kara_model *model;

static kara_context *new_context(void) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = N_CTX;
    cp.n_batch = N_BATCH;
    cp.n_threads = 1;
    cp.kv.method = KARA_KV_METHOD_FULL;
    kara_context *ctx = NULL;
    CHECK_MSG(kara_context_create(model, &cp, &ctx) == KARA_OK, "context: %s", kara_last_error());
    return ctx;
}

static int32_t tokenize(const char *text, int32_t *ids, int32_t cap) {
    int32_t n = 0;
    CHECK_MSG(kara_tokenize(model, text, -1, ids, cap, false, true, &n) == KARA_OK && n > 0, "tokenize '%s': %s", text,
              kara_last_error());
    return n;
}

static const char *k_prompt = "<|im_start|>user\nTell me a long story about the sea, the wind and the stars, "
                              "please.<|im_end|>\n<|im_start|>assistant\n";

/* Greedy tokens and their raw text from plain kara_decode + kara_sampler
 * calls: the reference the generator must reproduce. */
static int32_t reference_greedy(const int32_t *prompt, int32_t n_prompt, int32_t n_gen, char *text, size_t cap,
                                size_t *text_len) {
    kara_context *ctx = new_context();
    kara_sampler_params sp;
    kara_sampler_params_init(&sp);
    sp.temperature = 0;
    kara_sampler *smp;
    kara_sampler_create(&sp, kara_model_n_vocab(model), &smp);
    int32_t pos = 0, n = 0;
    for (int32_t i = 0; i < n_prompt; i += N_BATCH) {
        int32_t k = n_prompt - i < N_BATCH ? n_prompt - i : N_BATCH;
        kara_batch b = kara_batch_one_sequence(prompt + i, k, pos, 0);
        CHECK(kara_decode(ctx, &b) == KARA_OK);
        pos += k;
    }
    *text_len = 0;
    for (; n < n_gen; n++) {
        int32_t tok;
        CHECK(kara_sampler_sample(smp, kara_get_logits(ctx, -1), &tok) == KARA_OK);
        if (kara_token_is_eog(model, tok)) break;
        int32_t len = 0;
        CHECK(kara_token_to_piece(model, tok, text + *text_len, (int32_t)(cap - *text_len), false, &len) == KARA_OK);
        *text_len += (size_t)len;
        kara_batch b = kara_batch_one_sequence(&tok, 1, pos++, 0);
        CHECK(kara_decode(ctx, &b) == KARA_OK);
    }
    kara_sampler_free(smp);
    kara_context_free(ctx);
    return n;
}

/* Run a generator to the end; the concatenated text of each channel. */
typedef struct gen_out {
    char answer[8192], think[8192], all[16384];
    size_t n_answer, n_think, n_all;
    int n_pieces;
    int n_cut_utf8; /* pieces (before the final flush) ending inside a UTF-8 character */
    kara_status status;
} gen_out;

/* True when s[0..n) ends in the middle of a (so far valid) UTF-8 character. */
static bool ends_mid_char(const char *s, size_t n) {
    for (size_t back = 1; back <= 4 && back <= n; back++) {
        unsigned char c = (unsigned char)s[n - back];
        if ((c & 0xc0) == 0x80) continue;
        size_t need = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
        return need > back;
    }
    return false;
}

static void drain(kara_generator *g, gen_out *o) {
    memset(o, 0, sizeof *o);
    kara_piece p;
    kara_status st;
    while ((st = kara_generator_next(g, &p)) == KARA_OK) {
        CHECK(p.len > 0 && p.text);
        char *dst = p.channel == KARA_CHANNEL_THINK ? o->think : o->answer;
        size_t *dn = p.channel == KARA_CHANNEL_THINK ? &o->n_think : &o->n_answer;
        memcpy(dst + *dn, p.text, (size_t)p.len);
        *dn += (size_t)p.len;
        memcpy(o->all + o->n_all, p.text, (size_t)p.len);
        o->n_all += (size_t)p.len;
        o->n_pieces++;
        if (p.token >= 0 && ends_mid_char(p.text, (size_t)p.len)) o->n_cut_utf8++;
    }
    o->status = st;
    /* after the end, the same status again */
    CHECK_EQ_INT(kara_generator_next(g, &p), st);
}

static void collect_split(void *user, kara_channel ch, const char *text, size_t len) {
    gen_out *o = user;
    char *dst = ch == KARA_CHANNEL_THINK ? o->think : o->answer;
    size_t *dn = ch == KARA_CHANNEL_THINK ? &o->n_think : &o->n_answer;
    memcpy(dst + *dn, text, len);
    *dn += len;
}

static kara_generator *new_generator(kara_context *ctx, kara_generator_params *gp) {
    kara_generator *g = NULL;
    CHECK_MSG(kara_generator_create(ctx, gp, &g) == KARA_OK, "generator: %s", kara_last_error());
    return g;
}

/* A generator for gp, run over the prompt to its end: its text in *o and
 * its counters in *st. The caller frees it. */
static kara_generator *run_to_end(kara_context *ctx, kara_generator_params *gp, const int32_t *prompt, int32_t n,
                                  gen_out *o, kara_generator_stats *st) {
    kara_generator *g = new_generator(ctx, gp);
    CHECK(kara_generator_start(g, 0, prompt, n) == KARA_OK);
    drain(g, o);
    kara_generator_get_stats(g, st);
    return g;
}

static void greedy_params(kara_generator_params *gp, int32_t max_tokens) {
    kara_generator_params_init(gp);
    gp->sampling.temperature = 0;
    gp->max_tokens = max_tokens;
}

static void test_matches_reference(void) {
    int32_t prompt[256];
    int32_t n = tokenize(k_prompt, prompt, 256);
    CHECK_MSG(n > N_BATCH, "the prompt (%d tokens) should need several chunks", n);
    static char ref[8192];
    size_t ref_len;
    int32_t n_ref = reference_greedy(prompt, n, 60, ref, sizeof ref, &ref_len);

    kara_context *ctx = new_context();
    kara_generator_params gp;
    greedy_params(&gp, 60);
    gp.split_thinking = false;
    static gen_out o;
    kara_generator_stats stats;
    kara_generator *g = run_to_end(ctx, &gp, prompt, n, &o, &stats);
    CHECK_EQ_INT(stats.n_generated, n_ref);
    CHECK_EQ_INT(stats.n_prompt, n);
    CHECK_EQ_INT(stats.n_prompt_decoded, n);
    CHECK_EQ_INT(o.n_think, 0);
    CHECK_MSG(o.n_all == ref_len && !memcmp(o.all, ref, ref_len), "generator text differs from the reference loop");
    CHECK_EQ_INT(o.status, KARA_DONE);
    CHECK(kara_generator_stop_reason(g) == (n_ref == 60 ? KARA_STOP_MAX_TOKENS : KARA_STOP_EOG));
    CHECK_EQ_INT(kara_seq_n_past(ctx, 0), n + n_ref - 1); /* the last token is not decoded */

    CHECK_EQ_INT(o.n_cut_utf8, 0);

    /* split on: the reference text through the splitter, channel by channel */
    kara_generator_free(g);
    greedy_params(&gp, 60);
    g = new_generator(ctx, &gp);
    CHECK(kara_generator_start(g, 0, prompt, n) == KARA_OK);
    drain(g, &o);
    static gen_out split;
    memset(&split, 0, sizeof split);
    kr_think_splitter sp;
    kr_think_splitter_init(&sp, false, false);
    kr_think_splitter_feed(&sp, ref, ref_len, collect_split, &split);
    kr_think_splitter_flush(&sp, collect_split, &split);
    CHECK_MSG(o.n_answer == split.n_answer && !memcmp(o.answer, split.answer, o.n_answer),
              "answer channel differs from the splitter applied to the reference");
    CHECK_MSG(o.n_think == split.n_think && !memcmp(o.think, split.think, o.n_think),
              "think channel differs from the splitter applied to the reference");
    kara_generator_free(g);

    /* a prompt ending in "<think>\n": the output starts as thinking (AUTO) */
    char text[512];
    snprintf(text, sizeof text, "%s<think>\n", k_prompt);
    n = tokenize(text, prompt, 256);
    reference_greedy(prompt, n, 60, ref, sizeof ref, &ref_len);
    greedy_params(&gp, 60);
    g = new_generator(ctx, &gp);
    CHECK(kara_generator_start(g, 0, prompt, n) == KARA_OK);
    drain(g, &o);
    memset(&split, 0, sizeof split);
    kr_think_splitter_init(&sp, true, false);
    kr_think_splitter_feed(&sp, ref, ref_len, collect_split, &split);
    kr_think_splitter_flush(&sp, collect_split, &split);
    CHECK_MSG(o.n_think > 0, "a pre-filled think block starts as thinking");
    CHECK_MSG(o.n_answer == split.n_answer && !memcmp(o.answer, split.answer, o.n_answer) &&
                  o.n_think == split.n_think && !memcmp(o.think, split.think, o.n_think),
              "pre-filled: channels differ from the splitter applied to the reference");
    kara_generator_free(g);
    kara_context_free(ctx);
}

/* Stop strings end the output right before their first occurrence, even
 * when they span tokens; nothing after them leaks. */
static void test_stop_strings(void) {
    int32_t prompt[256];
    int32_t n = tokenize(k_prompt, prompt, 256);
    static char ref[8192];
    size_t ref_len;
    reference_greedy(prompt, n, 80, ref, sizeof ref, &ref_len);
    CHECK(ref_len > 40);
    kara_context *ctx = new_context();
    /* stop strings taken from the reference text at several offsets and lengths */
    for (size_t at = 5; at + 6 < ref_len && at < 60; at += 7) {
        for (size_t len = 1; len <= 6; len += 5) {
            char stop[8];
            memcpy(stop, ref + at, len);
            stop[len] = '\0';
            if (!stop[0] || strlen(stop) != len) continue; /* a NUL byte in the text */
            /* where it first occurs in the reference */
            size_t first = 0;
            while (memcmp(ref + first, stop, len) != 0) first++;
            kara_generator_params gp;
            greedy_params(&gp, 80);
            gp.split_thinking = false;
            gp.n_stop = 2;
            gp.stop[0] = "\x01never\x02";
            gp.stop[1] = stop;
            kara_generator *g = new_generator(ctx, &gp);
            CHECK(kara_generator_start(g, 0, prompt, n) == KARA_OK);
            static gen_out o;
            drain(g, &o);
            CHECK_EQ_INT(o.status, KARA_STOPPED);
            CHECK(kara_generator_stop_reason(g) == KARA_STOP_STRING);
            CHECK_MSG(o.n_all == first && !memcmp(o.all, ref, first), "stop '%s' (first at %zu): output of %zu bytes",
                      stop, first, o.n_all);
            kara_generator_free(g);
        }
    }
    kara_context_free(ctx);
}

/* A prompt that ends inside "<think>" starts as thinking; the budget then
 * forces "</think>" and the rest is answer. */
static void test_reasoning_budget(void) {
    int32_t prompt[256];
    char text[512];
    snprintf(text, sizeof text, "%s<think>\n", k_prompt);
    int32_t n = tokenize(text, prompt, 256);
    kara_context *ctx = new_context();
    for (int32_t budget = 0; budget <= 5; budget += 5) {
        kara_generator_params gp;
        greedy_params(&gp, 30);
        gp.reasoning_budget = budget;
        static gen_out o;
        kara_generator_stats st;
        kara_generator *g = run_to_end(ctx, &gp, prompt, n, &o, &st);
        /* budget sampled thinking tokens, then the forced close */
        CHECK_MSG(st.n_forced >= 1, "budget %d: nothing forced", budget);
        CHECK_MSG(st.n_think == budget, "budget %d: %d thinking tokens", budget, st.n_think);
        CHECK_MSG(!memchr(o.answer, '<', o.n_answer) || !strstr(o.answer, "</think>"),
                  "the closing tag must not reach the answer");
        if (budget == 0) CHECK_EQ_INT(o.n_think, 0);
        CHECK_MSG(o.n_answer >= 2 && o.answer[0] == '\n' && o.answer[1] == '\n',
                  "budget %d: the answer starts after the forced \"</think>\\n\\n\"", budget);
        kara_generator_free(g);
    }
    /* unlimited: the block stays open to the end (random weights never close it) and is all thinking */
    kara_generator_params gp;
    greedy_params(&gp, 20);
    gp.think_start = KARA_THINK_START_THINK;
    static gen_out o;
    kara_generator_stats st;
    kara_generator *g = run_to_end(ctx, &gp, prompt, n, &o, &st);
    CHECK_EQ_INT(st.n_forced, 0);
    if (st.n_think == st.n_generated) CHECK_EQ_INT(o.n_answer, 0);
    kara_generator_free(g);
    kara_context_free(ctx);
}

static int abort_after;
static bool abort_cb(void *user) {
    int *calls = user;
    return ++*calls > abort_after;
}

static void test_abort_and_errors(void) {
    int32_t prompt[256];
    int32_t n = tokenize(k_prompt, prompt, 256);
    kara_context *ctx = new_context();
    int calls = 0;
    kara_generator_params gp;
    greedy_params(&gp, -1);
    gp.abort = abort_cb;
    gp.abort_user = &calls;
    abort_after = 1000;
    kara_generator *g = new_generator(ctx, &gp);
    CHECK(kara_generator_start(g, 0, prompt, n) == KARA_OK);
    int calls_after_prompt = calls;
    CHECK_MSG(calls_after_prompt >= (n + N_BATCH - 1) / N_BATCH, "abort checked between prompt chunks (%d)", calls);
    abort_after = calls + 7;
    static gen_out o;
    drain(g, &o);
    CHECK_EQ_INT(o.status, KARA_STOPPED);
    CHECK(kara_generator_stop_reason(g) == KARA_STOP_ABORT);
    kara_generator_stats st;
    kara_generator_get_stats(g, &st);
    CHECK_EQ_INT(st.n_generated, 7);

    /* aborted during the prompt (here: its last token, the rest is reused): an
     * error, and the sequence is left empty */
    calls = 0;
    abort_after = 0;
    CHECK_EQ_INT(kara_generator_start(g, 0, prompt, n), KARA_ERR_ABORTED);
    CHECK_EQ_INT(kara_seq_n_past(ctx, 0), 0);
    kara_generator_set_abort(g, NULL, NULL);

    /* a prompt longer than the context: refused before any work */
    static int32_t big[N_CTX + 1];
    for (int i = 0; i <= N_CTX; i++) big[i] = prompt[i % n];
    CHECK(kara_generator_start(g, 0, prompt, n) == KARA_OK);
    int32_t before = kara_seq_n_past(ctx, 0);
    CHECK_EQ_INT(kara_generator_start(g, 0, big, N_CTX + 1), KARA_ERR_CONTEXT_FULL);
    CHECK_MSG(strstr(kara_last_error(), "161 tokens") && strstr(kara_last_error(), "holds 160"), "message: %s",
              kara_last_error());
    CHECK_EQ_INT(kara_seq_n_past(ctx, 0), before);
    kara_piece p;
    CHECK(kara_generator_next(g, &p) == KARA_ERR_ARG); /* not started */
    int32_t bad = kara_model_n_vocab(model);
    CHECK_EQ_INT(kara_generator_start(g, 0, &bad, 1), KARA_ERR_TOKEN);
    CHECK_EQ_INT(kara_generator_start(g, 0, prompt, 0), KARA_ERR_ARG);

    /* the context fills up: DONE with its own reason */
    CHECK(kara_generator_start(g, 0, prompt, n) == KARA_OK);
    drain(g, &o);
    CHECK_EQ_INT(o.status, KARA_DONE);
    kara_stop_reason r = kara_generator_stop_reason(g);
    CHECK_MSG(r == KARA_STOP_CONTEXT_FULL || r == KARA_STOP_EOG, "reason %d", (int)r);
    if (r == KARA_STOP_CONTEXT_FULL) CHECK_EQ_INT(kara_seq_n_past(ctx, 0), N_CTX);
    kara_generator_free(g);

    /* bad params */
    greedy_params(&gp, 10);
    gp.n_stop = 1;
    gp.stop[0] = "";
    CHECK(kara_generator_create(ctx, &gp, &g) == KARA_ERR_ARG && g == NULL);
    gp.n_stop = KARA_MAX_STOP_STRINGS + 1;
    CHECK(kara_generator_create(ctx, &gp, &g) == KARA_ERR_ARG);
    kara_generator_free(NULL);
    kara_context_free(ctx);
}

/* A second turn whose prompt extends what the sequence holds decodes only
 * the new tokens, and generates what a fresh start would. */
static void test_prefix_reuse(void) {
    int32_t p1[256], p2[400];
    int32_t n1 = tokenize(k_prompt, p1, 256);
    char turn2[1024];
    snprintf(turn2, sizeof turn2, "%sSure.<|im_end|>\n<|im_start|>user\nAnd then?<|im_end|>\n<|im_start|>assistant\n",
             k_prompt);
    int32_t n2 = tokenize(turn2, p2, 400);
    kara_context *ctx = new_context();
    kara_generator_params gp;
    greedy_params(&gp, 12);
    kara_generator *g = new_generator(ctx, &gp);
    CHECK(kara_generator_start(g, 0, p1, n1) == KARA_OK);
    static gen_out a, b;
    drain(g, &a);
    /* the sequence now holds p1 + generated tokens, not a prefix of p2: cut
     * back to what they share (p1 at least) and the rest decoded */
    CHECK(kara_generator_start(g, 0, p2, n2) == KARA_OK);
    kara_generator_stats st;
    kara_generator_get_stats(g, &st);
    CHECK_MSG(st.n_prompt_decoded >= 1 && st.n_prompt_decoded <= n2 - n1, "decoded %d of %d", st.n_prompt_decoded, n2);
    drain(g, &a);

    /* same prompt prefix without generated tokens in between: reused */
    kara_context *ctx2 = new_context();
    kara_generator *g2 = new_generator(ctx2, &gp);
    CHECK(kara_generator_start(g2, 0, p1, n1) == KARA_OK);
    CHECK(kara_generator_start(g2, 0, p2, n2) == KARA_OK);
    kara_generator_get_stats(g2, &st);
    CHECK_EQ_INT(st.n_prompt_decoded, n2 - n1);
    drain(g2, &b);
    CHECK_MSG(a.n_all == b.n_all && !memcmp(a.all, b.all, a.n_all) && a.n_think == b.n_think,
              "reused prefix: output differs from a fresh start");
    kara_generator_free(g2);
    kara_context_free(ctx2);
    kara_generator_free(g);
    kara_context_free(ctx);
}

/* Starting again from the same prompt (a regenerated reply, /regen in
 * kara chat) reuses the prompt in the cache: only its last two tokens are decoded
 * again, and greedy output is the same as the first time - with full KV,
 * and with Kara compressing windows of the first reply (the cut goes back
 * into the prompt, before any window). H2O under a token budget has
 * accumulated reads on the prompt: the cache cannot be cut back exactly, so
 * it is cleared and the prompt decoded whole, with the same result. */
static void test_regen_reuses_prompt(void) {
    int32_t p1[256];
    int32_t n1 = tokenize(k_prompt, p1, 256);
    const kara_kv_method methods[] = {KARA_KV_METHOD_FULL, KARA_KV_METHOD_KARA, KARA_KV_METHOD_H2O};
    for (int mi = 0; mi < 3; mi++) {
        kara_context_params cp;
        kara_context_params_init(&cp);
        cp.n_ctx = N_CTX;
        cp.n_batch = N_BATCH;
        cp.n_threads = 1;
        cp.kv.method = methods[mi];
        kr_kv_tune(&cp.kv)->evict = KARA_KV_EVICT_PER_WINDOW;
        cp.kv.interval = 8;
        kr_kv_tune(&cp.kv)->buffer = 8;
        cp.kv.retention = 0.5f;
        kr_kv_tune(&cp.kv)->budget_tokens = n1 + 16;
        kara_context *ctx = NULL;
        if (!CHECK_MSG(kara_context_create(model, &cp, &ctx) == KARA_OK, "context: %s", kara_last_error())) continue;
        kara_generator_params gp;
        greedy_params(&gp, 40);
        gp.ignore_eog = true;
        kara_generator *g = new_generator(ctx, &gp);
        static gen_out first, again;
        kara_generator_stats st;
        CHECK(kara_generator_start(g, 0, p1, n1) == KARA_OK);
        drain(g, &first);
        kara_kv_stats ks;
        kara_context_kv_stats(ctx, &ks);
        if (methods[mi] != KARA_KV_METHOD_FULL) CHECK_MSG(ks.events > 0, "method %d: no KV event in the reply", mi);
        CHECK(kara_generator_start(g, 0, p1, n1) == KARA_OK);
        kara_generator_get_stats(g, &st);
        CHECK_MSG(st.n_prompt_decoded == (methods[mi] == KARA_KV_METHOD_H2O ? n1 : 2),
                  "method %s: %d of %d prompt tokens decoded again", kara_kv_method_name(methods[mi]),
                  st.n_prompt_decoded, n1);
        drain(g, &again);
        CHECK_MSG(first.n_all == again.n_all && !memcmp(first.all, again.all, first.n_all),
                  "method %s: the regenerated reply differs from the first", kara_kv_method_name(methods[mi]));
        kara_generator_free(g);
        kara_context_free(ctx);
    }
}

/* kara_seq_truncate: cuts a whole sequence back; refuses, changing nothing,
 * where slots that would stay were compressed away. */
static void test_seq_truncate(void) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = N_CTX;
    cp.n_batch = N_BATCH;
    cp.n_threads = 1;
    cp.kv.method = KARA_KV_METHOD_STREAMING;
    kr_kv_tune(&cp.kv)->budget_tokens = 24;
    kara_context *ctx = NULL;
    if (!CHECK_MSG(kara_context_create(model, &cp, &ctx) == KARA_OK, "context: %s", kara_last_error())) return;
    int32_t toks[40];
    for (int i = 0; i < 40; i++) toks[i] = 5 + i;
    kara_batch b = kara_batch_one_sequence(toks, 16, 0, 0), b2 = kara_batch_one_sequence(toks + 16, 4, 16, 0);
    CHECK_MSG(kara_decode(ctx, &b) == KARA_OK && kara_decode(ctx, &b2) == KARA_OK, "decode: %s", kara_last_error());
    CHECK(kara_seq_truncate(ctx, 0, 12) == KARA_OK);
    CHECK_EQ_INT(kara_seq_n_past(ctx, 0), 12);
    CHECK_EQ_INT(kara_seq_n_cached(ctx, 0), 12);
    for (int i = 12; i < 40; i++) { /* single steps past the budget: streaming drops the oldest non-sink slots */
        kara_batch one = kara_batch_one_sequence(toks + i, 1, i, 0);
        CHECK(kara_decode(ctx, &one) == KARA_OK);
    }
    int32_t cached = kara_seq_n_cached(ctx, 0);
    CHECK(cached < 40);
    CHECK_EQ_INT(kara_seq_truncate(ctx, 0, 30), KARA_ERR_UNSUPPORTED);
    CHECK_EQ_INT(kara_seq_n_past(ctx, 0), 40);
    CHECK_EQ_INT(kara_seq_n_cached(ctx, 0), cached);
    CHECK_EQ_INT(kara_seq_truncate(ctx, 0, 0), KARA_OK); /* 0 is a clear */
    CHECK_EQ_INT(kara_seq_n_past(ctx, 0), 0);
    CHECK_EQ_INT(kara_seq_truncate(ctx, 0, -1), KARA_ERR_ARG);
    kara_context_free(ctx);

    /* h2o sums each batch's newest attention from the prompt on: after a
     * prompt fed in two chunks the kept slots carry the dropped chunk's
     * attention, so a cut would not equal a fresh decode: refused (the
     * rule of kr_kv_policy_can_rewind; it was allowed before) */
    cp.kv.method = KARA_KV_METHOD_H2O;
    kr_kv_tune(&cp.kv)->budget_tokens = 64;
    if (!CHECK_MSG(kara_context_create(model, &cp, &ctx) == KARA_OK, "context: %s", kara_last_error())) return;
    CHECK(kara_decode(ctx, &b) == KARA_OK && kara_decode(ctx, &b2) == KARA_OK);
    CHECK_EQ_INT(kara_seq_truncate(ctx, 0, 12), KARA_ERR_UNSUPPORTED);
    CHECK_EQ_INT(kara_seq_n_past(ctx, 0), 20);
    kara_context_free(ctx);
}

/* After warm-up, generating tokens allocates nothing. */
static void test_no_allocation_per_token(void) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    int32_t prompt[256];
    int32_t n = tokenize(k_prompt, prompt, 256);
    kara_context *ctx = new_context();
    kara_generator_params gp;
    greedy_params(&gp, 80);
    gp.n_stop = 1;
    gp.stop[0] = "\x01\x02\x03";
    kara_generator *g = new_generator(ctx, &gp);
    CHECK(kara_generator_start(g, 0, prompt, n) == KARA_OK);
    kara_piece p;
    for (int i = 0; i < 3; i++) kara_generator_next(g, &p);
    struct mallinfo2 before = mallinfo2();
    int pieces = 0;
    while (kara_generator_next(g, &p) == KARA_OK) pieces++;
    struct mallinfo2 after = mallinfo2();
    CHECK_MSG(after.uordblks == before.uordblks, "heap in use grew from %zu to %zu bytes over %d pieces",
              before.uordblks, after.uordblks, pieces);
    kara_generator_free(g);
    kara_context_free(ctx);
#endif
}

int main(void) {
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    snprintf(sp.arch, sizeof sp.arch, "qwen3");
    char err[512];
    const char *path = kr_test_path(kr_test_tmpdir(), "gen-qwen3.gguf");
    if (kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) != KARA_OK) {
        fprintf(stderr, "kr_synth_write: %s\n", err);
        return 1;
    }
    if (kara_model_load(path, NULL, &model) != KARA_OK) {
        fprintf(stderr, "load: %s\n", kara_last_error());
        return 1;
    }
    test_matches_reference();
    test_stop_strings();
    test_reasoning_budget();
    test_abort_and_errors();
    test_prefix_reuse();
    test_regen_reuses_prompt();
    test_seq_truncate();
    test_no_allocation_per_token();
    kara_model_free(model);
    return kr_test_finish();
}
