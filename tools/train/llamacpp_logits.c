/* Cross-check of an exported model against llama.cpp's prebuilt library (the
 * one ../shared/bench/llamacpp-ref installs): tokenizes TEXT (special tokens
 * parsed, no BOS added), decodes it in one batch, writes the logits of every
 * position to OUT.f32 (n_tokens x n_vocab floats) and then greedily generates
 * up to GEN tokens, stopping at end-of-generation.
 *
 *   llamacpp_logits MODEL.gguf OUT.f32 TEXT [GEN]
 *
 * stdout: one JSON object with the prompt's token ids and the generated ids.
 * Built and run by tools/train/check_llamacpp.sh; not part of the CMake build. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)level;
    (void)text;
    (void)user;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL.gguf OUT.f32 TEXT [GEN]\n", argv[0]);
        return 2;
    }
    int n_gen = argc > 4 ? atoi(argv[4]) : 0;
    if (!getenv("LLAMACPP_REF_VERBOSE")) llama_log_set(quiet, NULL);
    const char *dir = getenv("GGML_BACKEND_DIR");
    if (dir)
        ggml_backend_load_all_from_path(dir);
    else
        ggml_backend_load_all();
    llama_backend_init();

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "cannot load %s\n", argv[1]);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);

    int cap = (int)strlen(argv[3]) + 16;
    llama_token *toks = malloc(sizeof *toks * (size_t)(cap + n_gen));
    int n = llama_tokenize(vocab, argv[3], (int)strlen(argv[3]), toks, cap, false, true);
    if (n < 0) {
        fprintf(stderr, "tokenize failed\n");
        return 1;
    }

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (unsigned)(n + n_gen + 16);
    cp.n_batch = cp.n_ubatch = (unsigned)(n + 16);
    cp.n_threads = cp.n_threads_batch = 2;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "cannot create context\n");
        return 1;
    }

    struct llama_batch b = llama_batch_init(n + 16, 0, 1);
    b.n_tokens = n;
    for (int i = 0; i < n; i++) {
        b.token[i] = toks[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    if (llama_decode(ctx, b) != 0) {
        fprintf(stderr, "decode failed\n");
        return 1;
    }
    FILE *f = fopen(argv[2], "wb");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", argv[2]);
        return 1;
    }
    for (int i = 0; i < n; i++) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t)n_vocab, f);
    fclose(f);

    printf("{\"n_vocab\":%d,\"prompt\":[", n_vocab);
    for (int i = 0; i < n; i++) printf("%s%d", i ? "," : "", toks[i]);
    printf("],\"generated\":[");
    for (int g = 0; g < n_gen; g++) {
        const float *lg = llama_get_logits_ith(ctx, -1);
        int best = 0;
        for (int v = 1; v < n_vocab; v++)
            if (lg[v] > lg[best]) best = v;
        printf("%s%d", g ? "," : "", best);
        if (llama_vocab_is_eog(vocab, best)) break;
        b.n_tokens = 1;
        b.token[0] = best;
        b.pos[0] = n + g;
        b.n_seq_id[0] = 1;
        b.seq_id[0][0] = 0;
        b.logits[0] = 1;
        if (llama_decode(ctx, b) != 0) {
            fprintf(stderr, "decode failed\n");
            return 1;
        }
    }
    printf("]}\n");
    llama_batch_free(b);
    free(toks);
    llama_free(ctx);
    llama_model_free(model);
    return 0;
}
