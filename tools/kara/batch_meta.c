/* batch_meta.c - the settings record of a `kara batch` output (batch_meta.h). */
#include "batch_meta.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch_output.h"
#include "exit_codes.h"

/* Content hash of a file: four independent 64-bit lanes over its 8-byte
 * words (so the loop runs at memory speed, not at one multiply per byte),
 * folded with the length. Not cryptographic: it tells models apart. */
static uint64_t lane(uint64_t acc, uint64_t w) {
    acc += w * 0xc2b2ae3d27d4eb4full;
    acc = acc << 31 | acc >> 33;
    return acc * 0x9e3779b185ebca87ull;
}

static int hash_file(const char *path, uint64_t *out, long long *size) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return errno;
    struct stat st;
    int bad = fstat(fd, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : !S_ISREG(st.st_mode) ? EINVAL : 0;
    if (bad) { /* a FIFO or a device would never end */
        close(fd);
        return bad;
    }
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = malloc(CHUNK + 8);
    if (!buf) {
        close(fd);
        return ENOMEM;
    }
    uint64_t acc[4] = {1, 2, 3, 4};
    long long total = 0;
    size_t have = 0; /* bytes in buf not hashed yet */
    int e = 0;
    for (;;) {
        ssize_t k = read(fd, buf + have, CHUNK - have);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) {
            e = errno;
            break;
        }
        have += (size_t)k;
        total += k;
        size_t words = k == 0 ? (have + 7) / 8 : have / 32 * 4;
        if (k == 0) memset(buf + have, 0, 8);
        for (size_t i = 0; i < words; i++) {
            uint64_t w;
            memcpy(&w, buf + 8 * i, 8);
            acc[i & 3] = lane(acc[i & 3], w);
        }
        if (k == 0) break;
        memmove(buf, buf + 8 * words, have - 8 * words);
        have -= 8 * words;
    }
    free(buf);
    close(fd);
    uint64_t h = (uint64_t)total * 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 4; i++) h = lane(h ^ acc[i], (uint64_t)i);
    *out = h;
    *size = total;
    return e;
}

/* Keys that change an answer (see batch_meta.h). */
static bool recorded_key(const char *k) {
    static const char *const prefix[] = {"sampling.", "kv_cache.", "kara.", "baselines.", "chat."};
    if (!strcmp(k, "runtime.device") || !strcmp(k, "context.size")) return true;
    for (size_t i = 0; i < sizeof prefix / sizeof *prefix; i++)
        if (!strncmp(k, prefix[i], strlen(prefix[i]))) return true;
    return false;
}

static bool limit_key(const char *k) {
    return !strcmp(k, "context.size") || !strcmp(k, "kv_cache.budget") || !strcmp(k, "kv_cache.seq_tokens");
}

static void put(kr_jbuf *b, const char *key, const char *value) {
    kr_jbuf_raw(b, b->len > 1 ? "," : "", b->len > 1 ? 1 : 0);
    kr_jbuf_str(b, key, strlen(key));
    kr_jbuf_raw(b, ":", 1);
    kr_jbuf_str(b, value, strlen(value));
}

int kr_batch_meta_build(const kara_config *cfg, bool ignore_eos, kr_jbuf *out) {
    uint64_t h = 0;
    long long size = 0;
    int e = hash_file(cfg->model_path, &h, &size);
    if (e) {
        fprintf(stderr, "kara batch: cannot read the model %s: %s\n", cfg->model_path,
                e == EINVAL ? "not a regular file" : strerror(e));
        return KR_EXIT_NOINPUT;
    }
    char v[KARA_CONFIG_PATH_MAX + 32];
    kr_jbuf_reset(out);
    kr_jbuf_raw(out, "{", 1);
    put(out, "format", "1");
    snprintf(v, sizeof v, "%016llx-%lld", (unsigned long long)h, size);
    put(out, "model.hash", v);
    put(out, "model.file", cfg->model_path);
    for (int i = 0; kara_config_key(i); i++) {
        const char *k = kara_config_key(i);
        if (recorded_key(k) && kara_config_get(cfg, k, v, sizeof v) == KARA_OK) put(out, k, v);
    }
    put(out, "batch.ignore_eos", ignore_eos ? "true" : "false");
    kr_jbuf_raw(out, "}\n", 2);
    return out->failed ? KR_EXIT_SOFTWARE : -1;
}

static const char *value_of(const kr_json *obj, const char *key) {
    const kr_json *v = kr_json_get(obj, key);
    return v && v->type == KR_JSON_STRING ? v->str : NULL;
}

/* Is key a limit in both records (kv_cache.method full in both)? */
static bool is_limit(const kr_json *old, const kr_json *now, const char *key) {
    const char *a = value_of(old, "kv_cache.method"), *b = value_of(now, "kv_cache.method");
    return limit_key(key) && a && b && !strcmp(a, "full") && !strcmp(b, "full");
}

