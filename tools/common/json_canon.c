/* json_canon.c - canonical text of a parsed JSON value (json_canon.h). */
#include "json_canon.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_member(const void *a, const void *b) {
    const kr_json *x = *(const kr_json *const *)a, *y = *(const kr_json *const *)b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    return (x->key_len > y->key_len) - (x->key_len < y->key_len);
}

/* By value: 4, 4.0 and 4e0 are one number (the request reader takes
 * numbers by value), -0 is 0. */
static void canon_number(kr_jbuf *b, const kr_json *v) {
    double x = v->number == 0 ? 0 : v->number;
    if (x == floor(x) && fabs(x) < 9007199254740992.0)
        kr_jbuf_printf(b, "%.0f", x);
    else
        kr_jbuf_printf(b, "%.17g", x);
}

/* Objects: members sorted by key (the parser refuses duplicate keys, so
 * the order is total). */
static void canon_object(kr_jbuf *b, const kr_json *v) {
    const kr_json **m = v->len ? malloc(v->len * sizeof *m) : NULL;
    if (v->len && !m) {
        b->failed = true;
        return;
    }
    size_t n = 0;
    for (const kr_json *c = v->first; c && n < v->len; c = c->next) m[n++] = c;
    if (n > 1) qsort(m, n, sizeof *m, cmp_member);
    kr_jbuf_raw(b, "{", 1);
    for (size_t i = 0; i < n; i++) {
        if (i) kr_jbuf_raw(b, ",", 1);
        kr_jbuf_str(b, m[i]->key, m[i]->key_len);
        kr_jbuf_raw(b, ":", 1);
        kr_json_canon(b, m[i]);
    }
    kr_jbuf_raw(b, "}", 1);
    free(m);
}

void kr_json_canon(kr_jbuf *b, const kr_json *v) {
    switch (v->type) {
    case KR_JSON_NULL: kr_jbuf_cstr(b, "null"); break;
    case KR_JSON_BOOL: kr_jbuf_cstr(b, v->boolean ? "true" : "false"); break;
    case KR_JSON_NUMBER: canon_number(b, v); break;
    case KR_JSON_STRING: kr_jbuf_str(b, v->str, v->len); break;
    case KR_JSON_OBJECT: canon_object(b, v); break;
    case KR_JSON_ARRAY:
        kr_jbuf_raw(b, "[", 1);
        for (const kr_json *m = v->first; m; m = m->next) {
            if (m != v->first) kr_jbuf_raw(b, ",", 1);
            kr_json_canon(b, m);
        }
        kr_jbuf_raw(b, "]", 1);
        break;
    }
}
