#include "test_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

int kr_test_passed = 0;
int kr_test_failed = 0;

bool kr_test_check(bool ok, const char *expr, const char *file, int line) {
    if (ok) {
        kr_test_passed++;
    } else {
        kr_test_failed++;
        fprintf(stderr, "FAIL %s:%d: %s\n", file, line, expr);
    }
    return ok;
}

bool kr_test_checkf(bool ok, const char *file, int line, const char *fmt, ...) {
    if (ok) {
        kr_test_passed++;
        return true;
    }
    kr_test_failed++;
    fprintf(stderr, "FAIL %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return false;
}

bool kr_test_check_eq_int(long long a, long long b, const char *ea, const char *eb, const char *file, int line) {
    return kr_test_checkf(a == b, file, line, "%s == %s (%lld vs %lld)", ea, eb, a, b);
}

bool kr_test_check_near(double a, double b, double tol, const char *ea, const char *eb, const char *file, int line) {
    bool ok = fabs(a - b) <= tol && !isnan(a) && !isnan(b);
    return kr_test_checkf(ok, file, line, "|%s - %s| <= %g (%.9g vs %.9g)", ea, eb, tol, a, b);
}

int kr_test_finish(void) {
    printf("%d passed, %d failed\n", kr_test_passed, kr_test_failed);
    return kr_test_failed == 0 ? 0 : 1;
}

static bool is_dir(const char *p) {
    struct stat st;
    return p && stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The checkout the test binary was built from, found at run time so that a
 * binary built elsewhere (a device machine's copy of the tree) still finds
 * its data: $KARA_SOURCE_DIR, else the nearest folder above the binary
 * that holds runtime/include/kara.h. */
const char *kr_test_source_dir(void) {
    static char buf[4096];
    const char *env = getenv("KARA_SOURCE_DIR");
    if (env && is_dir(env)) return env;
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return NULL;
    buf[n] = 0;
    for (char *slash = strrchr(buf, '/'); slash; slash = strrchr(buf, '/')) {
        *slash = 0;
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/runtime/include/kara.h", buf);
        struct stat st;
        if (stat(probe, &st) == 0) return buf;
    }
    return NULL;
}

const char *kr_test_shared_dir(void) {
    static char buf[4200];
    const char *env = getenv("KARA_SHARED");
    if (env && is_dir(env)) return env;
    const char *src = kr_test_source_dir();
    if (!src) return NULL;
    /* a copy inside the tree first (what travels to a device machine) */
    snprintf(buf, sizeof buf, "%s/shared/reference", src);
    if (is_dir(buf)) {
        snprintf(buf, sizeof buf, "%s/shared", src);
        return buf;
    }
    snprintf(buf, sizeof buf, "%s/../shared", src);
    if (is_dir(buf)) return buf;
    return NULL;
}

const char *kr_test_require_shared(const char *test_name) {
    const char *d = kr_test_shared_dir();
    if (!d) {
        printf("SKIPPED %s: ../shared (or $KARA_SHARED) not found; this test needs its models/reference data\n",
               test_name);
        exit(77);
    }
    return d;
}

const char *kr_test_path(const char *dir, const char *name) {
    static char bufs[8][4096];
    static int next = 0;
    char *b = bufs[next];
    next = (next + 1) % 8;
    snprintf(b, 4096, "%s/%s", dir, name);
    return b;
}

char *kr_test_read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return NULL;
    }
    buf[n] = 0;
    fclose(f);
    if (size) *size = (size_t)n;
    return buf;
}

static char tmp_dir[256];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* The scratch directory and everything in it goes when the test exits. */
static void remove_tmpdir(void) {
    if (tmp_dir[0] && !getenv("KARA_TEST_KEEP")) nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

const char *kr_test_tmpdir(void) {
    if (!tmp_dir[0]) {
        snprintf(tmp_dir, sizeof tmp_dir, "/tmp/kara-test-%d", (int)getpid());
        mkdir(tmp_dir, 0700);
        atexit(remove_tmpdir);
    }
    return tmp_dir;
}
