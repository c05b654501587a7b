/* json.c - recursive-descent JSON reader into an arena, and the escaping
 * writer (see json.h). */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 128

/* ------------------------------------------------------------------------ */
/* Arena                                                                     */
/* ------------------------------------------------------------------------ */

typedef struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    max_align_t data[];
} arena_block;

/* Bump allocation from blocks of at least 16 KiB; everything is released at
 * once by kr_json_doc_free, so a document costs a few mallocs. */
static void *arena_alloc(kr_json_doc *doc, size_t n) {
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    arena_block *b = doc->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        arena_block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->next = b;
        nb->used = 0;
        nb->cap = cap;
        doc->arena = nb;
        b = nb;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

void kr_json_doc_free(kr_json_doc *doc) {
    if (!doc) return;
    arena_block *b = doc->arena;
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
    doc->arena = NULL;
    doc->root = NULL;
}

/* ------------------------------------------------------------------------ */
/* UTF-8                                                                     */
/* ------------------------------------------------------------------------ */

/* Length of the valid UTF-8 character at s[0..n) (1..4), or 0 when the
 * bytes there are not one (overlong forms, surrogates and values above
 * U+10FFFF are invalid). */
static int utf8_char_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
        len = 2;
        cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3;
        cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

size_t kr_utf8_valid_prefix(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        int k = utf8_char_len((const unsigned char *)s + i, n - i);
        if (!k) return i;
        i += (size_t)k;
    }
    return n;
}

static size_t utf8_put(char *out, uint32_t cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* ------------------------------------------------------------------------ */
/* Reader                                                                    */
/* ------------------------------------------------------------------------ */

typedef struct parser {
    const char *s;
    size_t n, i;
    int line;          /* line of s[line_start] */
    size_t line_start; /* offset where the current line begins */
    kr_json_doc *doc;
    char *err;
    size_t err_size;
    bool failed;
    size_t col_at, col_line_start; /* memo of the last column computed */
    int col;
} parser;

/* Column (1-based, in characters) of offset at on the current line. Values
 * are met in increasing offsets, so counting goes on from the last answer
 * and a long line costs linear time overall. */
static int column_of(parser *p, size_t at) {
    if (at < p->col_at || p->col_line_start != p->line_start || p->col == 0) {
        p->col_at = p->line_start;
        p->col_line_start = p->line_start;
        p->col = 1;
    }
    for (size_t k = p->col_at; k < at && k < p->n; k++)
        if (((unsigned char)p->s[k] & 0xc0) != 0x80) p->col++;
    p->col_at = at;
    return p->col;
}

static bool fail_at(parser *p, size_t at, const char *fmt, ...) {
    if (p->failed) return false;
    p->failed = true;
    int w = snprintf(p->err, p->err_size, "line %d, column %d: ", p->line, column_of(p, at));
    if (w >= 0 && (size_t)w < p->err_size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err + w, p->err_size - (size_t)w, fmt, ap);
        va_end(ap);
    }
    return false;
}

/* A printable description of the character at offset at, for messages. */
static const char *describe(const parser *p, size_t at, char *buf, size_t size) {
    if (at >= p->n) return "end of input";
    unsigned char c = (unsigned char)p->s[at];
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, size, "'%c'", c);
    else
        snprintf(buf, size, "byte 0x%02x", c);
    return buf;
}

static void skip_ws(parser *p) {
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c == '\n') {
            p->line++;
            p->line_start = p->i + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            break;
        }
        p->i++;
    }
}

static kr_json *new_node(parser *p, kr_json_type t, size_t at) {
    kr_json *v = arena_alloc(p->doc, sizeof *v);
    if (!v) {
        fail_at(p, at, "out of memory");
        return NULL;
    }
    memset(v, 0, sizeof *v);
    v->type = t;
    v->line = p->line;
    v->col = column_of(p, at);
    return v;
}

