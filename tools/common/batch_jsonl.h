/* batch_jsonl.h - the JSONL lines of `kara batch`: OpenAI Batch API
 * requests in, results out, and the scan of an existing output that
 * --resume relies on.
 *
 * Input, one JSON object per line (blank lines are skipped):
 *   {"custom_id":"q1","method":"POST","url":"/v1/chat/completions",
 *    "body":{"model":"...","messages":[{"role":"user","content":"..."}],
 *            "max_tokens":512,"temperature":0.6,"top_p":0.95,"seed":7,"stop":["\n\n"]}}
 *   url "/v1/completions" takes body.prompt (raw text, no chat template): a
 *   string or an array of exactly one string (several prompts or token ids
 *   are refused: one line is one answer);
 *   the plain form {"id":"q1","prompt":"...", "max_tokens":..., ...} is one
 *   user message through the chat template (the sampling keys sit beside it).
 * Body keys read: messages, prompt, model, max_tokens (max_completion_tokens),
 * temperature, top_p, top_k, min_p, seed, stop, repetition_penalty, n (must
 * be 1), stream (must be false), chat_template_kwargs.enable_thinking.
 * Other keys are ignored, as vLLM does.
 *
 * Output, one line per request:
 *   {"id":"batch_req_...","custom_id":"q1","response":{"status_code":200,
 *    "request_id":"req_...","body":{chat.completion}},"error":null}
 *   where a /v1/completions request gets a "text_completion" body instead:
 *    {"id":"cmpl-...","object":"text_completion","created":...,"model":...,
 *     "choices":[{"text":"...","index":0,"logprobs":null,"finish_reason":...}],
 *     "usage":{"prompt_tokens":...,"completion_tokens":...,"total_tokens":...}}
 *   {"id":"batch_req_...","custom_id":"q1","response":null,
 *    "error":{"code":"...","message":"input line 7: ...","line":7}}
 * custom_id is null for a line whose custom_id could not be read; "line"
 * (the input line number) then identifies it. `kara batch` adds a last
 * top-level field "kara_request_hash":"<16 hex digits>" (kr_batch_add_hash)
 * naming the request the line answers, so a resume can tell a changed
 * request from an answered one; lines without it (older versions) are
 * still read.
 */
#ifndef KR_BATCH_JSONL_H
#define KR_BATCH_JSONL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "kara.h"

#define KR_BATCH_MAX_STOP 8
/* The longest request line, in bytes (newline not counted): 16 MiB. A prompt that fills a context of a
 * million tokens is about 4 MiB of text; 16 MiB leaves room for JSON escapes and several messages, and
 * bounds what one line costs before it is refused (its parse allocates a few times its length). A longer
 * line is an error line ("input line N: longer than 16777216 bytes ..."); the job goes on. The input
 * reader keeps only the first KR_BATCH_LINE_MAX + 1 bytes of such a line. */
#define KR_BATCH_LINE_MAX (16u << 20)

/* Error codes written in error lines. */
#define KR_BATCH_ERR_JSON "invalid_json"
#define KR_BATCH_ERR_REQUEST "invalid_request"
#define KR_BATCH_ERR_CONTEXT "context_length_exceeded"
#define KR_BATCH_ERR_BUDGET "kv_budget_exceeded"
#define KR_BATCH_ERR_INTERNAL "internal_error"

typedef struct kr_batch_request {
    int line;                /* input line number (1-based) */
    const char *custom_id;   /* NULL when missing or not readable */
    bool chat;               /* messages through the chat template; false: raw prompt */
    kara_chat_message *msgs; /* chat: malloc'd array, strings in the doc or in text_store */
    size_t n_msgs;
    const char *prompt; /* !chat: raw text */
    const char *model;  /* body.model, NULL when absent */
    int32_t max_tokens; /* -1: not given */
    bool has_temperature, has_top_p, has_top_k, has_min_p, has_seed, has_repeat_penalty;
    float temperature, top_p, min_p, repeat_penalty;
    int32_t top_k;
    uint64_t seed;
    int think; /* -1: not given, 0 off, 1 on (chat_template_kwargs.enable_thinking) */
    int n_stop;
    const char *stop[KR_BATCH_MAX_STOP];
    char *text_store; /* malloc'd: concatenated content parts */
} kr_batch_request;

/* Parse line line_no (text[0..len), no newline) into *out; strings point
 * into *doc, which the caller frees after using them. On failure returns
 * false with err = "input line N[, column C]: problem" and *code one of the
 * KARA_BATCH_ERR_* codes; out->custom_id is set when it could be read, so
 * the error line can carry it. kr_batch_request_free either way. */
bool kr_batch_request_parse(const char *text, size_t len, int line_no, kr_json_doc *doc, kr_batch_request *out,
                            char *err, size_t err_size, const char **code);
