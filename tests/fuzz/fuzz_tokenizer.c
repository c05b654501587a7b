/* fuzz_tokenizer.c - every tokenizer on arbitrary text. The first byte of
 * an input picks a vocabulary, the second its flags (add_special,
 * parse_special), the rest is the text. Every id is in the vocabulary, a
 * second call with room for exactly *n_tokens gives the same ids, and for
 * byte-level BPE vocabularies the pieces of well-formed UTF-8 text, joined,
 * are the text again. Vocabularies: the shipped model's, the synthetic
 * writer's, and the vocab-only files of ../shared/vocab when present. */
#include <string.h>

#include "fuzz.h"
#include "synth_model.h"
#include "test_util.h"

#define MAX_VOCABS 12
static kara_model *vocabs[MAX_VOCABS];
static bool byte_level[MAX_VOCABS];
static int n_vocabs;

static void add_vocab(const char *path, bool is_byte_level) {
    kara_model_params mp;
    kara_model_params_init(&mp);
    mp.vocab_only = true;
    kara_model *m = NULL;
    if (n_vocabs < MAX_VOCABS && kara_model_load(path, &mp, &m) == KARA_OK) {
        byte_level[n_vocabs] = is_byte_level;
        vocabs[n_vocabs++] = m;
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    kara_log_set(kr_fuzz_quiet_log, NULL);
    add_vocab(KARA_SOURCE_DIR "/tools/train/model/kara-reasoner-1m.gguf", true);
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    char err[256];
    const char *synth = kr_test_path(kr_test_tmpdir(), "fuzz-vocab.gguf");
    if (kr_synth_write(&sp, synth, NULL, NULL, err, sizeof err) == KARA_OK) add_vocab(synth, true);
    const char *shared = kr_test_shared_dir();
    static const struct {
        const char *name;
        bool byte_level;
    } files[] = {{"qwen2", true},      {"llama-bpe", true},     {"gpt-2", true},
                 {"llama-spm", false}, {"deepseek-llm", false}, {"phi-3", false}};
    for (size_t i = 0; shared && i < sizeof files / sizeof files[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/vocab/ggml-vocab-%s.gguf", shared, files[i].name);
        add_vocab(path, files[i].byte_level);
    }
    FUZZ_CHECK(n_vocabs >= 2, "no vocabulary loaded");
    return 0;
}

static bool valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (!k || i + k > n || (k == 2 && c < 0xc2)) return false;
        uint32_t cp = k == 1 ? c : c & (0x7f >> k);
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        if ((k == 3 && cp < 0x800) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += k;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > 4096) return 0;
    int v = data[0] % n_vocabs;
    bool add_special = data[1] & 1, parse_special = data[1] & 2;
    const char *text = (const char *)data + 2;
    int32_t len = (int32_t)(size - 2);
    kara_model *m = vocabs[v];
    int32_t n = 0, cap = 4 * len + 8;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!ids) return 0;
    kara_status st = kara_tokenize(m, text, len, ids, cap, add_special, parse_special, &n);
    FUZZ_CHECK(st == KARA_OK, "vocab %d: tokenize: %s (%d ids)", v, kara_last_error(), n);
    int32_t n_vocab = kara_model_n_vocab(m);
    for (int32_t i = 0; i < n; i++) FUZZ_CHECK(ids[i] >= 0 && ids[i] < n_vocab, "id %d of %d", ids[i], n_vocab);
    if (n > 0) { /* exactly enough room: the same ids */
        int32_t *again = malloc((size_t)n * sizeof *again), n2 = 0;
        if (again) {
            st = kara_tokenize(m, text, len, again, n, add_special, parse_special, &n2);
            FUZZ_CHECK(st == KARA_OK && n2 == n && !memcmp(again, ids, (size_t)n * sizeof *ids),
                       "vocab %d: a second call differs", v);
            free(again);
        }
    }
    /* the pieces, joined */
    char *out = malloc((size_t)len * 4 + 64), piece[256];
    size_t used = 0;
    bool fits = out != NULL;
    for (int32_t i = 0; fits && i < n; i++) {
        int32_t plen = 0;
        st = kara_token_to_piece(m, ids[i], piece, sizeof piece, false, &plen);
        FUZZ_CHECK(st == KARA_OK || (st == KARA_ERR_BUFFER && plen > (int32_t)sizeof piece), "piece of %d: %s", ids[i],
                   kara_last_error());
        if (st != KARA_OK || used + (size_t)plen > (size_t)len * 4 + 64) {
            fits = false;
            break;
        }
        memcpy(out + used, piece, (size_t)plen);
        used += (size_t)plen;
    }
    if (fits && byte_level[v] && !add_special && !parse_special && valid_utf8(data + 2, (size_t)len))
        FUZZ_CHECK(used == (size_t)len && !memcmp(out, text, used), "vocab %d: pieces do not give the text back", v);
    free(out);
    free(ids);
    return 0;
}
