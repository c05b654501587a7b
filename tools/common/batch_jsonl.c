/* batch_jsonl.c - reading Batch API requests, writing results, scanning an
 * output for resume (see batch_jsonl.h). */
#include "batch_jsonl.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_canon.h"
#include "strset.h"

/* "input line N[, column C]: message" - column only when a value is named. */
static bool req_error(char *err, size_t size, const char **code, const char *which, int line, const kr_json *at,
                      const char *fmt, ...) {
    *code = which;
    int w = at ? snprintf(err, size, "input line %d, column %d: ", line, at->col)
               : snprintf(err, size, "input line %d: ", line);
    if (w >= 0 && (size_t)w < size) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + w, size - (size_t)w, fmt, ap);
        va_end(ap);
    }
    return false;
}

static bool blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return false;
    return true;
}

/* The code point of the UTF-8 character at s (valid: the JSON reader
 * checked it) and its length in *n. */
static uint32_t utf8_at(const unsigned char *s, size_t left, size_t *n) {
    int k = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 1;
    if ((size_t)k > left) k = 1;
    uint32_t c = k == 1 ? s[0] : s[0] & (0x7Fu >> k);
    for (int i = 1; i < k; i++) c = c << 6 | (s[i] & 0x3Fu);
    *n = (size_t)k;
    return c;
}

void kr_batch_show_id(const char *id, size_t len, char *buf, size_t size) {
    size_t w = 0;
    if (size < 16) {
        if (size) buf[0] = 0;
        return;
    }
    buf[w++] = '"';
    for (size_t i = 0; i < len;) {
        const unsigned char *p = (const unsigned char *)id + i;
        char one[16];
        size_t n = 1;
        if (*p == '"' || *p == '\\')
            snprintf(one, sizeof one, "\\%c", *p);
        else if (*p >= 0x20 && *p < 0x7F)
            snprintf(one, sizeof one, "%c", *p);
        else {
            uint32_t c = utf8_at(p, len - i, &n);
            snprintf(one, sizeof one, c > 0xFFFF ? "\\U%08X" : "\\u%04x", (unsigned)c);
        }
        size_t m = strlen(one);
        if (w + m + 5 > size) {
            memcpy(buf + w, "...", 3);
            w += 3;
            break;
        }
        memcpy(buf + w, one, m);
        w += m;
        i += n;
    }
    buf[w++] = '"';
    buf[w] = 0;
}

bool kr_batch_id_plain(const char *id) {
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        if (*p < 0x20 || *p >= 0x7F) return false;
    return true;
}

int kr_batch_request_id(const char *text, size_t len, int line_no, kr_json_doc *doc, const char **id) {
    *id = NULL;
    doc->root = NULL;
    doc->arena = NULL;
    if (len > KR_BATCH_LINE_MAX) return 0;
    if (blank(text, len)) return -1;
    char err[8];
    if (!kr_json_parse(text, len, line_no, doc, err, sizeof err)) return 0;
    const kr_json *v = kr_json_get(doc->root, "custom_id");
    if (!v && kr_json_get(doc->root, "prompt")) v = kr_json_get(doc->root, "id");
    if (!v || v->type != KR_JSON_STRING || v->len == 0 || strlen(v->str) != v->len) return 0;
    *id = v->str;
    return 1;
}

void kr_batch_request_free(kr_batch_request *r) {
    free(r->msgs);
    free(r->text_store);
    r->msgs = NULL;
    r->text_store = NULL;
}

/* A bound or value of a request key as text: whole numbers without an
 * exponent, others the shortest %g that reads back the same. */
static void number_text(double v, bool integer, char *buf, size_t size) {
    if (integer && fabs(v) < 1e20)
        snprintf(buf, size, "%.0f", v);
    else
        for (int prec = 6; prec <= 17; prec++) {
            snprintf(buf, size, "%.*g", prec, v);
            if (strtod(buf, NULL) == v) break;
        }
}

