/* kara_seq_state_save/_load and kara_generator_adopt (prompt caching,
 * issue 17): a prompt decoded once, saved, and loaded into another sequence
 * of another context gives the same greedy text as decoding it there, with
 * only the prompt's last token decoded again - with full KV and with Kara
 * scoring windows; damaged, foreign or oversized images are refused with a
 * message and leave the sequence as it was. kara_seq_copy shares the
 * prompt's whole blocks, reference counted, and a sequence that would write
 * into a shared block gets its own copy first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kara.h"
#include "kv_tuning.h"
#include "synth_model.h"
#include "test_util.h"

static kara_model *model, *other;
static int32_t prompt[64];
static int32_t n_prompt;

static kara_context *new_ctx(kara_model *m, kara_kv_method method, kara_kv_dtype dtype, int32_t n_seq,
                             uint64_t budget) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 256;
    cp.n_threads = 1;
    cp.n_seq_max = n_seq;
    cp.kv.method = method;
    cp.kv.dtype = dtype;
    kr_kv_tune(&cp.kv)->evict = KARA_KV_EVICT_PER_WINDOW;
    cp.kv.interval = 8;
    kr_kv_tune(&cp.kv)->buffer = 8;
    cp.kv.retention = 0.5f;
    cp.kv.budget = budget;
    kara_context *c = NULL;
    CHECK_MSG(kara_context_create(m, &cp, &c) == KARA_OK, "context: %s", kara_last_error());
    return c;
}

/* Greedy text of 120 tokens from seq; *decoded gets the prompt tokens the start decoded. */
static void greedy(kara_context *c, int32_t seq, const int32_t *adopt, int32_t n_adopt, char *out, size_t cap,
                   int32_t *decoded) {
    kara_generator_params gp;
    kara_generator_params_init(&gp);
    gp.sampling.temperature = 0;
    gp.max_tokens = 120; /* past Kara's first windows */
    gp.ignore_eog = true;
    gp.split_thinking = false;
    kara_generator *g = NULL;
    out[0] = '\0';
    if (!CHECK(kara_generator_create(c, &gp, &g) == KARA_OK)) return;
    if (adopt) CHECK_MSG(kara_generator_adopt(g, seq, adopt, n_adopt) == KARA_OK, "adopt: %s", kara_last_error());
    CHECK(kara_generator_start(g, seq, prompt, n_prompt) == KARA_OK);
    kara_generator_stats st;
    kara_generator_get_stats(g, &st);
    *decoded = st.n_prompt_decoded;
    size_t len = 0;
    kara_piece p;
    while (kara_generator_next(g, &p) == KARA_OK)
        if (len + (size_t)p.len < cap) {
            memcpy(out + len, p.text, (size_t)p.len);
            len += (size_t)p.len;
        }
    out[len] = '\0';
    kara_generator_free(g);
}

/* The prompt decoded in a context of its own and saved: the image. */
static void *save_prompt(kara_kv_method method, size_t *size) {
    kara_context *c = new_ctx(model, method, KARA_KV_F16, 1, 0);
    if (!c) return NULL;
    kara_batch b = kara_batch_one_sequence(prompt, n_prompt, 0, 0);
    CHECK(kara_decode(c, &b) == KARA_OK);
    *size = kara_seq_state_size(c, 0);
    void *buf = malloc(*size);
    size_t written = 0;
    CHECK_EQ_INT(kara_seq_state_save(c, 0, prompt, n_prompt, buf, *size - 1, &written), KARA_ERR_BUFFER);
    CHECK_EQ_INT(kara_seq_state_save(c, 0, prompt, n_prompt - 1, buf, *size, &written), KARA_ERR_ARG);
    CHECK_MSG(kara_seq_state_save(c, 0, prompt, n_prompt, buf, *size, &written) == KARA_OK, "save: %s",
              kara_last_error());
    CHECK(written == *size);
    kara_context_free(c);
    return buf;
}

