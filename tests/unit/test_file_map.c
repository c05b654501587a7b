/*
 * test_file_map.c - the two ways a GGUF file reaches memory: a file mapping
 * and a copy in (huge-page advised) anonymous memory. Both must give the
 * same bytes, the same errors, and a model loaded either way the same
 * logits bit for bit.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_map.h"
#include "kara.h"
#include "synth_model.h"
#include "test_util.h"

typedef int (*open_fn)(const char *path, kr_file_map *m);

static void write_bytes(const char *path, const uint8_t *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!CHECK_MSG(f != NULL, "cannot write %s", path)) return;
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

/* Contents, sizes and errors, for both openers. */
static void test_open(const char *name, open_fn open) {
    const char *dir = kr_test_tmpdir();
    char path[512];
    /* a size that is not a multiple of a page or of a huge page */
    const size_t n = (3u << 20) + 12345;
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(i * 2654435761u >> 13);
    snprintf(path, sizeof path, "%s/data.bin", dir);
    write_bytes(path, b, n);
    kr_file_map m;
    CHECK_MSG(open(path, &m) == 0, "%s: open", name);
    CHECK_MSG(m.size == n, "%s: size %zu, want %zu", name, m.size, n);
    CHECK_MSG(m.data && memcmp(m.data, b, n) == 0, "%s: bytes differ from the file", name);
    kr_file_map_close(&m);
    CHECK_MSG(m.data == NULL && m.size == 0, "%s: close resets the view", name);

    snprintf(path, sizeof path, "%s/empty.bin", dir);
    write_bytes(path, b, 0);
    CHECK_MSG(open(path, &m) == 0 && m.size == 0 && m.data != NULL, "%s: empty file is a valid empty view", name);
    kr_file_map_close(&m);

    CHECK_EQ_INT(open("/nonexistent/kara/file.gguf", &m), ENOENT);
    /* not regular files: refused at once, a FIFO without blocking */
    CHECK_EQ_INT(open(dir, &m), KR_FILE_NOT_REGULAR);
    CHECK_EQ_INT(open("/dev/null", &m), KR_FILE_NOT_REGULAR);
    snprintf(path, sizeof path, "%s/fifo", dir);
    if (CHECK(mkfifo(path, 0600) == 0)) {
        CHECK_EQ_INT(open(path, &m), KR_FILE_NOT_REGULAR);
        unlink(path);
    }
    CHECK(strstr(kr_file_error_str(KR_FILE_NOT_REGULAR), "not a regular file") != NULL);
    int err = 0;
    FILE *f = kr_file_open_regular(dir, &err);
    CHECK(f == NULL && err == KR_FILE_NOT_REGULAR);
    snprintf(path, sizeof path, "%s/data.bin", dir);
    write_bytes(path, b, n);
    f = kr_file_open_regular(path, &err);
    if (CHECK(f != NULL)) {
        CHECK(fgetc(f) == b[0]); /* a blocking stream again, positioned at the start */
        fclose(f);
    }
    free(b);
}

/* Logits of one prompt with the model mapped or read: bit-identical (read
 * weights kept in the file's layout, as mapped ones always are; the
 * interleaved layouts sum in another order, test_forward_reference). */
static void logits_of(const char *path, bool use_mmap, float *out, int32_t n_vocab) {
    kara_model_params mp;
    kara_model_params_init(&mp);
    mp.use_mmap = use_mmap;
    mp.no_repack = true;
    kara_model *m = NULL;
    if (!CHECK_MSG(kara_model_load(path, &mp, &m) == KARA_OK, "load (mmap %d): %s", use_mmap, kara_last_error()))
        return;
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 64;
    cp.n_threads = 1;
    cp.kv.method = KARA_KV_METHOD_FULL;
    kara_context *c = NULL;
    if (CHECK_MSG(kara_context_create(m, &cp, &c) == KARA_OK, "context: %s", kara_last_error())) {
        const int32_t toks[] = {1, 17, 42, 99, 7, 3};
        kara_batch b = kara_batch_one_sequence(toks, 6, 0, 0);
        CHECK(kara_decode(c, &b) == KARA_OK);
        memcpy(out, kara_get_logits(c, -1), sizeof(float) * (size_t)n_vocab);
        kara_context_free(c);
    }
    kara_model_free(m);
}

static void test_model_both_ways(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/tiny.gguf", kr_test_tmpdir());
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    kr_synth_preset(&sp, "tiny");
    char err[256];
    if (!CHECK_MSG(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK, "synth: %s", err)) return;
    kara_model *m = NULL;
    if (!CHECK(kara_model_load(path, NULL, &m) == KARA_OK)) return;
    const int32_t n_vocab = kara_model_n_vocab(m);
    kara_model_free(m);
    float *a = calloc((size_t)n_vocab, sizeof(float)), *b = calloc((size_t)n_vocab, sizeof(float));
    logits_of(path, true, a, n_vocab);
    logits_of(path, false, b, n_vocab);
    CHECK_MSG(memcmp(a, b, sizeof(float) * (size_t)n_vocab) == 0, "logits differ between mapped and read weights");
    free(a);
    free(b);
}

int main(void) {
    test_open("kr_file_map_open", kr_file_map_open);
    test_open("kr_file_read_anon", kr_file_read_anon);
    test_model_both_ways();
    return kr_test_finish();
}