void kr_batch_request_free(kr_batch_request *r);

/* Only the custom_id of a line (duplicate detection before any work):
 * 1 = found (*id points into doc), 0 = none (the line will become an error
 * line; so is a line longer than KR_BATCH_LINE_MAX), -1 = blank line. */
int kr_batch_request_id(const char *text, size_t len, int line_no, kr_json_doc *doc, const char **id);

/* A custom_id quoted for a message, with every character that is not
 * printable ASCII written as an escape (\u0000 for NUL, \u00e9 for e-acute,
 * \U0001F600 beyond U+FFFF), cut with "..." to fit size. */
void kr_batch_show_id(const char *id, size_t len, char *buf, size_t size);
/* True when id is printable ASCII only. */
bool kr_batch_id_plain(const char *id);

/* Stable ids derived from a custom_id (or the line number): "batch_req_",
 * "req_", "chatcmpl-" and "cmpl-" followed by 16 hex digits. */
void kr_batch_make_id(char *buf, size_t size, const char *prefix, const char *custom_id, int line);

typedef struct kr_batch_result {
    const char *custom_id;
    int line;
    const char *model;
    const char *content;
    size_t content_len;
    const char *reasoning; /* NULL or empty: reasoning_content is null */
    size_t reasoning_len;
    const char *finish_reason; /* "stop" or "length" */
    int32_t prompt_tokens, completion_tokens;
    int64_t created; /* unix seconds */
} kr_batch_result;

/* Append one whole result line (with its '\n') to b: a chat.completion
 * body, or with _completion the text_completion body of /v1/completions. */
void kr_batch_write_ok(kr_jbuf *b, const kr_batch_result *r);
void kr_batch_write_completion(kr_jbuf *b, const kr_batch_result *r);
void kr_batch_write_error(kr_jbuf *b, const char *custom_id, int line, const char *code, const char *message);

/* Scan an existing output (data[0..len)) for answered requests: fn gets the
 * custom_id (NULL for a line without one), the input line recorded in its
 * error (0 if none) and whether it is an error line. Returns the number of
 * bytes that hold complete results: a torn final line (no '\n', or a last
 * line that does not parse - what a crash in the middle of a write leaves)
 * is left out so the caller can truncate it away and redo that request.
 * A broken line before the last, or a last line that parses but is not a
 * result, is not crash damage: returns -1 with err naming the output line. */
long kr_batch_scan_output(const char *data, size_t len,
                          void (*fn)(void *user, const char *custom_id, int input_line, bool failed), void *user,
                          char *err, size_t err_size);

/* The request hash of an input line: 64-bit FNV-1a of its canonical JSON
 * text (json_canon.h: keys sorted, no white space, numbers by value), so
 * re-serialising a request without changing its meaning keeps its answer,
 * while any change of a value - prompt, sampling keys, url - makes it a
 * different request. A line that does not parse is hashed on its exact
 * bytes (kr_batch_request_hash_raw). */
uint64_t kr_batch_request_hash(const char *text, size_t len);
/* The hash of versions before canonical hashing: FNV-1a of the exact bytes,
 * leading and trailing white space (and a '\r') left out. A resume takes
 * a line carrying it as the answer of an unchanged request too. */
uint64_t kr_batch_request_hash_raw(const char *text, size_t len);
#define KR_BATCH_HASH_KEY "kara_request_hash"
/* Add ,"kara_request_hash":"..." as the last field of the one result line
 * in b (which ends in "}\n"). */
void kr_batch_add_hash(kr_jbuf *b, uint64_t hash);

/* One result line found by a scan. */
typedef struct kr_batch_scanned {
    const char *custom_id; /* NULL for a line without one */
    int input_line;        /* recorded in its error, 0 if none */
    bool failed;           /* an error line */
    const char *code;      /* its error.code, NULL if none */
    int out_line;          /* its line number in the scanned file */
    bool has_hash;         /* it carries a well-formed kara_request_hash */
    uint64_t hash;
    const char *text; /* the line, its '\n' included */
    size_t len;
} kr_batch_scanned;
/* The scan under the two below, with everything known about each line. */
long kr_batch_scan_results(const char *data, size_t len, void (*fn)(void *user, const kr_batch_scanned *r), void *user,
                           char *err, size_t err_size);

/* The same scan, giving fn each result line's text too (text[0..len),
 * its '\n' included): what --ordered needs to take back results it had
 * set aside in its hold file. */
typedef void (*kr_batch_scan_fn)(void *user, const char *custom_id, int input_line, bool failed, const char *text,
                                 size_t len);
long kr_batch_scan_lines(const char *data, size_t len, kr_batch_scan_fn fn, void *user, char *err, size_t err_size);

#endif