static void test_round_trip(kara_kv_method method) {
    char want[4096], got[4096];
    int32_t decoded = 0;
    kara_context *fresh = new_ctx(model, method, KARA_KV_F16, 1, 0);
    if (!fresh) return;
    greedy(fresh, 0, NULL, 0, want, sizeof want, &decoded);
    CHECK_EQ_INT(decoded, n_prompt);

    kara_context_free(fresh);

    size_t size = 0;
    void *img = save_prompt(method, &size);
    kara_context *c = new_ctx(model, method, KARA_KV_F16, 2, 0);
    if (img && c) {
        int32_t toks[64], n = 0;
        CHECK_MSG(kara_seq_state_load(c, 1, img, size, toks, 64, &n) == KARA_OK, "load: %s", kara_last_error());
        CHECK_EQ_INT(n, n_prompt);
        CHECK(!memcmp(toks, prompt, sizeof(int32_t) * (size_t)n_prompt));
        CHECK_EQ_INT(kara_seq_n_past(c, 1), n_prompt);
        greedy(c, 1, toks, n, got, sizeof got, &decoded);
        CHECK_EQ_INT(decoded, 2);
        CHECK_MSG(!strcmp(want, got), "%s: loaded prompt gives '%s', decoded prompt '%s'", kara_kv_method_name(method),
                  got, want);
        if (method == KARA_KV_METHOD_KARA) { /* past the prompt with scoring on: refused */
            kara_kv_stats ks;
            kara_context_kv_stats(c, &ks);
            CHECK(ks.events > 0);
            static uint8_t big[1 << 20];
            int32_t all[256];
            CHECK_EQ_INT(kara_seq_state_save(c, 1, all, kara_seq_n_past(c, 1), big, sizeof big, NULL),
                         KARA_ERR_UNSUPPORTED);
        }
    }
    kara_context_free(c);
    free(img);
}

/* Each bad image: the status, a message naming the problem, and the
 * target sequence untouched (it holds a 5-token prompt before and after). */
static void expect_refused(kara_context *c, const void *img, size_t size, kara_status want, const char *words) {
    kara_status st = kara_seq_state_load(c, 0, img, size, NULL, 0, NULL);
    CHECK_MSG(st == want && strstr(kara_last_error(), words), "status %d, '%s' (wanted %d, '%s')", st,
              kara_last_error(), want, words);
    CHECK_EQ_INT(kara_seq_n_past(c, 0), 5);
}

static void test_refusals(void) {
    size_t size = 0;
    uint8_t *img = save_prompt(KARA_KV_METHOD_FULL, &size);
    kara_context *c = new_ctx(model, KARA_KV_METHOD_FULL, KARA_KV_F16, 1, 0);
    if (!img || !c) goto done;
    kara_batch b = kara_batch_one_sequence(prompt, 5, 0, 0);
    CHECK(kara_decode(c, &b) == KARA_OK);
    uint8_t *bad = malloc(size);
    memcpy(bad, img, size);
    bad[size / 2] ^= 0x40;
    expect_refused(c, bad, size, KARA_ERR_FORMAT, "checksum");
    expect_refused(c, img, size - 3, KARA_ERR_FORMAT, "do not match");
    expect_refused(c, img, 10, KARA_ERR_FORMAT, "header");
    memcpy(bad, img, size);
    bad[0] = 'X';
    expect_refused(c, bad, size, KARA_ERR_FORMAT, "magic");
    free(bad);
    kara_context *c32 = new_ctx(model, KARA_KV_METHOD_FULL, KARA_KV_F32, 1, 0);
    if (c32) {
        CHECK_EQ_INT(kara_seq_state_load(c32, 0, img, size, NULL, 0, NULL), KARA_ERR_FORMAT);
        CHECK(strstr(kara_last_error(), "KV type") != NULL);
        kara_context_free(c32);
    }
    kara_context *co = new_ctx(other, KARA_KV_METHOD_FULL, KARA_KV_F16, 1, 0);
    if (co) {
        CHECK_EQ_INT(kara_seq_state_load(co, 0, img, size, NULL, 0, NULL), KARA_ERR_FORMAT);
        CHECK_MSG(strstr(kara_last_error(), "another model") != NULL, "%s", kara_last_error());
        kara_context_free(co);
    }
    uint8_t tiny[256];
    kara_context *empty = new_ctx(model, KARA_KV_METHOD_FULL, KARA_KV_F16, 2, 0);
    if (empty) { /* an empty sequence has no state to save */
        CHECK_EQ_INT(kara_seq_state_save(empty, 1, NULL, 0, tiny, sizeof tiny, NULL), KARA_ERR_ARG);
        CHECK(strstr(kara_last_error(), "empty") != NULL);
        kara_context_free(empty);
    }
    int32_t few[4];
    CHECK_EQ_INT(kara_seq_state_load(c, 0, img, size, few, 4, NULL), KARA_ERR_ARG);
    CHECK_EQ_INT(kara_seq_n_past(c, 0), 5);
done:
    kara_context_free(c);
    free(img);
}