static int hex4(const char *s) {
    int v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9' ? c - '0'
            : c >= 'a' && c <= 'f'   ? c - 'a' + 10
            : c >= 'A' && c <= 'F'   ? c - 'A' + 10
                                     : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* A string starting at the opening quote; the decoded text goes into the
 * arena (never longer than the source). */
static bool parse_string(parser *p, const char **out, size_t *out_len) {
    size_t start = p->i++;
    /* find the end first to size the copy */
    size_t k = p->i;
    while (k < p->n && p->s[k] != '"') k += p->s[k] == '\\' ? 2 : 1;
    if (k >= p->n) return fail_at(p, start, "unterminated string");
    char *dst = arena_alloc(p->doc, k - p->i + 1);
    if (!dst) return fail_at(p, start, "out of memory");
    size_t o = 0;
    while (p->s[p->i] != '"') {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c < 0x20) return fail_at(p, p->i, "control character U+%04X inside a string (escape it)", c);
        if (c == '\\') {
            char e = p->s[p->i + 1];
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                static const char map[] = "\"\\/\b\f\n\r\t";
                dst[o++] = map[simple - "\"\\/bfnrt"];
                p->i += 2;
                continue;
            }
            if (e != 'u') {
                char buf[16];
                return fail_at(p, p->i, "invalid escape: backslash followed by %s",
                               describe(p, p->i + 1, buf, sizeof buf));
            }
            if (p->i + 6 > p->n || hex4(p->s + p->i + 2) < 0)
                return fail_at(p, p->i, "invalid \\u escape (expected 4 hex digits)");
            uint32_t cp = (uint32_t)hex4(p->s + p->i + 2);
            size_t esc = p->i;
            p->i += 6;
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (p->i + 6 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u' || hex4(p->s + p->i + 2) < 0xdc00 ||
                    hex4(p->s + p->i + 2) > 0xdfff)
                    return fail_at(p, esc, "high surrogate \\u%04X not followed by a low surrogate", cp);
                cp = 0x10000 + ((cp - 0xd800) << 10) + ((uint32_t)hex4(p->s + p->i + 2) - 0xdc00);
                p->i += 6;
            } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                return fail_at(p, esc, "lone low surrogate \\u%04X", cp);
            }
            o += utf8_put(dst + o, cp);
            continue;
        }
        int len = utf8_char_len((const unsigned char *)p->s + p->i, p->n - p->i);
        if (!len) return fail_at(p, p->i, "invalid UTF-8 (byte 0x%02x)", c);
        memcpy(dst + o, p->s + p->i, (size_t)len);
        o += (size_t)len;
        p->i += (size_t)len;
    }
    p->i++; /* closing quote */
    dst[o] = '\0';
    *out = dst;
    *out_len = o;
    return true;
}

static bool parse_number(parser *p, kr_json *v) {
    size_t start = p->i, k = p->i;
    bool integer = true;
    if (k < p->n && p->s[k] == '-') k++;
    if (k < p->n && p->s[k] == '0') {
        k++;
    } else if (k < p->n && p->s[k] >= '1' && p->s[k] <= '9') {
        while (k < p->n && p->s[k] >= '0' && p->s[k] <= '9') k++;
    } else {
        return fail_at(p, start, "invalid number");
    }
    if (k < p->n && p->s[k] == '.') {
        integer = false;
        k++;
        if (k >= p->n || p->s[k] < '0' || p->s[k] > '9')
            return fail_at(p, k, "invalid number: digits expected after '.'");
        while (k < p->n && p->s[k] >= '0' && p->s[k] <= '9') k++;
    }
    if (k < p->n && (p->s[k] == 'e' || p->s[k] == 'E')) {
        integer = false;
        k++;
        if (k < p->n && (p->s[k] == '+' || p->s[k] == '-')) k++;
        if (k >= p->n || p->s[k] < '0' || p->s[k] > '9')
            return fail_at(p, k, "invalid number: digits expected in the exponent");
        while (k < p->n && p->s[k] >= '0' && p->s[k] <= '9') k++;
    }
    char buf[64];
    size_t len = k - start;
    if (len >= sizeof buf) {
        /* very long literals: strtod on a copy in the arena */
        char *copy = arena_alloc(p->doc, len + 1);
        if (!copy) return fail_at(p, start, "out of memory");
        memcpy(copy, p->s + start, len);
        copy[len] = '\0';
        v->number = strtod(copy, NULL);
    } else {
        memcpy(buf, p->s + start, len);
        buf[len] = '\0';
        v->number = strtod(buf, NULL);
    }
    if (!isfinite(v->number)) return fail_at(p, start, "number out of range");
    v->integer = integer;
    p->i = k;
    return true;
}

static kr_json *parse_value(parser *p, int depth);

static bool expect_literal(parser *p, const char *word) {
    size_t n = strlen(word);
    if (p->n - p->i < n || memcmp(p->s + p->i, word, n)) return false;
    p->i += n;
    return true;
}