/* A number in [lo, hi] into *out. */
static bool get_number(const kr_json *obj, const char *key, double lo, double hi, bool integer, bool *has, double *out,
                       int line, char *err, size_t size, const char **code) {
    const kr_json *v = kr_json_get(obj, key);
    *has = false;
    *out = 0; /* an absent key leaves 0, never a stale value converted to int (found by fuzz_jsonl under UBSan) */
    if (!v || v->type == KR_JSON_NULL) return true;
    if (v->type != KR_JSON_NUMBER || (integer && v->number != floor(v->number)))
        return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, v, "%s must be %s, got %s", key,
                         integer ? "an integer" : "a number", kr_json_type_name(v->type));
    if (v->number < lo || v->number > hi) {
        char at[40], l[40], h[40];
        number_text(v->number, integer, at, sizeof at);
        number_text(lo, integer, l, sizeof l);
        number_text(hi, integer, h, sizeof h);
        return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, v, "%s %s is out of range [%s, %s]", key, at, l,
                         h);
    }
    *has = true;
    *out = v->number;
    return true;
}

/* A sampling key that is also a configuration key (--temp, --top-k, ...):
 * checked by the configuration's own table, so a request body and a flag
 * take exactly the same values. */
static bool get_config_number(const kr_json *obj, const char *key, const char *config_key, bool integer, bool *has,
                              double *out, int line, char *err, size_t size, const char **code) {
    if (!get_number(obj, key, -HUGE_VAL, HUGE_VAL, integer, has, out, line, err, size, code)) return false;
    if (!*has) return true;
    char text[40];
    number_text(*out, integer, text, sizeof text);
    kara_config scratch;
    kara_config_init(&scratch);
    if (kara_config_set(&scratch, config_key, text, "request") == KARA_OK) return true;
    /* kara_config_set says "request: KEY: PROBLEM"; the request names its own key */
    const char *msg = kara_last_error(), *problem = strstr(msg, ": ");
    problem = problem ? strstr(problem + 2, ": ") : NULL;
    return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, kr_json_get(obj, key),
                     "%s %s (the same limits as %s)", key, problem ? problem + 2 : msg, config_key);
}

/* The text of a message's content: a string, or an array of parts of which
 * the {"type":"text","text":...} ones are joined. */
static bool content_text(kr_batch_request *r, const kr_json *c, size_t *store_used, size_t store_cap, const char **out,
                         int line, char *err, size_t size, const char **code) {
    if (c->type == KR_JSON_STRING) {
        if (strlen(c->str) != c->len)
            return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, c, "content holds a NUL character");
        *out = c->str;
        return true;
    }
    if (c->type != KR_JSON_ARRAY)
        return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, c,
                         "content must be a string or an array of parts, got %s", kr_json_type_name(c->type));
    char *dst = r->text_store + *store_used;
    size_t n = 0;
    for (const kr_json *part = c->first; part; part = part->next) {
        const kr_json *type = kr_json_get(part, "type");
        const kr_json *text = kr_json_get(part, "text");
        if (!type || type->type != KR_JSON_STRING || strcmp(type->str, "text"))
            return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, part,
                             "only content parts of type \"text\" are supported");
        if (!text || text->type != KR_JSON_STRING || strlen(text->str) != text->len)
            return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, part, "a text part needs a \"text\" string");
        if (*store_used + n + text->len + 1 > store_cap)
            return req_error(err, size, code, KR_BATCH_ERR_INTERNAL, line, part, "content parts too large");
        memcpy(dst + n, text->str, text->len);
        n += text->len;
    }
    dst[n] = '\0';
    *store_used += n + 1;
    *out = dst;
    return true;
}

static bool parse_messages(kr_batch_request *r, const kr_json *msgs, size_t line_len, int line, char *err, size_t size,
                           const char **code) {
    if (msgs->type != KR_JSON_ARRAY || msgs->len == 0)
        return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, msgs, "messages must be a non-empty array");
    r->msgs = calloc(msgs->len, sizeof *r->msgs);
    /* joined content parts are never longer than the line itself */
    r->text_store = malloc(line_len + msgs->len + 1);
    if (!r->msgs || !r->text_store)
        return req_error(err, size, code, KR_BATCH_ERR_INTERNAL, line, NULL, "out of memory");
    size_t used = 0;
    static const char *roles[] = {"system", "user", "assistant", "tool", "developer"};
    for (const kr_json *m = msgs->first; m; m = m->next) {
        if (m->type != KR_JSON_OBJECT)
            return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, m, "each message must be an object");
        const kr_json *role = kr_json_get(m, "role"), *content = kr_json_get(m, "content");
        if (!role || role->type != KR_JSON_STRING)
            return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, m, "a message needs a \"role\" string");
        size_t k = 0;
        while (k < sizeof roles / sizeof roles[0] && strcmp(roles[k], role->str)) k++;
        if (k == sizeof roles / sizeof roles[0])
            return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, role,
                             "unknown role \"%s\" (system, user, assistant, tool, developer)", role->str);
        if (!content || content->type == KR_JSON_NULL)
            return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, m, "a message needs \"content\"");
        kara_chat_message *out = &r->msgs[r->n_msgs++];
        out->role = k == 4 ? "system" : roles[k]; /* OpenAI's developer role is the system prompt */
        if (!content_text(r, content, &used, line_len + msgs->len + 1, &out->content, line, err, size, code))
            return false;
    }
    return true;
}

