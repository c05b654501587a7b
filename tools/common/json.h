/* json.h - a small JSON reader and writer for the JSONL files of the tools
 * (`kara batch` reads OpenAI Batch API requests and writes results).
 *
 * Reading: one document per call, parsed into a tree held in an arena that
 * kara_json_doc_free releases at once. Strict RFC 8259: no comments, no
 * trailing commas, no NaN; strings must be valid UTF-8 (\u escapes with
 * surrogate pairs are decoded); duplicate keys in an object are an error.
 * Errors name the line and column (1-based, columns in characters) where
 * the problem is, so a JSONL reader can point at the input line.
 *
 * Writing: a growable buffer with helpers that escape strings. Text that is
 * not valid UTF-8 (a model may emit half a character) is written with
 * U+FFFD in place of each bad byte, so the output is always valid JSON.
 */
#ifndef KARA_JSON_H
#define KARA_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum kara_json_type {
    KARA_JSON_NULL = 0,
    KARA_JSON_BOOL,
    KARA_JSON_NUMBER,
    KARA_JSON_STRING,
    KARA_JSON_ARRAY,
    KARA_JSON_OBJECT
} kara_json_type;

typedef struct kara_json kara_json;
struct kara_json {
    kara_json_type type;
    int line, col;           /* where the value starts (1-based) */
    bool boolean;            /* BOOL */
    double number;           /* NUMBER */
    bool integer;            /* NUMBER written without fraction or exponent */
    const char *str;         /* STRING: decoded UTF-8, NUL-terminated (may hold \u0000: use len) */
    size_t len;              /* STRING: bytes; ARRAY, OBJECT: members */
    const char *key;         /* member of an OBJECT: its key (decoded, NUL-terminated) */
    size_t key_len;
    kara_json *first;        /* ARRAY, OBJECT: first member */
    kara_json *next;         /* next member of the parent */
};

typedef struct kara_json_doc {
    kara_json *root;
    void *arena;             /* owned blocks */
} kara_json_doc;

/* Parse text[0..len) as one JSON value (white space around it allowed).
 * line0 is the line number of text's first byte (1 for a whole file, N for
 * line N of a JSONL file). On failure returns false, doc->root is NULL and
 * err holds "line L, column C: problem". doc must be freed either way. */
bool kara_json_parse(const char *text, size_t len, int line0, kara_json_doc *doc, char *err, size_t err_size);
void kara_json_doc_free(kara_json_doc *doc);

/* The member named key of an object; NULL when absent or v is not an object. */
const kara_json *kara_json_get(const kara_json *v, const char *key);
/* "null", "boolean", "number", "string", "array", "object". */
const char *kara_json_type_name(kara_json_type t);

/* ---- writing ---- */

typedef struct kara_jbuf {
    char *p;                 /* NUL-terminated while not failed */
    size_t len, cap;
    bool failed;             /* an allocation failed: contents are incomplete */
} kara_jbuf;

void kara_jbuf_reset(kara_jbuf *b);                      /* len = 0, memory kept */
bool kara_jbuf_reserve(kara_jbuf *b, size_t n);          /* room for n more bytes (and a NUL) */
void kara_jbuf_free(kara_jbuf *b);
void kara_jbuf_raw(kara_jbuf *b, const char *s, size_t n);
void kara_jbuf_cstr(kara_jbuf *b, const char *s);        /* raw text */
void kara_jbuf_printf(kara_jbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* s[0..n) as a quoted JSON string: ", \ and control characters escaped,
 * invalid UTF-8 bytes replaced by U+FFFD. */
void kara_jbuf_str(kara_jbuf *b, const char *s, size_t n);
/* A parsed value written back as compact JSON. */
void kara_jbuf_value(kara_jbuf *b, const kara_json *v);

/* Length of the longest prefix of s[0..n) that is valid UTF-8 and ends on
 * a character boundary, or n when all is valid; used to check input text. */
size_t kara_utf8_valid_prefix(const char *s, size_t n);

#endif
