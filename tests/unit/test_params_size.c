/*
 * test_params_size.c - the `size` that begins each params struct passed to a
 * *_create or *_load function (kara.h, "Conventions"), on a seeded tiny
 * model:
 *   - *_init sets it to the struct's sizeof, and such params are taken;
 *   - a struct never filled by its _init (size 0) is refused with
 *     KARA_ERR_ARG, a message naming the _init function, and *out NULL;
 *   - a size from a different kara.h (larger or smaller) is refused with a
 *     message naming both sizes;
 *   - NULL params still mean the defaults.
 */
#include <stdio.h>
#include <string.h>

#include "test_models.h"
#include "test_util.h"

static bool msg_has(const char *needle) {
    return CHECK_MSG(strstr(kara_last_error(), needle) != NULL, "message \"%s\" lacks \"%s\"", kara_last_error(),
                     needle);
}

static void check_model_params(const char *path) {
    kara_model_params mp;
    kara_model_params_init(&mp);
    CHECK_EQ_INT((int)mp.size, (int)sizeof mp);
    kara_model *m = (kara_model *)&mp; /* must be cleared on failure */
    mp.size = 0;
    CHECK_EQ_INT(kara_model_load(path, &mp, &m), KARA_ERR_ARG);
    CHECK(m == NULL);
    msg_has("kara_model_params_init");
    mp.size = (uint32_t)sizeof mp + 8;
    CHECK_EQ_INT(kara_model_load(path, &mp, &m), KARA_ERR_ARG);
    char want[64];
    snprintf(want, sizeof want, "params->size is %u", (unsigned)(sizeof mp + 8));
    msg_has(want);
    msg_has("different kara.h");
    mp.size = (uint32_t)sizeof mp - 4;
    CHECK_EQ_INT(kara_model_load_from_fd(-1, &mp, &m), KARA_ERR_ARG);
    msg_has("different kara.h");
    kara_model_params_init(&mp);
    CHECK_MSG(kara_model_load(path, &mp, &m) == KARA_OK, "%s", kara_last_error());
    kara_model_free(m);
}

static void check_context_and_above(kara_model *m) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    CHECK_EQ_INT((int)cp.size, (int)sizeof cp);
    cp.n_ctx = 64;
    cp.n_threads = 1;
    kara_context *c = (kara_context *)&cp;
    cp.size = 0;
    CHECK_EQ_INT(kara_context_create(m, &cp, &c), KARA_ERR_ARG);
    CHECK(c == NULL);
    msg_has("kara_context_params_init");
    cp.size = (uint32_t)sizeof cp - 8;
    CHECK_EQ_INT(kara_context_create(m, &cp, &c), KARA_ERR_ARG);
    msg_has("different kara.h");
    cp.size = (uint32_t)sizeof cp;
    if (!CHECK_MSG(kara_context_create(m, &cp, &c) == KARA_OK, "%s", kara_last_error())) return;

    kara_generator_params gp;
    kara_generator_params_init(&gp);
    CHECK_EQ_INT((int)gp.size, (int)sizeof gp);
    kara_generator *g = NULL;
    gp.size = 0;
    CHECK_EQ_INT(kara_generator_create(c, &gp, &g), KARA_ERR_ARG);
    CHECK(g == NULL);
    msg_has("kara_generator_params_init");
    gp.size = (uint32_t)sizeof gp;
    CHECK_MSG(kara_generator_create(c, &gp, &g) == KARA_OK, "%s", kara_last_error());
    kara_generator_free(g);
    g = NULL;
    CHECK_MSG(kara_generator_create(c, NULL, &g) == KARA_OK, "NULL params: %s", kara_last_error());
    kara_generator_free(g);

    kara_engine_params ep;
    kara_engine_params_init(&ep);
    CHECK_EQ_INT((int)ep.size, (int)sizeof ep);
    kara_engine *e = NULL;
    ep.size = 3;
    CHECK_EQ_INT(kara_engine_create(c, &ep, &e), KARA_ERR_ARG);
    CHECK(e == NULL);
    msg_has("params->size is 3");
    ep.size = (uint32_t)sizeof ep;
    CHECK_MSG(kara_engine_create(c, &ep, &e) == KARA_OK, "%s", kara_last_error());
    kara_engine_free(e);
    kara_context_free(c);
    c = NULL;
    CHECK_MSG(kara_context_create(m, NULL, &c) == KARA_OK, "NULL params: %s", kara_last_error());
    kara_context_free(c);
}

int main(void) {
    kara_model *m = kr_test_synth_model("tiny", "qwen3", 3, 64, "params_size.gguf");
    if (!CHECK(m != NULL)) return kr_test_finish();
    char path[512];
    snprintf(path, sizeof path, "%s/params_size.gguf", kr_test_tmpdir());
    check_model_params(path);
    check_context_and_above(m);
    kara_model_free(m);
    return kr_test_finish();
}
