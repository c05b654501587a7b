/* json.h - a small JSON reader and writer for the JSONL files of the tools
 * (`kara batch` reads OpenAI Batch API requests and writes results).
 *
 * Reading: one document per call, parsed into a tree held in an arena that
 * kr_json_doc_free releases at once. Strict RFC 8259: no comments, no
 * trailing commas, no NaN; strings must be valid UTF-8 (\u escapes with
 * surrogate pairs are decoded); duplicate keys in an object are an error.
 * Errors name the line and column (1-based, columns in characters) where
 * the problem is, so a JSONL reader can point at the input line.
 *
 * Writing: a growable buffer with helpers that escape strings. Text that is
 * not valid UTF-8 (a model may emit half a character) is written with
 * U+FFFD in place of each bad byte, so the output is always valid JSON.
 */
#ifndef KR_JSON_H
#define KR_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum kr_json_type {
    KR_JSON_NULL = 0,
    KR_JSON_BOOL,
    KR_JSON_NUMBER,
    KR_JSON_STRING,
    KR_JSON_ARRAY,
    KR_JSON_OBJECT
} kr_json_type;

typedef struct kr_json kr_json;
struct kr_json {
    kr_json_type type;
    int line, col;   /* where the value starts (1-based) */
    bool boolean;    /* BOOL */
    double number;   /* NUMBER */
    bool integer;    /* NUMBER written without fraction or exponent */
    const char *str; /* STRING: decoded UTF-8, NUL-terminated (may hold \u0000: use len) */
    size_t len;      /* STRING: bytes; ARRAY, OBJECT: members */
    const char *key; /* member of an OBJECT: its key (decoded, NUL-terminated) */
    size_t key_len;
    kr_json *first; /* ARRAY, OBJECT: first member */
    kr_json *next;  /* next member of the parent */
};

typedef struct kr_json_doc {
    kr_json *root;
    void *arena; /* owned blocks */
} kr_json_doc;

/* Parse text[0..len) as one JSON value (white space around it allowed).
 * line0 is the line number of text's first byte (1 for a whole file, N for
 * line N of a JSONL file). On failure returns false, doc->root is NULL and
 * err holds "line L, column C: problem". doc must be freed either way. */
bool kr_json_parse(const char *text, size_t len, int line0, kr_json_doc *doc, char *err, size_t err_size);
void kr_json_doc_free(kr_json_doc *doc);

/* The member named key of an object; NULL when absent or v is not an object. */
const kr_json *kr_json_get(const kr_json *v, const char *key);
/* "null", "boolean", "number", "string", "array", "object". */
const char *kr_json_type_name(kr_json_type t);

/* ---- writing ---- */

typedef struct kr_jbuf {
    char *p; /* NUL-terminated while not failed */
    size_t len, cap;
    bool failed; /* an allocation failed: contents are incomplete */
} kr_jbuf;

void kr_jbuf_reset(kr_jbuf *b);             /* len = 0, memory kept */
bool kr_jbuf_reserve(kr_jbuf *b, size_t n); /* room for n more bytes (and a NUL) */
void kr_jbuf_free(kr_jbuf *b);
void kr_jbuf_raw(kr_jbuf *b, const char *s, size_t n);
void kr_jbuf_cstr(kr_jbuf *b, const char *s); /* raw text */
void kr_jbuf_printf(kr_jbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* s[0..n) as a quoted JSON string: ", \ and control characters escaped,
 * invalid UTF-8 bytes replaced by U+FFFD. */
void kr_jbuf_str(kr_jbuf *b, const char *s, size_t n);
/* A parsed value written back as compact JSON. */
void kr_jbuf_value(kr_jbuf *b, const kr_json *v);

/* Length of the longest prefix of s[0..n) that is valid UTF-8 and ends on
 * a character boundary, or n when all is valid; used to check input text. */
size_t kr_utf8_valid_prefix(const char *s, size_t n);

#endif
