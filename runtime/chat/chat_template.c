/*
 * chat_template.c - the chat template families in C: ChatML, Qwen3,
 * DeepSeek-R1-Distill, Llama 3 and Llama 3.1. Each renderer reproduces what
 * the model's official Jinja template renders for system, user, assistant
 * (and, where the template knows it, tool) messages, including the rules
 * that drop earlier turns' thinking from the history. Detection recognises
 * a family from the markers in a GGUF's tokenizer.chat_template.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kara.h"
#include "status.h"

/* ------------------------------------------------------------------------ */
/* Names and detection                                                       */
/* ------------------------------------------------------------------------ */

static const char *const family_names[] = {"chatml", "qwen3", "deepseek-r1", "llama3", "llama3.1"};
#define N_FAMILIES ((int)(sizeof family_names / sizeof family_names[0]))

#define R1_BOS                                                                                                         \
    "<\xef\xbd\x9c"                                                                                                    \
    "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>" /* <｜begin▁of▁sentence｜> */
#define R1_EOS                                                                                                         \
    "<\xef\xbd\x9c"                                                                                                    \
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>" /* <｜end▁of▁sentence｜> */
#define R1_USER "<\xef\xbd\x9cUser\xef\xbd\x9c>"         /* <｜User｜> */
#define R1_ASSISTANT                                                                                                   \
    "<\xef\xbd\x9c"                                                                                                    \
    "Assistant\xef\xbd\x9c>" /* <｜Assistant｜> */
#define R1_TOOL_OUTPUTS_BEGIN                                                                                          \
    "<\xef\xbd\x9ctool\xe2\x96\x81outputs\xe2\x96\x81"                                                                 \
    "begin\xef\xbd\x9c>"
#define R1_TOOL_OUTPUTS_END                                                                                            \
    "<\xef\xbd\x9ctool\xe2\x96\x81outputs\xe2\x96\x81"                                                                 \
    "end\xef\xbd\x9c>"
#define R1_TOOL_OUTPUT_BEGIN                                                                                           \
    "<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81"                                                                  \
    "begin\xef\xbd\x9c>"
#define R1_TOOL_OUTPUT_END                                                                                             \
    "<\xef\xbd\x9ctool\xe2\x96\x81output\xe2\x96\x81"                                                                  \
    "end\xef\xbd\x9c>"

#define LLAMA3_DEFAULT_DATE "26 Jul 2024"

const char *kara_chat_family_name(kara_chat_family family) {
    return (int)family >= 0 && (int)family < N_FAMILIES ? family_names[family] : "?";
}

static void template_init(kara_chat_template *t, kara_chat_family family) {
    memset(t, 0, sizeof *t);
    t->family = family;
    t->prefill_think = family == KARA_CHAT_DEEPSEEK_R1;
    snprintf(t->date, sizeof t->date, "%s", LLAMA3_DEFAULT_DATE);
}

kara_status kara_chat_template_by_name(const char *name, kara_chat_template *out) {
    if (!out) return kr_set_error(KARA_ERR_ARG, "kara_chat_template_by_name: out is NULL");
    for (int i = 0; name && i < N_FAMILIES; i++)
        if (!strcmp(name, family_names[i])) {
            template_init(out, (kara_chat_family)i);
            return KARA_OK;
        }
    return kr_set_error(KARA_ERR_ARG,
                        "unknown chat template '%s' (known: chatml, qwen3, deepseek-r1, llama3, llama3.1)",
                        name ? name : "(null)");
}

/* Llama 3.2's template stamps today's date ("%d %b %Y") when the renderer
 * offers strftime_now, as transformers and llama.cpp do. */
static void today(char *buf, size_t size) {
    time_t now = time(NULL);
    struct tm tm;
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    if (!localtime_r(&now, &tm)) {
        snprintf(buf, size, "%s", LLAMA3_DEFAULT_DATE);
        return;
    }
    snprintf(buf, size, "%02d %s %d", tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900);
}

/* ChatML templates of Qwen2/Qwen2.5 insert a fixed system message when the
 * conversation starts without one:
 *   {% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nTEXT<|im_end|>\n' }}
 * Copy TEXT (with "\n" escapes decoded) when it is a plain literal. */