static kr_json *parse_array(parser *p, kr_json *v, int depth) {
    p->i++; /* [ */
    kr_json **tail = &v->first;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == ']') {
        p->i++;
        return v;
    }
    for (;;) {
        kr_json *item = parse_value(p, depth + 1);
        if (!item) return NULL;
        *tail = item;
        tail = &item->next;
        v->len++;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ']') {
                fail_at(p, p->i, "trailing comma before ']'");
                return NULL;
            }
            continue;
        }
        if (p->i < p->n && p->s[p->i] == ']') {
            p->i++;
            return v;
        }
        char buf[16];
        fail_at(p, p->i, "expected ',' or ']' in an array, got %s", describe(p, p->i, buf, sizeof buf));
        return NULL;
    }
}

static kr_json *parse_object(parser *p, kr_json *v, int depth) {
    p->i++; /* { */
    kr_json **tail = &v->first;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
        return v;
    }
    for (;;) {
        skip_ws(p);
        char buf[16];
        if (p->i >= p->n || p->s[p->i] != '"') {
            if (p->i < p->n && p->s[p->i] == '}' && v->len > 0)
                fail_at(p, p->i, "trailing comma before '}'");
            else
                fail_at(p, p->i, "expected a string key in an object, got %s", describe(p, p->i, buf, sizeof buf));
            return NULL;
        }
        size_t key_at = p->i;
        const char *key;
        size_t key_len;
        if (!parse_string(p, &key, &key_len)) return NULL;
        for (const kr_json *m = v->first; m; m = m->next)
            if (m->key_len == key_len && !memcmp(m->key, key, key_len)) {
                fail_at(p, key_at, "duplicate key \"%s\" in an object (first at line %d, column %d)", key, m->line,
                        m->col);
                return NULL;
            }
        skip_ws(p);
        if (p->i >= p->n || p->s[p->i] != ':') {
            fail_at(p, p->i, "expected ':' after the key \"%s\", got %s", key, describe(p, p->i, buf, sizeof buf));
            return NULL;
        }
        p->i++;
        kr_json *item = parse_value(p, depth + 1);
        if (!item) return NULL;
        item->key = key;
        item->key_len = key_len;
        *tail = item;
        tail = &item->next;
        v->len++;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == '}') {
            p->i++;
            return v;
        }
        fail_at(p, p->i, "expected ',' or '}' in an object, got %s", describe(p, p->i, buf, sizeof buf));
        return NULL;
    }
}

static kr_json *parse_value(parser *p, int depth) {
    skip_ws(p);
    char buf[16];
    if (p->i >= p->n) {
        fail_at(p, p->i, "unexpected end of input (a value was expected)");
        return NULL;
    }
    if (depth > MAX_DEPTH) {
        fail_at(p, p->i, "nesting deeper than %d levels", MAX_DEPTH);
        return NULL;
    }
    size_t at = p->i;
    char c = p->s[p->i];
    kr_json *v;
    switch (c) {
    case '{': v = new_node(p, KR_JSON_OBJECT, at); return v ? parse_object(p, v, depth) : NULL;
    case '[': v = new_node(p, KR_JSON_ARRAY, at); return v ? parse_array(p, v, depth) : NULL;
    case '"': v = new_node(p, KR_JSON_STRING, at); return v && parse_string(p, &v->str, &v->len) ? v : NULL;
    case 't':
    case 'f':
    case 'n':
        v = new_node(p, c == 'n' ? KR_JSON_NULL : KR_JSON_BOOL, at);
        if (!v) return NULL;
        if (expect_literal(p, c == 't' ? "true" : c == 'f' ? "false" : "null")) {
            v->boolean = c == 't';
            return v;
        }
        break;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            v = new_node(p, KR_JSON_NUMBER, at);
            return v && parse_number(p, v) ? v : NULL;
        }
        break;
    }
    fail_at(p, at, "unexpected %s (expected a JSON value)", describe(p, at, buf, sizeof buf));
    return NULL;
}

bool kr_json_parse(const char *text, size_t len, int line0, kr_json_doc *doc, char *err, size_t err_size) {
    doc->root = NULL;
    doc->arena = NULL;
    if (err_size) err[0] = '\0';
    parser p = {text, len, 0, line0 > 0 ? line0 : 1, 0, doc, err, err_size, false, 0, 0, 0};
    kr_json *root = parse_value(&p, 0);
    if (root) {
        skip_ws(&p);
        if (p.i < p.n) {
            char buf[16];
            fail_at(&p, p.i, "unexpected %s after the JSON value", describe(&p, p.i, buf, sizeof buf));
            root = NULL;
        }
    }
    doc->root = root;
    return root != NULL;
}