/* The sampling keys, the same in a body and in the plain form. */
static bool parse_sampling(kr_batch_request *r, const kr_json *o, int line, char *err, size_t size, const char **code) {
    double x;
    bool has;
    const char *mt = kr_json_get(o, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
    if (!get_number(o, mt, 1, 16777216, true, &has, &x, line, err, size, code)) return false;
    r->max_tokens = has ? (int32_t)x : -1;
    if (!get_config_number(o, "temperature", "sampling.temperature", false, &r->has_temperature, &x, line, err, size,
                           code))
        return false;
    r->temperature = (float)x;
    if (!get_config_number(o, "top_p", "sampling.top_p", false, &r->has_top_p, &x, line, err, size, code)) return false;
    r->top_p = (float)x;
    if (r->has_top_p && r->top_p <= 0)
        return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, kr_json_get(o, "top_p"), "top_p must be above 0");
    if (!get_config_number(o, "top_k", "sampling.top_k", true, &r->has_top_k, &x, line, err, size, code)) return false;
    r->top_k = (int32_t)x;
    if (!get_config_number(o, "min_p", "sampling.min_p", false, &r->has_min_p, &x, line, err, size, code)) return false;
    r->min_p = (float)x;
    if (!get_config_number(o, "repetition_penalty", "sampling.repeat_penalty", false, &r->has_repeat_penalty, &x, line,
                           err, size, code))
        return false;
    r->repeat_penalty = (float)x;
    /* a JSON number is read as a double: the largest below 2^64 is the top seed */
    if (!get_number(o, "seed", -9223372036854775808.0, 18446744073709549568.0, true, &r->has_seed, &x, line, err, size,
                    code))
        return false;
    r->seed = x < 0 ? (uint64_t)(int64_t)x : (uint64_t)x;
    if (!get_number(o, "n", 1, 1, true, &has, &x, line, err, size, code)) {
        snprintf(err, size, "input line %d: only n = 1 is supported", line);
        return false;
    }
    const kr_json *stream = kr_json_get(o, "stream");
    if (stream && !(stream->type == KR_JSON_NULL || (stream->type == KR_JSON_BOOL && !stream->boolean)))
        return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, stream, "stream must be false in a batch");
    const kr_json *stop = kr_json_get(o, "stop");
    if (stop && stop->type != KR_JSON_NULL) {
        const kr_json *items = stop->type == KR_JSON_ARRAY ? stop->first : stop;
        if (stop->type != KR_JSON_ARRAY && stop->type != KR_JSON_STRING)
            return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, stop,
                             "stop must be a string or an array of strings");
        for (const kr_json *s = items; s; s = stop->type == KR_JSON_ARRAY ? s->next : NULL) {
            if (s->type != KR_JSON_STRING || s->len < 1 || s->len > 255 || strlen(s->str) != s->len)
                return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, s,
                                 "each stop string must have 1 to 255 bytes");
            if (r->n_stop == KR_BATCH_MAX_STOP)
                return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, s, "at most %d stop strings",
                                 KR_BATCH_MAX_STOP);
            r->stop[r->n_stop++] = s->str;
        }
    }
    const kr_json *kw = kr_json_get(o, "chat_template_kwargs");
    const kr_json *et = kr_json_get(kw, "enable_thinking");
    r->think = -1;
    if (et) {
        if (et->type != KR_JSON_BOOL)
            return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, et, "enable_thinking must be true or false");
        r->think = et->boolean;
    }
    const kr_json *model = kr_json_get(o, "model");
    if (model && model->type == KR_JSON_STRING) r->model = model->str;
    return true;
}

