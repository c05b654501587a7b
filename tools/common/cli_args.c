#include "cli_args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exit_codes.h"
#include "safe_output.h"

bool kr_arg_int(const char *cmd, const char *flag, const char *value, long long lo, long long hi, long long *out) {
    if (!value) {
        fprintf(stderr, "kara %s: %s needs a value\n", cmd, flag);
        return false;
    }
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    if (errno || end == value || *end) {
        fprintf(stderr, "kara %s: %s: '%s' is not an integer\n", cmd, flag, value);
        return false;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "kara %s: %s: %lld is outside [%lld, %lld]\n", cmd, flag, v, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

bool kr_arg_float(const char *cmd, const char *flag, const char *value, double lo, double hi, double *out) {
    if (!value) {
        fprintf(stderr, "kara %s: %s needs a value\n", cmd, flag);
        return false;
    }
    char *end;
    errno = 0;
    double v = strtod(value, &end);
    if (errno || end == value || *end || isnan(v)) {
        fprintf(stderr, "kara %s: %s: '%s' is not a number\n", cmd, flag, value);
        return false;
    }
    if (v < lo || v > hi) {
        fprintf(stderr, "kara %s: %s: %g is outside [%g, %g]\n", cmd, flag, v, lo, hi);
        return false;
    }
    *out = v;
    return true;
}

int32_t kr_arg_id_list(const char *cmd, const char *flag, const char *value, int32_t **out) {
    *out = NULL;
    if (!value) {
        fprintf(stderr, "kara %s: %s needs a value\n", cmd, flag);
        return -1;
    }
    size_t cap = 1;
    for (const char *p = value; *p; p++) cap += *p == ',';
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return -1;
    int32_t n = 0;
    const char *p = value;
    while (*p) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX || (*end && *end != ',')) {
            fprintf(stderr, "kara %s: %s: bad token id at '%s'\n", cmd, flag, p);
            free(ids);
            return -1;
        }
        ids[n++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    *out = ids;
    return n;
}

void kr_text_too_large(const char *cmd, const char *what) {
    fprintf(stderr, "kara %s: %s: larger than %u bytes (64 MiB), the limit of a prompt text\n", cmd, what,
            KR_PROMPT_TEXT_MAX);
    errno = EFBIG;
}

char *kr_read_text_file(const char *cmd, const char *path, size_t *len) {
    return kr_read_text_file_max(cmd, path, KR_PROMPT_TEXT_MAX, len);
}

char *kr_read_text_file_max(const char *cmd, const char *path, size_t max, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kara %s: cannot open '%s': %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    kr_out_add_input(path, "the prompt file");
    char *text = kr_read_text_stream_max(cmd, f, path, max, len);
    fclose(f);
    return text;
}

char *kr_read_text_stream(const char *cmd, FILE *f, const char *path, size_t *len) {
    return kr_read_text_stream_max(cmd, f, path, KR_PROMPT_TEXT_MAX, len);
}

char *kr_read_text_stream_max(const char *cmd, FILE *f, const char *path, size_t max, size_t *len) {
    if (max > KR_PROMPT_TEXT_MAX) max = KR_PROMPT_TEXT_MAX;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) { /* never more than max + 1 bytes */
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t want = cap - n - 1, left = max + 1 - n;
        if (want > left) want = left;
        size_t got = fread(buf + n, 1, want, f);
        n += got;
        if (got < want || n > max) break;
    }
    bool too_large = buf && n > max, read_error = buf && ferror(f);
    if (too_large || read_error) {
        free(buf);
        if (read_error)
            fprintf(stderr, "kara %s: error reading '%s'\n", cmd, path);
        else if (max == KR_PROMPT_TEXT_MAX)
            kr_text_too_large(cmd, path);
        else
            errno = ERANGE; /* over the caller's bound: the caller says why */
        return NULL;
    }
    if (buf) {
        /* a UTF-8 byte order mark is not text of the prompt */
        if (n >= 3 && !memcmp(buf, "\xEF\xBB\xBF", 3)) {
            fprintf(stderr, "kara %s: %s: skipping the UTF-8 byte order mark at its start\n", cmd, path);
            memmove(buf, buf + 3, n - 3);
            n -= 3;
        }
        buf[n] = 0;
        if (len) *len = n;
    }
    return buf;
}

int kr_exit_for_status(kara_status st) {
    switch (st) {
    case KARA_ERR_IO: return KR_EXIT_NOINPUT;
    case KARA_ERR_FORMAT:
    case KARA_ERR_UNSUPPORTED:
    case KARA_ERR_TOKEN:
    case KARA_ERR_CONTEXT_FULL:
    case KARA_ERR_KV_BUDGET: return KR_EXIT_DATAERR;
    case KARA_ERR_CONFIG:
    case KARA_ERR_ARG: return KR_EXIT_CONFIG;
    default: return KR_EXIT_SOFTWARE;
    }
}

int kr_exit_for_context(kara_device device, kara_status st) {
    if (device == KARA_DEVICE_CUDA && (st == KARA_ERR_UNSUPPORTED || st == KARA_ERR_DEVICE)) return KR_EXIT_UNAVAILABLE;
    return kr_exit_for_status(st);
}

/* llama.cpp's -e escapes, in place: \n \t \r \\ \' \" \a \b \f \v and
 * \xHH (a NUL would end the prompt, so \x00 is dropped). An unknown or cut-off escape is kept as typed. */
void kr_unescape(char *s) {
    char *w = s;
    for (const char *r = s; *r; r++) {
        if (*r != '\\' || !r[1]) {
            *w++ = *r;
            continue;
        }
        char c = *++r;
        switch (c) {
        case 'n': *w++ = '\n'; break;
        case 't': *w++ = '\t'; break;
        case 'r': *w++ = '\r'; break;
        case 'a': *w++ = '\a'; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'v': *w++ = '\v'; break;
        case '\\':
        case '\'':
        case '"': *w++ = c; break;
        case 'x': {
            int v = 0, n = 0;
            while (n < 2 && isxdigit((unsigned char)r[1])) {
                char h = *++r;
                v = v * 16 + (isdigit((unsigned char)h) ? h - '0' : (tolower((unsigned char)h) - 'a' + 10));
                n++;
            }
            if (n && v) {
                *w++ = (char)v;
            } else if (!n) {
                *w++ = '\\';
                *w++ = 'x';
            }
            break;
        }
        default: *w++ = '\\'; *w++ = c;
        }
    }
    *w = '\0';
}
