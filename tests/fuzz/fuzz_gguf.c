/* fuzz_gguf.c - the GGUF reader and the model load on arbitrary bytes: a
 * model image in memory, loaded whole (copied) and vocab-only. Whatever the
 * bytes, a load either fails with a message or gives a model whose
 * tokenizer and first forward step work. Seeds: tests/fuzz/seeds/gguf/. */
#include <string.h>

#include "fuzz.h"
#include "kara.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    kara_log_set(kr_fuzz_quiet_log, NULL);
    return 0;
}

/* A model that loaded must work: tokenize, and decode one step. */
static void use_model(kara_model *m, bool vocab_only) {
    int32_t ids[64], n = 0;
    if (kara_model_has_tokenizer(m)) {
        kara_status st = kara_tokenize(m, "Hello world", -1, ids, 64, true, false, &n);
        FUZZ_CHECK(st == KARA_OK || st == KARA_ERR_BUFFER, "tokenize: %s", kara_last_error());
    }
    if (vocab_only) return;
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 8;
    cp.n_batch = 8;
    cp.n_threads = 1;
    cp.kv.method = KARA_KV_METHOD_FULL;
    kara_context *c = NULL;
    if (kara_context_create(m, &cp, &c) != KARA_OK) return; /* a shape the context refuses, with a message */
    int32_t tok = 0;
    kara_batch b = kara_batch_one_sequence(&tok, 1, 0, 0);
    kara_status st = kara_decode(c, &b);
    FUZZ_CHECK(st == KARA_OK, "decode of a loaded model: %s", kara_last_error());
    kara_context_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int vocab_only = 0; vocab_only < 2; vocab_only++) {
        kara_model_params mp;
        kara_model_params_init(&mp);
        mp.vocab_only = vocab_only;
        kara_model *m = (kara_model *)1;
        kara_status st = kara_model_load_from_buffer(data, size, &mp, &m);
        if (st == KARA_OK) {
            FUZZ_CHECK(m != NULL, "OK without a model");
            use_model(m, vocab_only);
            kara_model_free(m);
        } else {
            FUZZ_CHECK(m == NULL, "status %d left *out set", st);
            FUZZ_CHECK(kara_last_error()[0] != '\0', "status %d without a message", st);
        }
    }
    return 0;
}