/* A context of n_seq sequences with the prompt decoded in sequence 0. */
static kara_context *ctx_with_prompt(kara_kv_method method, int32_t n_seq) {
    kara_context *c = new_ctx(model, method, KARA_KV_F16, n_seq, 0);
    kara_batch b = kara_batch_one_sequence(prompt, n_prompt, 0, 0);
    if (c && !CHECK(kara_decode(c, &b) == KARA_OK)) {
        kara_context_free(c);
        c = NULL;
    }
    return c;
}

/* kara_seq_copy: a prompt copied into another sequence of the same context
 * generates what the original does; a compressed sequence is refused. */
static void test_copy(kara_kv_method method) {
    char want[4096], got[4096];
    int32_t decoded = 0;
    kara_context *c = ctx_with_prompt(method, 3);
    if (!c) return;
    CHECK_MSG(kara_seq_copy(c, 0, 2) == KARA_OK, "copy: %s", kara_last_error());
    CHECK_EQ_INT(kara_seq_n_past(c, 2), n_prompt);
    greedy(c, 2, prompt, n_prompt, got, sizeof got, &decoded);
    CHECK_EQ_INT(decoded, 2);
    greedy(c, 0, prompt, n_prompt, want, sizeof want, &decoded);
    CHECK_MSG(!strcmp(want, got), "%s: the copy generates '%s', the original '%s'", kara_kv_method_name(method), got,
              want);
    if (method == KARA_KV_METHOD_KARA) /* sequence 2 is now past its prompt with windows scored */
        CHECK_EQ_INT(kara_seq_copy(c, 2, 1), KARA_ERR_UNSUPPORTED);
    CHECK_EQ_INT(kara_seq_copy(c, 0, 9), KARA_ERR_ARG);
    kara_context_free(c);
}

/* kara_seq_copy shares the prompt's whole blocks (reference counted) and
 * copies the partly filled last one. A sequence that rewinds into a shared
 * block and writes there gets its own copy first; another that compresses
 * its windows never touches the shared prompt; the others generate what a
 * context without copies does; clearing them returns every block. */