static void find_default_system(const char *jinja, char *out, size_t size) {
    out[0] = '\0';
    if (!strstr(jinja, "!= 'system'") && !strstr(jinja, "!= \"system\"")) return;
    const char *p = strstr(jinja, "<|im_start|>system");
    if (!p) return;
    p += strlen("<|im_start|>system");
    if (*p == '\n')
        p++;
    else if (p[0] == '\\' && p[1] == 'n')
        p += 2;
    else
        return;
    const char *end = strstr(p, "<|im_end|>");
    if (!end) return;
    size_t o = 0;
    for (const char *q = p; q < end; q++) {
        if (*q == '\'' || *q == '"' || *q == '{' || *q == '}' || o + 1 >= size) { /* not a plain literal */
            out[0] = '\0';
            return;
        }
        if (q[0] == '\\' && q + 1 < end && q[1] == 'n') {
            out[o++] = '\n';
            q++;
        } else {
            out[o++] = *q;
        }
    }
    out[o] = '\0';
}

bool kara_chat_template_detect(const char *jinja, kara_chat_template *out) {
    if (!out) return false;
    template_init(out, KARA_CHAT_CHATML);
    if (!jinja) return false;
    if (strstr(jinja, R1_ASSISTANT) || strstr(jinja, R1_USER)) {
        template_init(out, KARA_CHAT_DEEPSEEK_R1);
        return true;
    }
    if (strstr(jinja, "<|start_header_id|>")) {
        if (strstr(jinja, "Cutting Knowledge Date")) {
            template_init(out, KARA_CHAT_LLAMA31);
            if (strstr(jinja, "strftime_now")) today(out->date, sizeof out->date);
        } else {
            template_init(out, KARA_CHAT_LLAMA3);
        }
        return true;
    }
    if (strstr(jinja, "<|im_start|>")) {
        if (strstr(jinja, "<think>") || strstr(jinja, "enable_thinking")) {
            template_init(out, KARA_CHAT_QWEN3);
            /* the Jinja source spells the newlines as backslash-n */
            out->prefill_think = strstr(jinja, "<|im_start|>assistant\\n<think>") != NULL;
        } else {
            find_default_system(jinja, out->default_system, sizeof out->default_system);
        }
        return true;
    }
    return false;
}

kara_status kara_chat_template_from_model(const kara_model *model, const char *name, kara_chat_template *out) {
    if (!model || !out) return kr_set_error(KARA_ERR_ARG, "kara_chat_template_from_model: NULL argument");
    if (name && name[0] && strcmp(name, "auto") != 0) return kara_chat_template_by_name(name, out);
    char probe[8];
    size_t len;
    if (!kara_model_meta_str(model, "tokenizer.chat_template", probe, sizeof probe, &len)) {
        template_init(out, KARA_CHAT_CHATML);
        kr_log(KARA_LOG_WARN,
               "the model has no tokenizer.chat_template; using the chatml template "
               "(choose another with --chat-template)");
        return KARA_OK;
    }
    char *text = malloc(len + 1);
    if (!text) return kr_set_error(KARA_ERR_NOMEM, "out of memory reading tokenizer.chat_template");
    kara_model_meta_str(model, "tokenizer.chat_template", text, len + 1, NULL);
    bool known = kara_chat_template_detect(text, out);
    free(text);
    if (!known)
        kr_log(KARA_LOG_WARN,
               "tokenizer.chat_template is not one of the known families (chatml, qwen3, "
               "deepseek-r1, llama3, llama3.1); falling back to chatml");
    return KARA_OK;
}

/* ------------------------------------------------------------------------ */
/* Output buffer and the string functions the templates use                  */
/* ------------------------------------------------------------------------ */

/* Appends what fits and counts everything, so one pass gives both the text
 * and the size a caller needs. */
typedef struct out_buf {
    char *buf;
    size_t size;
    size_t len;
} out_buf;

static void put_n(out_buf *o, const char *s, size_t n) {
    if (o->len < o->size) {
        size_t room = o->size - 1 - o->len; /* keep one byte for the NUL */
        memcpy(o->buf + o->len, s, n < room ? n : room);
    }
    o->len += n;
}

static void put(out_buf *o, const char *s) { put_n(o, s, strlen(s)); }

/* A view of part of a string. */
typedef struct str_view {
    const char *p;
    size_t n;
} str_view;