/* body.prompt of a /v1/completions request. The API also takes an array
 * of prompts or of token ids; one line is one answer here, so a string or
 * an array holding exactly one string is taken and anything else is
 * refused with a message that says what to send instead. */
static bool completion_prompt(kr_batch_request *r, const kr_json *body, int line, char *err, size_t size,
                              const char **code) {
    const kr_json *p = kr_json_get(body, "prompt");
    if (!p)
        return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, body,
                         "/v1/completions needs body.prompt (a string)");
    if (p->type == KR_JSON_ARRAY) {
        if (p->len == 0)
            return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, p, "body.prompt is an empty array");
        if (p->first->type == KR_JSON_NUMBER || p->first->type == KR_JSON_ARRAY)
            return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, p,
                             "body.prompt as token ids is not supported; send the prompt as text");
        if (p->len > 1)
            return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, p,
                             "body.prompt holds %zu prompts; a batch line takes one (put each on its own line)",
                             p->len);
        p = p->first;
    }
    if (p->type != KR_JSON_STRING)
        return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, p,
                         "/v1/completions needs body.prompt as a string or a one-element array of strings, got %s",
                         kr_json_type_name(p->type));
    if (strlen(p->str) != p->len)
        return req_error(err, size, code, KR_BATCH_ERR_REQUEST, line, p, "body.prompt holds a NUL character");
    r->prompt = p->str;
    return true;
}

bool kr_batch_request_parse(const char *text, size_t len, int line_no, kr_json_doc *doc, kr_batch_request *out,
                            char *err, size_t err_size, const char **code) {
    memset(out, 0, sizeof *out);
    out->line = line_no;
    out->max_tokens = -1;
    out->think = -1;
    if (len > KR_BATCH_LINE_MAX) {
        memset(doc, 0, sizeof *doc);
        return req_error(err, err_size, code, KR_BATCH_ERR_REQUEST, line_no, NULL,
                         "longer than %u bytes (16 MiB), the limit of a request line", KR_BATCH_LINE_MAX);
    }
    char jerr[256];
    if (!kr_json_parse(text, len, line_no, doc, jerr, sizeof jerr)) {
        *code = KR_BATCH_ERR_JSON;
        snprintf(err, err_size, "input %s", jerr);
        return false;
    }
    const kr_json *root = doc->root;
    if (root->type != KR_JSON_OBJECT)
        return req_error(err, err_size, code, KR_BATCH_ERR_REQUEST, line_no, root,
                         "a request must be a JSON object, got %s", kr_json_type_name(root->type));
    const kr_json *cid = kr_json_get(root, "custom_id");
    bool plain = !cid && kr_json_get(root, "prompt");
    if (plain) cid = kr_json_get(root, "id");
    if (cid && cid->type == KR_JSON_STRING && cid->len > 0 && strlen(cid->str) == cid->len) out->custom_id = cid->str;
    if (cid && cid->type == KR_JSON_STRING && cid->len > 0 && !out->custom_id) {
        char shown[128];
        kr_batch_show_id(cid->str, cid->len, shown, sizeof shown);
        return req_error(err, err_size, code, KR_BATCH_ERR_REQUEST, line_no, cid,
                         "%s %s holds a NUL character (\\u0000) at byte %zu; it must be a string without NUL",
                         plain ? "id" : "custom_id", shown, strlen(cid->str) + 1);
    }
    if (!out->custom_id)
        return req_error(err, err_size, code, KR_BATCH_ERR_REQUEST, line_no, cid,
                         cid ? "%s must be a non-empty string" : "missing \"%s\"", plain ? "id" : "custom_id");
    if (plain) {
        const kr_json *prompt = kr_json_get(root, "prompt");
        if (prompt->type != KR_JSON_STRING || strlen(prompt->str) != prompt->len)
            return req_error(err, err_size, code, KR_BATCH_ERR_REQUEST, line_no, prompt, "prompt must be a string");
        out->chat = true;
        out->msgs = calloc(2, sizeof *out->msgs);
        if (!out->msgs) return req_error(err, err_size, code, KR_BATCH_ERR_INTERNAL, line_no, NULL, "out of memory");
        const kr_json *sys = kr_json_get(root, "system");
        if (sys && sys->type == KR_JSON_STRING) out->msgs[out->n_msgs++] = (kara_chat_message){"system", sys->str};
        out->msgs[out->n_msgs++] = (kara_chat_message){"user", prompt->str};
        return parse_sampling(out, root, line_no, err, err_size, code);
    }
    const kr_json *method = kr_json_get(root, "method");
    if (method && (method->type != KR_JSON_STRING || strcmp(method->str, "POST")))
        return req_error(err, err_size, code, KR_BATCH_ERR_REQUEST, line_no, method, "method must be \"POST\"");
    const kr_json *url = kr_json_get(root, "url");
    bool completions = false;
    if (url) {
        if (url->type != KR_JSON_STRING ||
            (strcmp(url->str, "/v1/chat/completions") && strcmp(url->str, "/v1/completions")))
            return req_error(err, err_size, code, KR_BATCH_ERR_REQUEST, line_no, url,
                             "unsupported url %s%s%s (supported: /v1/chat/completions, /v1/completions)",
                             url->type == KR_JSON_STRING ? "\"" : "",
                             url->type == KR_JSON_STRING ? url->str : kr_json_type_name(url->type),
                             url->type == KR_JSON_STRING ? "\"" : "");
        completions = !strcmp(url->str, "/v1/completions");
    }
    const kr_json *body = kr_json_get(root, "body");
    if (!body || body->type != KR_JSON_OBJECT)
        return req_error(err, err_size, code, KR_BATCH_ERR_REQUEST, line_no, body,
                         body ? "body must be an object" : "missing \"body\"");
    if (completions) {
        if (!completion_prompt(out, body, line_no, err, err_size, code)) return false;
    } else {
        const kr_json *msgs = kr_json_get(body, "messages");
        if (!msgs) return req_error(err, err_size, code, KR_BATCH_ERR_REQUEST, line_no, body, "missing body.messages");
        out->chat = true;
        if (!parse_messages(out, msgs, len, line_no, err, err_size, code)) return false;
    }
    return parse_sampling(out, body, line_no, err, err_size, code);
}

