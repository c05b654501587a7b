/* config_format.c - kara_config_format: the resolved configuration as YAML,
 * one key per line with where its value came from. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config_impl.h"
#include "status.h"

#define keys kr_config_table()
#define N_KEYS kr_config_table_size()
/* ------------------------------------------------------------------------ */
/* Rendering the whole configuration                                         */
/* ------------------------------------------------------------------------ */

typedef struct out_buf {
    char *buf;
    size_t size, len;
} out_buf;

static void out(out_buf *o, const char *fmt, ...) KR_PRINTF(2, 3);
static void out(out_buf *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->size ? o->size - o->len : 0;
    int w = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (w > 0) o->len += (size_t)w;
}

/* A YAML double-quoted string: every byte that YAML treats specially is
 * escaped, so any path reads back unchanged. */
static void quote(const char *s, char *buf, size_t size) {
    size_t n = 0;
    if (size < 3) return;
    buf[n++] = '"';
    for (; *s && n + 6 < size; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            n += (size_t)snprintf(buf + n, size - n, "\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f)
            n += (size_t)snprintf(buf + n, size - n, "\\x%02x", ch);
        else
            buf[n++] = (char)ch;
    }
    buf[n++] = '"';
    buf[n] = 0;
}

/* Sections are opened as the key paths change: going from "kara.t2c.x" to
 * "baselines.budget_tokens" closes kara.t2c and opens baselines. */
size_t kara_config_format(const kara_config *c, char *buf, size_t size) {
    out_buf o = {buf, size, 0};
    if (size) buf[0] = 0;
    out(&o, "# Kara configuration as resolved; each comment names where the value came from.\n");
    const char *prev = "";
    for (int i = 0; i < N_KEYS; i++) {
        const char *key = keys[i].key;
        /* Length of the section prefix shared with the previous key, in whole components. */
        size_t common = 0;
        for (size_t j = 0; key[j] && key[j] == prev[j]; j++)
            if (key[j] == '.') common = j + 1;
        int depth = 0;
        for (size_t j = 0; j < common; j++) depth += key[j] == '.';
        const char *p = key + common;
        const char *dot;
        while ((dot = strchr(p, '.'))) {
            out(&o, "%s%*s%.*s:\n", depth == 0 && i ? "\n" : "", depth * 2, "", (int)(dot - p), p);
            depth++;
            p = dot + 1;
        }
        char val[KARA_CONFIG_PATH_MAX + 16], text[2 * KARA_CONFIG_PATH_MAX + 64];
        kr_config_fmt_value(&keys[i], c, val, sizeof val);
        if (keys[i].type == K_STRING)
            quote(val, text, sizeof text);
        else
            snprintf(text, sizeof text, "%s", val);
        int w = depth * 2 + (int)strlen(p) + 2 + (int)strlen(text);
        out(&o, "%*s%s: %s%*s  # %s\n", depth * 2, "", p, text, w < 40 ? 40 - w : 0, "", c->origin[i]);
        prev = key;
    }
    return o.len;
}