static str_view view(const char *s) { return (str_view){s, strlen(s)}; }
static void put_v(out_buf *o, str_view v) { put_n(o, v.p, v.n); }

/* Python's str.lstrip('\n') / rstrip('\n'). */
static str_view lstrip_nl(str_view v) {
    while (v.n && v.p[0] == '\n') v.p++, v.n--;
    return v;
}
static str_view rstrip_nl(str_view v) {
    while (v.n && v.p[v.n - 1] == '\n') v.n--;
    return v;
}

/* Length of the white-space character at p (str.isspace in Python, which
 * Jinja's trim uses), 0 when none. */
static size_t space_at(const unsigned char *p, size_t n) {
    if (n >= 1 && ((p[0] >= 0x09 && p[0] <= 0x0d) || (p[0] >= 0x1c && p[0] <= 0x20))) return 1;
    if (n >= 2 && p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0)) return 2;
    if (n >= 3 && p[0] == 0xe1 && p[1] == 0x9a && p[2] == 0x80) return 3; /* U+1680 */
    if (n >= 3 && p[0] == 0xe2 && p[1] == 0x80 && (p[2] <= 0x8a || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf))
        return 3;                                                         /* U+2000..200A, 2028, 2029, 202F */
    if (n >= 3 && p[0] == 0xe2 && p[1] == 0x81 && p[2] == 0x9f) return 3; /* U+205F */
    if (n >= 3 && p[0] == 0xe3 && p[1] == 0x80 && p[2] == 0x80) return 3; /* U+3000 */
    return 0;
}

/* Jinja's |trim: Python str.strip() with no argument. */
static str_view trim(str_view v) {
    size_t k;
    while (v.n && (k = space_at((const unsigned char *)v.p, v.n)) > 0) v.p += k, v.n -= k;
    for (;;) {
        size_t cut = 0;
        for (size_t back = 1; back <= 3 && back <= v.n; back++) {
            k = space_at((const unsigned char *)v.p + v.n - back, back);
            if (k == back) {
                cut = back;
                break;
            }
        }
        if (!cut) break;
        v.n -= cut;
    }
    return v;
}

/* First / last occurrence of a NUL-terminated needle in a view, or NULL. */
static const char *find_first(str_view v, const char *needle) {
    size_t m = strlen(needle);
    for (size_t i = 0; m <= v.n && i <= v.n - m; i++)
        if (!memcmp(v.p + i, needle, m)) return v.p + i;
    return NULL;
}
static const char *find_last(str_view v, const char *needle) {
    size_t m = strlen(needle);
    if (m > v.n) return NULL;
    for (size_t i = v.n - m + 1; i-- > 0;)
        if (!memcmp(v.p + i, needle, m)) return v.p + i;
    return NULL;
}

/* content.split(sep)[-1] and content.split(sep)[0]. */
static str_view after_last(str_view v, const char *sep) {
    const char *q = find_last(v, sep);
    if (!q) return v;
    size_t skip = (size_t)(q - v.p) + strlen(sep);
    return (str_view){v.p + skip, v.n - skip};
}
static str_view before_first(str_view v, const char *sep) {
    const char *q = find_first(v, sep);
    return q ? (str_view){v.p, (size_t)(q - v.p)} : v;
}

static bool role_is(const kara_chat_message *m, const char *role) { return !strcmp(m->role, role); }

/* ------------------------------------------------------------------------ */
/* The families                                                              */
/* ------------------------------------------------------------------------ */

static void render_chatml(out_buf *o, const kara_chat_template *t, const kara_chat_message *m, size_t n, bool gen) {
    if (n > 0 && t->default_system[0] && !role_is(&m[0], "system")) {
        put(o, "<|im_start|>system\n");
        put(o, t->default_system);
        put(o, "<|im_end|>\n");
    }
    for (size_t i = 0; i < n; i++) {
        put(o, "<|im_start|>");
        put(o, m[i].role);
        put(o, "\n");
        put(o, m[i].content);
        put(o, "<|im_end|>\n");
    }
    if (gen) put(o, "<|im_start|>assistant\n");
}

/* True for a user message that is a tool result wrapped by the caller
 * ("<tool_response>...</tool_response>"), which Qwen3 does not count as the
 * user's query. */
