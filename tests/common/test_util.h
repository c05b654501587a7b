/*
 * test_util.h - the small harness every test program uses: CHECK macros that
 * count failures and keep going, a closing "N passed, N failed" line, and the
 * lookup of ../shared (or $KARA_SHARED) with an explicit skip (exit 77).
 */
#ifndef KR_TEST_UTIL_H
#define KR_TEST_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

extern int kr_test_passed;
extern int kr_test_failed;

#define CHECK(cond) kr_test_check((cond), #cond, __FILE__, __LINE__)
#define CHECK_MSG(cond, ...) kr_test_checkf((cond), __FILE__, __LINE__, __VA_ARGS__)
#define CHECK_EQ_INT(a, b) kr_test_check_eq_int((long long)(a), (long long)(b), #a, #b, __FILE__, __LINE__)
#define CHECK_NEAR(a, b, tol) kr_test_check_near((double)(a), (double)(b), (double)(tol), #a, #b, __FILE__, __LINE__)

bool kr_test_check(bool ok, const char *expr, const char *file, int line);
bool kr_test_checkf(bool ok, const char *file, int line, const char *fmt, ...);
bool kr_test_check_eq_int(long long a, long long b, const char *ea, const char *eb, const char *file, int line);
bool kr_test_check_near(double a, double b, double tol, const char *ea, const char *eb, const char *file, int line);

/* Print "N passed, N failed" and return the exit code (0 when none failed). */
int kr_test_finish(void);

/* Path of the shared folder ($KARA_SHARED, else shared/ inside the checkout
 * when it holds reference/, else ../shared beside it; the checkout found
 * at run time by kr_test_source_dir), or NULL when absent. */
const char *kr_test_shared_dir(void);
/* The source tree, found at run time ($KARA_SOURCE_DIR, else the nearest
 * folder above the test binary holding runtime/include/kara.h); NULL when
 * neither is found. */
const char *kr_test_source_dir(void);
/* Like kr_test_shared_dir, but when absent prints why and exits 77 (skip). */
const char *kr_test_require_shared(const char *test_name);
/* Join dir and name into a static buffer (rotating, 8 slots). */
const char *kr_test_path(const char *dir, const char *name);
/* Read a whole file; *size gets its length. Returns malloc'd bytes (NUL-
 * terminated) or NULL. */
char *kr_test_read_file(const char *path, size_t *size);
/* A scratch directory for this test process (created once, under /tmp). */
const char *kr_test_tmpdir(void);
/* Write the synthetic model of tools/common/synth_model.c (preset "tiny" and
 * so on, with the given arch, seed and context length) to FILE in the test's
 * temporary folder and load it; NULL, with the reason on stderr, on failure. */

#endif