const kr_json *kr_json_get(const kr_json *v, const char *key) {
    if (!v || v->type != KR_JSON_OBJECT) return NULL;
    size_t n = strlen(key);
    for (const kr_json *m = v->first; m; m = m->next)
        if (m->key_len == n && !memcmp(m->key, key, n)) return m;
    return NULL;
}

const char *kr_json_type_name(kr_json_type t) {
    static const char *names[] = {"null", "boolean", "number", "string", "array", "object"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "?";
}

/* ------------------------------------------------------------------------ */
/* Writer                                                                    */
/* ------------------------------------------------------------------------ */

static bool jbuf_grow(kr_jbuf *b, size_t extra) {
    if (b->failed) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

bool kr_jbuf_reserve(kr_jbuf *b, size_t n) { return jbuf_grow(b, n); }

void kr_jbuf_reset(kr_jbuf *b) {
    b->len = 0;
    b->failed = false;
    if (b->p) b->p[0] = '\0';
}

void kr_jbuf_free(kr_jbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

void kr_jbuf_raw(kr_jbuf *b, const char *s, size_t n) {
    if (!jbuf_grow(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void kr_jbuf_cstr(kr_jbuf *b, const char *s) { kr_jbuf_raw(b, s, strlen(s)); }

void kr_jbuf_printf(kr_jbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        kr_jbuf_raw(b, small, (size_t)n);
        return;
    }
    if (!jbuf_grow(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void kr_jbuf_str(kr_jbuf *b, const char *s, size_t n) {
    /* worst case: every byte becomes \u00XX (6) or U+FFFD (3 bytes) */
    if (!jbuf_grow(b, 6 * n + 2)) return;
    char *o = b->p + b->len;
    *o++ = '"';
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned char c = u[i];
        if (c >= 0x80) {
            int k = utf8_char_len(u + i, n - i);
            if (k) {
                memcpy(o, u + i, (size_t)k);
                o += k;
                i += (size_t)k;
            } else {
                memcpy(o, "\xef\xbf\xbd", 3);
                o += 3;
                i++;
            }
            continue;
        }
        i++;
        switch (c) {
        case '"':
            *o++ = '\\';
            *o++ = '"';
            break;
        case '\\':
            *o++ = '\\';
            *o++ = '\\';
            break;
        case '\n':
            *o++ = '\\';
            *o++ = 'n';
            break;
        case '\r':
            *o++ = '\\';
            *o++ = 'r';
            break;
        case '\t':
            *o++ = '\\';
            *o++ = 't';
            break;
        case '\b':
            *o++ = '\\';
            *o++ = 'b';
            break;
        case '\f':
            *o++ = '\\';
            *o++ = 'f';
            break;
        default:
            if (c < 0x20 || c == 0x7f)
                o += sprintf(o, "\\u%04x", c);
            else
                *o++ = (char)c;
        }
    }
    *o++ = '"';
    *o = '\0';
    b->len = (size_t)(o - b->p);
}

void kr_jbuf_value(kr_jbuf *b, const kr_json *v) {
    switch (v->type) {
    case KR_JSON_NULL: kr_jbuf_cstr(b, "null"); break;
    case KR_JSON_BOOL: kr_jbuf_cstr(b, v->boolean ? "true" : "false"); break;
    case KR_JSON_NUMBER:
        if (v->integer && fabs(v->number) < 9007199254740992.0)
            kr_jbuf_printf(b, "%.0f", v->number);
        else
            kr_jbuf_printf(b, "%.17g", v->number);
        break;
    case KR_JSON_STRING: kr_jbuf_str(b, v->str, v->len); break;
    case KR_JSON_ARRAY:
    case KR_JSON_OBJECT: {
        bool obj = v->type == KR_JSON_OBJECT;
        kr_jbuf_raw(b, obj ? "{" : "[", 1);
        for (const kr_json *m = v->first; m; m = m->next) {
            if (m != v->first) kr_jbuf_raw(b, ",", 1);
            if (obj) {
                kr_jbuf_str(b, m->key, m->key_len);
                kr_jbuf_raw(b, ":", 1);
            }
            kr_jbuf_value(b, m);
        }
        kr_jbuf_raw(b, obj ? "}" : "]", 1);
        break;
    }
    }
}