static bool is_tool_response(const char *s) {
    size_t n = strlen(s);
    static const char open[] = "<tool_response>", close[] = "</tool_response>";
    return n >= sizeof open - 1 && n >= sizeof close - 1 && !strncmp(s, open, sizeof open - 1) &&
        !strcmp(s + n - (sizeof close - 1), close);
}

/* Qwen3 (Qwen3-8B's tokenizer_config.json, no tools): assistant turns up to
 * the last user query lose their thinking; turns after it (tool-calling
 * steps, or a final assistant message) keep it in a <think> block. */
static void render_qwen3(out_buf *o, const kara_chat_template *t, const kara_chat_message *m, size_t n, bool gen,
                         bool think) {
    if (n > 0 && role_is(&m[0], "system")) {
        put(o, "<|im_start|>system\n");
        put(o, m[0].content);
        put(o, "<|im_end|>\n");
    }
    size_t last_query = n ? n - 1 : 0;
    for (size_t k = n; k-- > 0;)
        if (role_is(&m[k], "user") && !is_tool_response(m[k].content)) {
            last_query = k;
            break;
        }
    for (size_t i = 0; i < n; i++) {
        str_view content = view(m[i].content);
        if (role_is(&m[i], "user") || (role_is(&m[i], "system") && i > 0)) {
            put(o, "<|im_start|>");
            put(o, m[i].role);
            put(o, "\n");
            put_v(o, content);
            put(o, "<|im_end|>\n");
        } else if (role_is(&m[i], "assistant")) {
            str_view reasoning = {"", 0};
            if (find_first(content, "</think>")) {
                reasoning = lstrip_nl(after_last(rstrip_nl(before_first(content, "</think>")), "<think>"));
                content = lstrip_nl(after_last(content, "</think>"));
            }
            put(o, "<|im_start|>assistant\n");
            if (i > last_query && (i == n - 1 || reasoning.n > 0)) {
                put(o, "<think>\n");
                put_v(o, rstrip_nl(lstrip_nl(reasoning)));
                put(o, "\n</think>\n\n");
                put_v(o, lstrip_nl(content));
            } else {
                put_v(o, content);
            }
            put(o, "<|im_end|>\n");
        } else if (role_is(&m[i], "tool")) {
            if (i == 0 || !role_is(&m[i - 1], "tool")) put(o, "<|im_start|>user");
            put(o, "\n<tool_response>\n");
            put_v(o, content);
            put(o, "\n</tool_response>");
            if (i == n - 1 || !role_is(&m[i + 1], "tool")) put(o, "<|im_end|>\n");
        }
    }
    if (gen) {
        put(o, "<|im_start|>assistant\n");
        if (t->prefill_think)
            put(o, think ? "<think>\n" : "<think>\n\n</think>\n\n");
        else if (!think)
            put(o, "<think>\n\n</think>\n\n");
    }
}

/* DeepSeek-R1-Distill (Qwen and Llama share one template): the last system
 * message goes first, bare, after BOS; assistant turns keep only the text
 * after their last "</think>"; the generation prompt opens a think block. */
static void render_r1(out_buf *o, const kara_chat_message *m, size_t n, bool gen, bool think) {
    const char *system = "";
    for (size_t i = 0; i < n; i++)
        if (role_is(&m[i], "system")) system = m[i].content;
    put(o, R1_BOS);
    put(o, system);
    bool is_tool = false, output_first = true;
    for (size_t i = 0; i < n; i++) {
        str_view content = view(m[i].content);
        if (role_is(&m[i], "user")) {
            is_tool = false;
            put(o, R1_USER);
            put_v(o, content);
        } else if (role_is(&m[i], "assistant")) {
            if (is_tool) {
                put(o, R1_TOOL_OUTPUTS_END);
                put_v(o, content);
                put(o, R1_EOS);
                is_tool = false;
            } else {
                if (find_first(content, "</think>")) content = after_last(content, "</think>");
                put(o, R1_ASSISTANT);
                put_v(o, content);
                put(o, R1_EOS);
            }
        } else if (role_is(&m[i], "tool")) {
            is_tool = true;
            put(o, output_first ? R1_TOOL_OUTPUTS_BEGIN R1_TOOL_OUTPUT_BEGIN : "\n" R1_TOOL_OUTPUT_BEGIN);
            output_first = false;
            put_v(o, content);
            put(o, R1_TOOL_OUTPUT_END);
        }
    }
    if (is_tool) put(o, R1_TOOL_OUTPUTS_END);
    if (gen && !is_tool) put(o, think ? R1_ASSISTANT "<think>\n" : R1_ASSISTANT "<think>\n\n</think>\n\n");
}

