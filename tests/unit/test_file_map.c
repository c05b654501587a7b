/*
 * test_file_map.c - the ways a GGUF image reaches memory: a file mapping
 * and a copy in (huge-page advised) anonymous memory, each from a path or
 * an open descriptor, and a caller's buffer copied or read in place. All
 * must give the same bytes, the same errors, and a model loaded any way
 * the same logits bit for bit.
 */
#include <errno.h>
#include <fcntl.h>
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

/* The fd loaders behind a path-taking signature: the descriptor is opened
 * here (non-blocking, so a FIFO does not hang the test), moved to offset 5
 * first, and must be left open at offset 5. */
static int (*fd_loader)(int fd, kr_file_map *m);
static int via_fd(const char *path, kr_file_map *m) {
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) return errno;
    (void)lseek(fd, 5, SEEK_SET);
    int e = fd_loader(fd, m);
    CHECK_MSG(fcntl(fd, F_GETFD) != -1, "the loader closed the caller's descriptor");
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 5)
        CHECK_MSG(lseek(fd, 0, SEEK_CUR) == 5, "the loader moved the caller's file offset");
    close(fd);
    return e;
}
static int map_via_fd(const char *path, kr_file_map *m) {
    fd_loader = kr_file_map_fd;
    return via_fd(path, m);
}
static int read_via_fd(const char *path, kr_file_map *m) {
    fd_loader = kr_file_read_anon_fd;
    return via_fd(path, m);
}

/* A caller's buffer, copied or borrowed: the same bytes; a copy outlives
 * the buffer, a borrowed view is the buffer itself and unmaps nothing. */
