/* status.c - status names, the per-thread last-error message, logging,
 * version and system information. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kernels.h"

static _Thread_local char last_error[1024] = "";

const char *kara_status_str(kara_status status) {
    switch (status) {
    case KARA_OK: return "ok";
    case KARA_DONE: return "done";
    case KARA_STOPPED: return "stopped";
    case KARA_ERR_ARG: return "invalid argument";
    case KARA_ERR_ABORTED: return "aborted";
    case KARA_ERR_IO: return "I/O error";
    case KARA_ERR_FORMAT: return "malformed input";
    case KARA_ERR_UNSUPPORTED: return "unsupported";
    case KARA_ERR_TOKEN: return "token out of range";
    case KARA_ERR_NOMEM: return "out of memory";
    case KARA_ERR_KV_BUDGET: return "KV budget exceeded";
    case KARA_ERR_CONTEXT_FULL: return "context full";
    case KARA_ERR_CONFIG: return "bad configuration";
    case KARA_ERR_INTERNAL: return "internal error";
    case KARA_ERR_DEVICE: return "device error";
    case KARA_ERR_BUFFER: return "buffer too small";
    }
    return "unknown status";
}

const char *kara_last_error(void) { return last_error; }

kara_status kr_set_error(kara_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return st;
}

kara_status kr_error_prefix(kara_status st, const char *fmt, ...) {
    char inner[sizeof last_error];
    memcpy(inner, last_error, sizeof inner);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof last_error) snprintf(last_error + n, sizeof last_error - (size_t)n, ": %s", inner);
    return st;
}

static kara_log_fn log_fn = NULL;
static void *log_user = NULL;
static kara_log_level log_max = KARA_LOG_WARN;

void kara_log_set(kara_log_fn fn, void *user) {
    log_fn = fn;
    log_user = user;
}

void kara_log_set_level(kara_log_level max_level) { log_max = max_level; }

void kr_log(kara_log_level level, const char *fmt, ...) {
    if (!log_fn && level > log_max) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (log_fn) {
        log_fn(level, msg, log_user);
        return;
    }
    static const char *names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "kara: %s: %s\n", names[level], msg);
}

int kara_version_number(void) { return KARA_VERSION_NUMBER; }

const char *kara_version_string(void) {
    static char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", KARA_VERSION_MAJOR, KARA_VERSION_MINOR, KARA_VERSION_PATCH);
    return v;
}

const char *kara_system_info(void) {
    static _Thread_local char info[128];
    const kr_kernels *k = kr_kernels_get();
#ifdef _OPENMP
    const char *omp = "openmp";
#else
    const char *omp = "no-openmp";
#endif
    snprintf(info, sizeof info, "isa=%s threads=%s", k->name, omp);
    return info;
}