static void put_llama3_block(out_buf *o, const char *role, str_view content) {
    put(o, "<|start_header_id|>");
    put(o, role);
    put(o, "<|end_header_id|>\n\n");
    put_v(o, content);
    put(o, "<|eot_id|>");
}

/* Llama 3: BOS, then one header block per message with its content trimmed. */
static void render_llama3(out_buf *o, const kara_chat_message *m, size_t n, bool gen) {
    put(o, "<|begin_of_text|>");
    for (size_t i = 0; i < n; i++) put_llama3_block(o, m[i].role, trim(view(m[i].content)));
    if (gen) put(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Llama 3.1/3.2 (no tools): a system block always comes first, with the
 * knowledge-cutoff lines before the (trimmed) first system message. */
static void render_llama31(out_buf *o, const kara_chat_template *t, const kara_chat_message *m, size_t n, bool gen) {
    put(o, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n");
    put(o, "Cutting Knowledge Date: December 2023\nToday Date: ");
    put(o, t->date);
    put(o, "\n\n");
    size_t first = 0;
    if (n > 0 && role_is(&m[0], "system")) {
        put_v(o, trim(view(m[0].content)));
        first = 1;
    }
    put(o, "<|eot_id|>");
    for (size_t i = first; i < n; i++) {
        if (role_is(&m[i], "tool") || role_is(&m[i], "ipython")) {
            put(o, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            put(o, m[i].content);
            put(o, "<|eot_id|>");
        } else {
            put_llama3_block(o, m[i].role, trim(view(m[i].content)));
        }
    }
    if (gen) put(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

kara_status kara_chat_apply(const kara_chat_template *tmpl, const kara_chat_message *msgs, size_t n_msgs,
                            bool add_generation_prompt, bool enable_thinking, char *buf, size_t size, size_t *len) {
    if (!tmpl || (n_msgs && !msgs) || (size && !buf) || !len)
        return kr_set_error(KARA_ERR_ARG, "kara_chat_apply: NULL argument");
    for (size_t i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content)
            return kr_set_error(KARA_ERR_ARG, "kara_chat_apply: message %zu has no %s", i,
                                msgs[i].role ? "content" : "role");
    out_buf o = {buf, size, 0};
    switch (tmpl->family) {
    case KARA_CHAT_CHATML: render_chatml(&o, tmpl, msgs, n_msgs, add_generation_prompt); break;
    case KARA_CHAT_QWEN3: render_qwen3(&o, tmpl, msgs, n_msgs, add_generation_prompt, enable_thinking); break;
    case KARA_CHAT_DEEPSEEK_R1: render_r1(&o, msgs, n_msgs, add_generation_prompt, enable_thinking); break;
    case KARA_CHAT_LLAMA3: render_llama3(&o, msgs, n_msgs, add_generation_prompt); break;
    case KARA_CHAT_LLAMA31: render_llama31(&o, tmpl, msgs, n_msgs, add_generation_prompt); break;
    default: return kr_set_error(KARA_ERR_ARG, "kara_chat_apply: unknown template family %d", (int)tmpl->family);
    }
    if (size) buf[o.len < size ? o.len : size - 1] = '\0';
    *len = o.len;
    return KARA_OK;
}

kara_status kara_chat_apply_ex(const kara_chat_template *tmpl, const kara_chat_message *msgs, size_t n_msgs,
                               uint32_t flags, char *buf, size_t size, size_t *len) {
    if (flags & ~(uint32_t)(KARA_CHAT_ADD_GENERATION_PROMPT | KARA_CHAT_ENABLE_THINKING))
        return kr_set_error(KARA_ERR_ARG, "kara_chat_apply_ex: unknown flags 0x%x", (unsigned)flags);
    return kara_chat_apply(tmpl, msgs, n_msgs, flags & KARA_CHAT_ADD_GENERATION_PROMPT,
                           flags & KARA_CHAT_ENABLE_THINKING, buf, size, len);
}