void kr_batch_make_id(char *buf, size_t size, const char *prefix, const char *custom_id, int line) {
    uint64_t h = custom_id ? kr_fnv1a(custom_id, strlen(custom_id)) : (uint64_t)line * 0x9e3779b97f4a7c15ull;
    h ^= kr_fnv1a(prefix, strlen(prefix));
    h = kara_engine_seed(h, 0x6b617261);
    snprintf(buf, size, "%s%016llx", prefix, (unsigned long long)h);
}

static void write_custom_id(kr_jbuf *b, const char *custom_id) {
    if (custom_id)
        kr_jbuf_str(b, custom_id, strlen(custom_id));
    else
        kr_jbuf_cstr(b, "null");
}

/* The body of a legacy /v1/completions answer: "text_completion" with
 * choices[].text, as the OpenAI API documents for that endpoint. */
/* What both bodies start with: id, object, created, model. */
static void write_body_head(kr_jbuf *b, const kr_batch_result *r, const char *id_prefix, const char *object) {
    char id[64];
    kr_batch_make_id(id, sizeof id, id_prefix, r->custom_id, r->line);
    kr_jbuf_printf(b, "\"id\":\"%s\",\"object\":\"%s\",\"created\":%lld,\"model\":", id, object, (long long)r->created);
    kr_jbuf_str(b, r->model ? r->model : "", r->model ? strlen(r->model) : 0);
}

static void write_completion_body(kr_jbuf *b, const kr_batch_result *r) {
    write_body_head(b, r, "cmpl-", "text_completion");
    kr_jbuf_cstr(b, ",\"choices\":[{\"text\":");
    kr_jbuf_str(b, r->content ? r->content : "", r->content ? r->content_len : 0);
    kr_jbuf_printf(b, ",\"index\":0,\"logprobs\":null,\"finish_reason\":\"%s\"}]", r->finish_reason);
}