static void test_copy_shares(kara_kv_method method) {
    char want[4096], got[4096];
    int32_t decoded = 0;
    kara_context *ref = ctx_with_prompt(method, 1);
    if (!ref) return;
    greedy(ref, 0, prompt, n_prompt, want, sizeof want, &decoded);
    kara_context_free(ref);

    kara_context *c = ctx_with_prompt(method, 3);
    if (!c) return;
    kr_kv_cache *kv = &c->kv;
    const int32_t B = kv->block_size, full = n_prompt / B, tail = n_prompt % B != 0;
    if (!CHECK_MSG(full >= 1, "the prompt (%d tokens) fills no block of %d", n_prompt, B)) goto done;
    const int32_t free0 = kv->n_free;
    CHECK_MSG(kara_seq_copy(c, 0, 1) == KARA_OK && kara_seq_copy(c, 0, 2) == KARA_OK, "%s", kara_last_error());
    CHECK_EQ_INT(kv->n_free, free0 - 2 * tail); /* a copy takes only its own last block */
    for (int32_t i = 0; i < full; i++) {
        CHECK_EQ_INT(kv->refs[kv->seqs[0].table[i]], 3);
        CHECK(kv->seqs[1].table[i] == kv->seqs[0].table[i] && kv->seqs[2].table[i] == kv->seqs[0].table[i]);
    }
    if (tail) CHECK(kv->seqs[1].table[full] != kv->seqs[0].table[full]);

    /* sequence 1 rewinds into the first block and writes another token there */
    CHECK_MSG(kara_seq_truncate(c, 1, B / 2) == KARA_OK, "%s", kara_last_error());
    int32_t tok = (prompt[B / 2] + 1) % kara_model_n_vocab(model);
    kara_batch one = kara_batch_one_sequence(&tok, 1, B / 2, 1);
    CHECK_MSG(kara_decode(c, &one) == KARA_OK, "%s", kara_last_error());
    CHECK(kv->seqs[1].table[0] != kv->seqs[0].table[0]);
    CHECK_EQ_INT(kv->refs[kv->seqs[0].table[0]], 2);
    CHECK_EQ_INT(kv->refs[kv->seqs[1].table[0]], 1);

    /* sequence 2 generates (Kara compresses its windows), then sequence 0 */
    greedy(c, 2, prompt, n_prompt, got, sizeof got, &decoded);
    CHECK_EQ_INT(kv->refs[kv->seqs[0].table[0]], 2); /* its events never rewrote the shared prompt */
    CHECK_MSG(!strcmp(want, got), "%s: the copy generates '%s', a context of its own '%s'", kara_kv_method_name(method),
              got, want);
    greedy(c, 0, prompt, n_prompt, got, sizeof got, &decoded);
    CHECK_MSG(!strcmp(want, got), "%s: the original after its copies generates '%s', alone '%s'",
              kara_kv_method_name(method), got, want);
    CHECK(kara_seq_clear(c, -1) == KARA_OK);
    CHECK_EQ_INT(kv->n_free, kv->n_blocks);
done:
    kara_context_free(c);
}

int main(void) {
    char err[256];
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    snprintf(sp.arch, sizeof sp.arch, "qwen3");
    const char *path = kr_test_path(kr_test_tmpdir(), "state-a.gguf");
    if (!CHECK_MSG(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK, "synth: %s", err) ||
        !CHECK(kara_model_load(path, NULL, &model) == KARA_OK))
        return kr_test_finish();
    sp.n_layer += 1; /* another model: one more layer */
    path = kr_test_path(kr_test_tmpdir(), "state-b.gguf");
    if (!CHECK_MSG(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK, "synth: %s", err) ||
        !CHECK(kara_model_load(path, NULL, &other) == KARA_OK))
        return kr_test_finish();
    const char *text = "<|im_start|>user\nTell me about the sea and the wind.<|im_end|>\n<|im_start|>assistant\n";
    CHECK(kara_tokenize(model, text, -1, prompt, 64, false, true, &n_prompt) == KARA_OK && n_prompt > 8);
    test_round_trip(KARA_KV_METHOD_FULL);
    test_round_trip(KARA_KV_METHOD_KARA);
    test_refusals();
    test_copy(KARA_KV_METHOD_FULL);
    test_copy(KARA_KV_METHOD_KARA);
    test_copy_shares(KARA_KV_METHOD_FULL);
    test_copy_shares(KARA_KV_METHOD_KARA);
    kara_model_free(model);
    kara_model_free(other);
    return kr_test_finish();
}