static void test_buffers(void) {
    const size_t n = (2u << 20) + 777;
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(i * 40503u >> 7);
    kr_file_map c, v;
    if (CHECK(kr_file_copy_anon(b, n, &c) == 0)) {
        CHECK(c.size == n && c.anon && memcmp(c.data, b, n) == 0);
        CHECK(c.data != b);
        uint8_t first = b[0];
        b[0] = (uint8_t)~b[0];
        CHECK_MSG(c.data[0] == first, "the copy changed with the caller's buffer");
        b[0] = first;
        kr_file_map_close(&c);
    }
    kr_file_borrow(b, n, &v);
    CHECK(v.data == b && v.size == n && v.map_len == 0 && !v.anon);
    CHECK_MSG(kr_file_map_set_writable(&v, true) == EINVAL, "a borrowed view must never be made writable");
    kr_file_map_close(&v); /* unmaps nothing: b stays valid */
    CHECK(b[n - 1] == (uint8_t)((n - 1) * 40503u >> 7));
    CHECK(kr_file_copy_anon(NULL, 0, &c) == 0 && c.size == 0 && c.data != NULL);
    kr_file_map_close(&c);
    CHECK_EQ_INT(kr_file_copy_anon(NULL, 10, &c), EINVAL);
    CHECK_EQ_INT(kr_file_map_fd(-1, &c), EBADF);
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

/* Logits of the prompt from a loaded model (the defaults: repacked). */
static bool logits_of_model(kara_model *m, float *out, int32_t n_vocab) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 64;
    cp.n_threads = 1;
    cp.kv.method = KARA_KV_METHOD_FULL;
    kara_context *c = NULL;
    if (!CHECK_MSG(kara_context_create(m, &cp, &c) == KARA_OK, "context: %s", kara_last_error())) return false;
    const int32_t toks[] = {1, 17, 42, 99, 7, 3};
    kara_batch b = kara_batch_one_sequence(toks, 6, 0, 0);
    bool ok = CHECK(kara_decode(c, &b) == KARA_OK);
    if (ok) memcpy(out, kara_get_logits(c, -1), sizeof(float) * (size_t)n_vocab);
    kara_context_free(c);
    return ok;
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    /* 64-byte aligned, and one spare byte so that data + 1 is misaligned */
    uint8_t *b = aligned_alloc(64, (*n + 64) / 64 * 64 + 64);
    if (b && fread(b, 1, *n, f) != *n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    return b;
}

/* kara_model_load_from_fd and _from_buffer: the same logits as from the
 * path, bit for bit, with the defaults (repacked) and read in place; a
 * copied buffer may be freed (here: overwritten) right after the load;
 * bad sources fail with a message that names them. */
static void test_model_sources(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/tiny-src.gguf", kr_test_tmpdir());
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    kr_synth_preset(&sp, "tiny");
    char err[256];
    if (!CHECK_MSG(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK, "synth: %s", err)) return;
    kara_model *m = NULL;
    if (!CHECK(kara_model_load(path, NULL, &m) == KARA_OK)) return;
    const int32_t n_vocab = kara_model_n_vocab(m);
    float *want = calloc((size_t)n_vocab, sizeof(float)), *got = calloc((size_t)n_vocab, sizeof(float));
    logits_of_model(m, want, n_vocab);
    kara_model_free(m);

    int fd = open(path, O_RDONLY);
    if (CHECK(fd >= 0)) {
        m = NULL;
        CHECK_MSG(kara_model_load_from_fd(fd, NULL, &m) == KARA_OK, "from fd: %s", kara_last_error());
        close(fd); /* the model does not need the descriptor */
        if (m && logits_of_model(m, got, n_vocab))
            CHECK_MSG(memcmp(want, got, sizeof(float) * (size_t)n_vocab) == 0, "logits from fd differ from path");
        kara_model_free(m);
    }
    size_t n = 0;
    uint8_t *buf = read_file(path, &n);
    if (!CHECK(buf != NULL)) goto out;
    m = NULL;
    CHECK_MSG(kara_model_load_from_buffer(buf, n, NULL, &m) == KARA_OK, "from buffer: %s", kara_last_error());
    uint8_t *saved = malloc(n);
    memcpy(saved, buf, n);
    memset(buf, 0xA5, n); /* the caller frees its buffer: the copy must not care */
    if (m && logits_of_model(m, got, n_vocab))
        CHECK_MSG(memcmp(want, got, sizeof(float) * (size_t)n_vocab) == 0, "logits from a copied buffer differ");
    kara_model_free(m);
    memcpy(buf, saved, n);

    /* read in place: the file's layouts, so compare with a mapped load */
    kara_model_params mp;
    kara_model_params_init(&mp);
    mp.use_mmap = true;
    float *mapped = calloc((size_t)n_vocab, sizeof(float));
    m = NULL;
    if (CHECK(kara_model_load(path, &mp, &m) == KARA_OK)) logits_of_model(m, mapped, n_vocab);
    kara_model_free(m);
    m = NULL;
    CHECK_MSG(kara_model_load_from_buffer(buf, n, &mp, &m) == KARA_OK, "in place: %s", kara_last_error());
    if (m && logits_of_model(m, got, n_vocab))
        CHECK_MSG(memcmp(mapped, got, sizeof(float) * (size_t)n_vocab) == 0, "logits read in place differ");
    kara_model_free(m);

    /* errors */
    memmove(buf + 1, buf, n);
    m = (kara_model *)buf;
    CHECK_EQ_INT(kara_model_load_from_buffer(buf + 1, n, &mp, &m), KARA_ERR_ARG);
    CHECK(m == NULL && strstr(kara_last_error(), "memory buffer: the buffer is not aligned") != NULL);
    CHECK_EQ_INT(kara_model_load_from_buffer(buf + 1, n, NULL, &m), KARA_OK); /* copied: any alignment */
    kara_model_free(m);
    CHECK_EQ_INT(kara_model_load_from_buffer(saved, n / 2, NULL, &m), KARA_ERR_FORMAT);
    CHECK_MSG(strstr(kara_last_error(), "memory buffer") != NULL, "truncated: %s", kara_last_error());
    CHECK_EQ_INT(kara_model_load_from_buffer(NULL, 10, NULL, &m), KARA_ERR_ARG);
    CHECK_EQ_INT(kara_model_load_from_buffer(saved, 0, NULL, &m), KARA_ERR_FORMAT);
    CHECK_EQ_INT(kara_model_load_from_fd(-1, NULL, &m), KARA_ERR_IO);
    CHECK_MSG(strstr(kara_last_error(), "file descriptor -1") != NULL, "bad fd: %s", kara_last_error());
    fd = open(kr_test_tmpdir(), O_RDONLY);
    if (CHECK(fd >= 0)) {
        CHECK_EQ_INT(kara_model_load_from_fd(fd, NULL, &m), KARA_ERR_IO);
        CHECK_MSG(strstr(kara_last_error(), "not a regular file") != NULL, "directory fd: %s", kara_last_error());
        close(fd);
    }
    CHECK_EQ_INT(kara_model_load_from_buffer(saved, n, NULL, NULL), KARA_ERR_ARG);
    free(saved);
    free(mapped);
    free(buf);
out:
    free(want);
    free(got);
}

int main(void) {
    test_open("kr_file_map_open", kr_file_map_open);
    test_open("kr_file_read_anon", kr_file_read_anon);
    test_open("kr_file_map_fd", map_via_fd);
    test_open("kr_file_read_anon_fd", read_via_fd);
    test_buffers();
    test_model_both_ways();
    test_model_sources();
    return kr_test_finish();
}