static void write_chat_body(kr_jbuf *b, const kr_batch_result *r) {
    write_body_head(b, r, "chatcmpl-", "chat.completion");
    kr_jbuf_cstr(b, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
    kr_jbuf_str(b, r->content ? r->content : "", r->content ? r->content_len : 0);
    kr_jbuf_cstr(b, ",\"reasoning_content\":");
    if (r->reasoning && r->reasoning_len)
        kr_jbuf_str(b, r->reasoning, r->reasoning_len);
    else
        kr_jbuf_cstr(b, "null");
    kr_jbuf_printf(b, "},\"logprobs\":null,\"finish_reason\":\"%s\"}]", r->finish_reason);
}

/* The envelope of the Batch API output format around one body. */
static void write_result(kr_jbuf *b, const kr_batch_result *r, bool completion) {
    char id[64];
    kr_batch_make_id(id, sizeof id, "batch_req_", r->custom_id, r->line);
    kr_jbuf_printf(b, "{\"id\":\"%s\",\"custom_id\":", id);
    write_custom_id(b, r->custom_id);
    kr_batch_make_id(id, sizeof id, "req_", r->custom_id, r->line);
    kr_jbuf_printf(b, ",\"response\":{\"status_code\":200,\"request_id\":\"%s\",\"body\":{", id);
    if (completion)
        write_completion_body(b, r);
    else
        write_chat_body(b, r);
    kr_jbuf_printf(b,
                   ",\"usage\":{\"prompt_tokens\":%d,\"completion_tokens\":%d,\"total_tokens\":%d}}},"
                   "\"error\":null}\n",
                   r->prompt_tokens, r->completion_tokens, r->prompt_tokens + r->completion_tokens);
}

void kr_batch_write_ok(kr_jbuf *b, const kr_batch_result *r) { write_result(b, r, false); }

void kr_batch_write_completion(kr_jbuf *b, const kr_batch_result *r) { write_result(b, r, true); }

void kr_batch_write_error(kr_jbuf *b, const char *custom_id, int line, const char *code, const char *message) {
    char id[64];
    kr_batch_make_id(id, sizeof id, "batch_req_", custom_id, line);
    kr_jbuf_printf(b, "{\"id\":\"%s\",\"custom_id\":", id);
    write_custom_id(b, custom_id);
    kr_jbuf_printf(b, ",\"response\":null,\"error\":{\"code\":\"%s\",\"message\":", code);
    kr_jbuf_str(b, message, strlen(message));
    kr_jbuf_printf(b, ",\"line\":%d}}\n", line);
}

uint64_t kr_batch_request_hash_raw(const char *text, size_t len) {
    while (len > 0 && (*text == ' ' || *text == '\t' || *text == '\r')) text++, len--;
    while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\t' || text[len - 1] == '\r')) len--;
    return kr_fnv1a(text, len);
}

uint64_t kr_batch_request_hash(const char *text, size_t len) {
    kr_json_doc doc;
    char err[160];
    uint64_t h;
    kr_jbuf b = {0};
    if (kr_json_parse(text, len, 1, &doc, err, sizeof err)) kr_json_canon(&b, doc.root);
    if (doc.root && !b.failed && b.p) /* "~" keeps a canonical text apart from raw bytes */
        h = kr_fnv1a(b.p, b.len) ^ kr_fnv1a("~", 1);
    else
        h = kr_batch_request_hash_raw(text, len);
    kr_jbuf_free(&b);
    kr_json_doc_free(&doc);
    return h;
}

void kr_batch_add_hash(kr_jbuf *b, uint64_t hash) {
    if (b->failed || b->len < 2 || b->p[b->len - 1] != '\n' || b->p[b->len - 2] != '}') return;
    b->len -= 2;
    kr_jbuf_printf(b, ",\"" KR_BATCH_HASH_KEY "\":\"%016llx\"}\n", (unsigned long long)hash);
}

/* A kara_request_hash value: exactly 16 hex digits. */
static bool read_hash(const kr_json *v, uint64_t *out) {
    if (!v || v->type != KR_JSON_STRING || v->len != 16) return false;
    uint64_t h = 0;
    for (size_t i = 0; i < 16; i++) {
        char c = v->str[i];
        int d = c >= '0' && c <= '9' ? c - '0'
            : c >= 'a' && c <= 'f'   ? c - 'a' + 10
            : c >= 'A' && c <= 'F'   ? c - 'A' + 10
                                     : -1;
        if (d < 0) return false;
        h = h << 4 | (uint64_t)d;
    }
    *out = h;
    return true;
}

/* Is this parsed line one of our results? */
static bool read_result(const kr_json *root, kr_batch_scanned *r) {
    if (!root || root->type != KR_JSON_OBJECT) return false;
    const kr_json *cid = kr_json_get(root, "custom_id");
    const kr_json *resp = kr_json_get(root, "response");
    const kr_json *error = kr_json_get(root, "error");
    if (!cid || !resp || !error) return false;
    if (cid->type != KR_JSON_STRING && cid->type != KR_JSON_NULL) return false;
    r->custom_id = cid->type == KR_JSON_STRING ? cid->str : NULL;
    r->failed = error->type == KR_JSON_OBJECT;
    const kr_json *l = kr_json_get(error, "line");
    r->input_line = l && l->type == KR_JSON_NUMBER ? (int)l->number : 0;
    const kr_json *code = kr_json_get(error, "code");
    r->code = code && code->type == KR_JSON_STRING ? code->str : NULL;
    if (!r->custom_id && !r->input_line) return false;
    r->has_hash = read_hash(kr_json_get(root, KR_BATCH_HASH_KEY), &r->hash);
    return r->failed || resp->type == KR_JSON_OBJECT;
}

long kr_batch_scan_results(const char *data, size_t len, void (*fn)(void *user, const kr_batch_scanned *r), void *user,
                           char *err, size_t err_size) {
    size_t start = 0, good = 0;
    int out_line = 0;
    while (start < len) {
        const char *nl = memchr(data + start, '\n', len - start);
        if (!nl) break; /* torn final line */
        size_t end = (size_t)(nl - data);
        out_line++;
        if (!blank(data + start, end - start)) {
            kr_json_doc doc;
            char jerr[160];
            bool parsed = kr_json_parse(data + start, end - start, out_line, &doc, jerr, sizeof jerr);
            kr_batch_scanned r;
            memset(&r, 0, sizeof r);
            bool ok = parsed && read_result(doc.root, &r);
            if (!ok) {
                bool last = !memchr(nl + 1, '\n', len - end - 1);
                kr_json_doc_free(&doc);
                /* a last line that does not parse is damage from a crash: redo it; one
                 * that parses is somebody's data, not ours to delete */
                if (last && !parsed) break;
                snprintf(err, err_size, "output line %d is not a batch result (%s)", out_line,
                         parsed ? "no custom_id, response and error" : jerr);
                return -1;
            }
            r.text = data + start;
            r.len = end + 1 - start;
            r.out_line = out_line;
            fn(user, &r);
            kr_json_doc_free(&doc);
        }
        start = end + 1;
        good = start;
    }
    return (long)good;
}

/* kr_batch_scan_lines' callback under kr_batch_scan_results. */
typedef struct scan_lines_ctx {
    kr_batch_scan_fn fn;
    void *user;
} scan_lines_ctx;

static void scan_lines_fn(void *user, const kr_batch_scanned *r) {
    scan_lines_ctx *c = user;
    c->fn(c->user, r->custom_id, r->input_line, r->failed, r->text, r->len);
}

long kr_batch_scan_lines(const char *data, size_t len, kr_batch_scan_fn fn, void *user, char *err, size_t err_size) {
    scan_lines_ctx c = {fn, user};
    return kr_batch_scan_results(data, len, scan_lines_fn, &c, err, err_size);
}

/* The older callback, without the line's text. */
typedef struct scan_compat {
    void (*fn)(void *user, const char *custom_id, int input_line, bool failed);
    void *user;
} scan_compat;

static void scan_compat_fn(void *user, const char *custom_id, int input_line, bool failed, const char *text,
                           size_t len) {
    (void)text;
    (void)len;
    scan_compat *c = user;
    c->fn(c->user, custom_id, input_line, failed);
}

long kr_batch_scan_output(const char *data, size_t len,
                          void (*fn)(void *user, const char *custom_id, int input_line, bool failed), void *user,
                          char *err, size_t err_size) {
    scan_compat c = {fn, user};
    return kr_batch_scan_lines(data, len, scan_compat_fn, &c, err, err_size);
}