/* Print the keys that differ (old -> new), answer settings first; count them. */
static int list_changes(const kr_json *old, const kr_json *now, bool limits, FILE *f) {
    int n = 0;
    for (int pass = 0; pass < 2; pass++) {
        const kr_json *from = pass ? old : now, *other = pass ? now : old;
        for (const kr_json *m = from->first; m; m = m->next) {
            if (!strcmp(m->key, "model.file") || !strcmp(m->key, "format")) continue;
            if (pass && kr_json_get(other, m->key)) continue; /* seen in the first pass */
            const char *a = value_of(old, m->key), *b = value_of(now, m->key);
            if (a && b && !strcmp(a, b)) continue;
            if (is_limit(old, now, m->key) != limits) continue;
            if (f) {
                if (!strcmp(m->key, "model.hash"))
                    fprintf(f, "%s  model: %s (%s) -> %s (%s)", n ? "\n" : "", value_of(old, "model.file"),
                            a ? a : "(none)", value_of(now, "model.file"), b ? b : "(none)");
                else
                    fprintf(f, "%s  %s: %s -> %s", n ? "\n" : "", m->key, a ? a : "(none)", b ? b : "(none)");
            }
            n++;
        }
    }
    if (f && n) fputc('\n', f);
    return n;
}

int kr_batch_meta_compare(const char *path, const kr_jbuf *now, bool have_answers, bool rerun, kr_batch_meta_check *c) {
    memset(c, 0, sizeof *c);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        if (have_answers)
            fprintf(stderr,
                    "kara batch: note: %s is missing (an output of an older kara): the settings of the answers "
                    "already there are unknown; this run's are recorded\n",
                    path);
        return -1;
    }
    if (fd < 0) {
        fprintf(stderr, "kara batch: cannot read %s: %s\n", path, strerror(errno));
        return KR_EXIT_IOERR;
    }
    size_t len = 0;
    char *data = kr_batch_read_fd(fd, &len);
    close(fd);
    if (!data) {
        fprintf(stderr, "kara batch: cannot read %s: %s\n", path, strerror(errno));
        return KR_EXIT_IOERR;
    }
    if (!have_answers) { /* nothing of the old settings is left to mix with */
        free(data);
        return -1;
    }
    kr_json_doc od, nd;
    char err[160];
    bool ok = kr_json_parse(data, len, 1, &od, err, sizeof err) && od.root->type == KR_JSON_OBJECT &&
        value_of(od.root, "model.hash");
    int rc = -1;
    if (!ok) {
        fprintf(stderr,
                "kara batch: %s is not a kara batch settings record%s%s: the settings of the answers in the output "
                "are unknown; move it away to resume anyway, or start over with --no-resume\n",
                path, od.root ? "" : ": ", od.root ? "" : err);
        rc = KR_EXIT_DATAERR;
    } else if (!kr_json_parse(now->p, now->len, 1, &nd, err, sizeof err)) {
        kr_json_doc_free(&nd);
        rc = KR_EXIT_SOFTWARE;
    } else {
        c->recorded = true;
        c->limits_changed = list_changes(od.root, nd.root, true, NULL) > 0;
        int n = list_changes(od.root, nd.root, false, NULL);
        if (n && rerun) {
            fprintf(stderr,
                    "kara batch: the output's answers were computed with other settings (%s); --on-changed rerun: "
                    "every answer moves to %.*s.superseded and runs again:\n",
                    path, (int)(strlen(path) - strlen(".meta")), path);
            list_changes(od.root, nd.root, false, stderr);
            c->drop_all = true;
        } else if (n) {
            fprintf(stderr, "kara batch: the output's answers were computed with other settings (%s), %d change%s:\n",
                    path, n, n == 1 ? "" : "s");
            list_changes(od.root, nd.root, false, stderr);
            fprintf(stderr,
                    "kara batch: nothing was run: resume with the recorded settings, or --on-changed rerun to run "
                    "every request again (the old answers move to OUTPUT.superseded), or --no-resume\n");
            rc = KR_EXIT_CONFIG;
        }
        if (rc < 0 && c->limits_changed) {
            fprintf(stderr, "kara batch: limits changed since the answers were written (kv_cache.method full):\n");
            list_changes(od.root, nd.root, true, stderr);
        }
        kr_json_doc_free(&nd);
    }
    kr_json_doc_free(&od);
    free(data);
    return rc;
}

int kr_batch_meta_write(const char *path, const kr_jbuf *now) {
    if (now->failed || !now->p) return ENOMEM;
    return kr_batch_write_atomic(path, now->p, now->len);
}

int kr_batch_meta_open(kr_batch_meta *m, const kara_config *cfg, bool ignore_eos, bool resume, int n_answered,
                       const char *hold_path) {
    memset(&m->c, 0, sizeof m->c);
    int rc = kr_batch_meta_build(cfg, ignore_eos, &m->rec);
    if (rc >= 0) return rc;
    size_t len = strlen(cfg->batch_output) + sizeof ".meta";
    if (!(m->path = malloc(len))) return KR_EXIT_SOFTWARE;
    snprintf(m->path, len, "%s.meta", cfg->batch_output);
    if (!resume) return -1;
    struct stat st;
    bool have = n_answered > 0 || (stat(hold_path, &st) == 0 && st.st_size > 0);
    /* rerun accepts other settings only when asked for: it is also the default for edited requests */
    const char *origin = kara_config_origin(cfg, "batch.on_changed");
    bool rerun = cfg->batch_on_changed == 0 && origin && strcmp(origin, "default") != 0;
    return kr_batch_meta_compare(m->path, &m->rec, have, rerun, &m->c);
}

int kr_batch_meta_commit(const kr_batch_meta *m) {
    int e = kr_batch_meta_write(m->path, &m->rec);
    if (!e) return -1;
    fprintf(stderr, "kara batch: cannot write %s: %s\n", m->path, strerror(e));
    return KR_EXIT_IOERR;
}

void kr_batch_meta_free(kr_batch_meta *m) {
    kr_jbuf_free(&m->rec);
    free(m->path);
    m->path = NULL;
}
