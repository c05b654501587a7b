/* test_jsonl.c - the JSON reader/writer (tools/common/json.c) and the Batch
 * API lines of `kara batch` (tools/common/batch_jsonl.c): values and
 * escapes, every error with its line and column, output that is valid JSON
 * whatever bytes a model emits, request parsing with errors naming the
 * input line, and the output scan behind --resume (torn last line). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_jsonl.h"
#include "json.h"
#include "test_util.h"

static kr_json_doc doc;
static char err[512];

static bool parse(const char *text, int line0) {
    kr_json_doc_free(&doc);
    return kr_json_parse(text, strlen(text), line0, &doc, err, sizeof err);
}

/* The parse fails and the message starts with want_prefix and contains want. */
static void expect_error(const char *text, int line0, const char *want_prefix, const char *want) {
    bool ok = parse(text, line0);
    CHECK_MSG(!ok, "'%s' must not parse", text);
    CHECK_MSG(!strncmp(err, want_prefix, strlen(want_prefix)), "'%s': error '%s' should start with '%s'", text, err,
              want_prefix);
    CHECK_MSG(strstr(err, want) != NULL, "'%s': error '%s' should mention '%s'", text, err, want);
    CHECK(doc.root == NULL);
}

static void test_values(void) {
    CHECK(parse("{\"a\": [1, -2.5e3, true, false, null], \"b\": {\"c\": \"x\\ty\"}, \"d\": 0}", 1));
    const kr_json *a = kr_json_get(doc.root, "a");
    CHECK(a && a->type == KR_JSON_ARRAY && a->len == 5);
    CHECK(a->first->type == KR_JSON_NUMBER && a->first->number == 1 && a->first->integer);
    CHECK(a->first->next->number == -2500 && !a->first->next->integer);
    CHECK(a->first->next->next->type == KR_JSON_BOOL && a->first->next->next->boolean);
    CHECK(a->first->next->next->next->type == KR_JSON_BOOL && !a->first->next->next->next->boolean);
    CHECK(a->first->next->next->next->next->type == KR_JSON_NULL);
    const kr_json *c = kr_json_get(kr_json_get(doc.root, "b"), "c");
    CHECK(c && c->type == KR_JSON_STRING && c->len == 3 && !strcmp(c->str, "x\ty"));
    CHECK(kr_json_get(doc.root, "missing") == NULL);
    CHECK(kr_json_get(a, "a") == NULL); /* not an object */
    CHECK_EQ_INT(c->line, 1);
    CHECK_EQ_INT(c->col, 50);

    /* escapes: \u with a surrogate pair, \/ and an embedded NUL */
    CHECK(parse("\"\\u00e9\\ud83d\\ude00\\/\\u0000z\"", 1));
    CHECK_EQ_INT(doc.root->len, 2 + 4 + 1 + 1 + 1);
    CHECK(!memcmp(doc.root->str, "\xc3\xa9\xf0\x9f\x98\x80/\0z", 9));
    /* raw UTF-8 passes through; columns count characters */
    CHECK(parse("[\"\xc3\xa9\xc3\xa9\", 5]", 1));
    CHECK_EQ_INT(doc.root->first->next->col, 8);
    /* positions on later lines of a multi-line document, and line0 */
    CHECK(parse("{\n  \"k\":\n     7}", 10));
    CHECK_EQ_INT(kr_json_get(doc.root, "k")->line, 11 + 1);
    CHECK_EQ_INT(kr_json_get(doc.root, "k")->col, 6);
    CHECK(parse("  \t[]  ", 1) && doc.root->type == KR_JSON_ARRAY && doc.root->len == 0);
    CHECK(parse("1E+2", 1) && doc.root->number == 100);
}

static void test_errors(void) {
    expect_error("{\"a\" 1}", 1, "line 1, column 6:", "expected ':'");
    expect_error("{\"a\": 1,}", 3, "line 3, column 9:", "trailing comma");
    expect_error("[1, 2,]", 1, "line 1, column 7:", "trailing comma");
    expect_error("[1 2]", 1, "line 1, column 4:", "expected ',' or ']'");
    expect_error("{\"a\": 1 \"b\": 2}", 1, "line 1, column 9:", "expected ',' or '}'");
    expect_error("{\"a\": tru}", 1, "line 1, column 7:", "unexpected 't'");
    expect_error("\"abc", 7, "line 7, column 1:", "unterminated string");
    expect_error("\"a\\qb\"", 1, "line 1, column 3:", "invalid escape");
    expect_error("\"\\u12G4\"", 1, "line 1, column 2:", "invalid \\u escape");
    expect_error("\"\\ud800x\"", 1, "line 1, column 2:", "high surrogate");
    expect_error("\"\\udc00\"", 1, "line 1, column 2:", "lone low surrogate");
    expect_error("\"a\tb\"", 1, "line 1, column 3:", "control character U+0009");
    expect_error("\"a\xff\"", 1, "line 1, column 3:", "invalid UTF-8");
    expect_error("\"\xc0\xaf\"", 1, "line 1, column 2:", "invalid UTF-8");     /* overlong */
    expect_error("\"\xed\xa0\x80\"", 1, "line 1, column 2:", "invalid UTF-8"); /* surrogate */
    expect_error("{\"a\": 1, \"a\": 2}", 5, "line 5, column 10:", "duplicate key \"a\"");
    expect_error("{} x", 1, "line 1, column 4:", "after the JSON value");
    expect_error("", 4, "line 4, column 1:", "unexpected end of input");
    expect_error("[", 1, "line 1, column 2:", "unexpected end of input");
    expect_error("01", 1, "line 1, column 2:", "after the JSON value");
    expect_error("1.", 1, "line 1, column 3:", "digits expected after '.'");
    expect_error("-", 1, "line 1, column 1:", "invalid number");
    expect_error("1e", 1, "line 1, column 3:", "exponent");
    expect_error("1e999", 1, "line 1, column 1:", "out of range");
    expect_error("{1: 2}", 1, "line 1, column 2:", "expected a string key");
    expect_error("{\n\"a\":\n  [1,\n  x]}", 1, "line 4, column 3:", "unexpected 'x'");
    char deep[400];
    memset(deep, '[', 300);
    deep[300] = '\0';
    expect_error(deep, 1, "line 1, column 130:", "nesting deeper");
    expect_error("NaN", 1, "line 1, column 1:", "unexpected 'N'");
    expect_error("\x01", 1, "line 1, column 1:", "byte 0x01");
}

static void test_writer(void) {
    kr_jbuf b = {0};
    kr_jbuf_str(&b, "a\"b\\c\n\t\x01\x7f", 9);
    CHECK_MSG(!strcmp(b.p, "\"a\\\"b\\\\c\\n\\t\\u0001\\u007f\""), "escaped: %s", b.p);
    /* invalid UTF-8 becomes U+FFFD, valid characters stay */
    kr_jbuf_reset(&b);
    kr_jbuf_str(&b, "\xc3\xa9\xff\xe2\x82", 5);
    CHECK_MSG(!strcmp(b.p, "\"\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""), "replaced: %s", b.p);
    CHECK(parse(b.p, 1));
    /* arbitrary bytes always give a string that parses back */
    char bytes[256];
    for (int i = 0; i < 256; i++) bytes[i] = (char)(255 - i);
    kr_jbuf_reset(&b);
    kr_jbuf_str(&b, bytes, 256);
    CHECK(parse(b.p, 1) && doc.root->type == KR_JSON_STRING);
    /* a value written back and parsed again is the same */
    const char *src = "{\"x\":[1,2.5,\"\\u00e9\",{\"y\":null}],\"z\":true,\"big\":123456789012}";
    CHECK(parse(src, 1));
    kr_jbuf_reset(&b);
    kr_jbuf_value(&b, doc.root);
    CHECK_MSG(!strcmp(b.p, "{\"x\":[1,2.5,\"\xc3\xa9\",{\"y\":null}],\"z\":true,\"big\":123456789012}"),
              "round trip: %s", b.p);
    kr_jbuf_reset(&b);
    kr_jbuf_printf(&b, "%s-%d", "long", 7);
    for (int i = 0; i < 100; i++) kr_jbuf_printf(&b, "%0300d", i);
    CHECK_EQ_INT(b.len, 6 + 100 * 300);
    kr_jbuf_free(&b);
    CHECK_EQ_INT(kr_utf8_valid_prefix("ab\xc3\xa9\xc3", 5), 4);
}

static void test_requests(void) {
    kr_json_doc_free(&doc);
    kr_batch_request r;
    const char *code = NULL;
    const char *line =
        "{\"custom_id\":\"q1\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"m\","
        "\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":"
        "[{\"type\":\"text\",\"text\":\"Hi \"},{\"type\":\"text\",\"text\":\"there\"}]}],"
        "\"max_tokens\":64,\"temperature\":0.6,\"top_p\":0.95,\"seed\":-1,\"stop\":[\"\\n\\n\",\"END\"],"
        "\"logprobs\":false,\"chat_template_kwargs\":{\"enable_thinking\":false}}}";
    CHECK_MSG(kr_batch_request_parse(line, strlen(line), 3, &doc, &r, err, sizeof err, &code), "%s", err);
    CHECK(!strcmp(r.custom_id, "q1") && r.chat && r.n_msgs == 2);
    CHECK(!strcmp(r.msgs[0].role, "system") && !strcmp(r.msgs[0].content, "Be brief."));
    CHECK(!strcmp(r.msgs[1].role, "user") && !strcmp(r.msgs[1].content, "Hi there"));
    CHECK_EQ_INT(r.max_tokens, 64);
    CHECK(r.has_temperature && r.temperature == 0.6f && r.has_top_p && r.top_p == 0.95f && !r.has_top_k);
    CHECK(r.has_seed && r.seed == UINT64_MAX);
    CHECK(r.n_stop == 2 && !strcmp(r.stop[0], "\n\n") && !strcmp(r.stop[1], "END"));
    CHECK(r.think == 0 && r.model && !strcmp(r.model, "m"));
    kr_batch_request_free(&r);
    kr_json_doc_free(&doc);

    /* plain form: one user message, sampling keys beside it */
    line = "{\"id\":\"p7\",\"prompt\":\"Why?\",\"max_tokens\":5,\"top_k\":20}";
    CHECK_MSG(kr_batch_request_parse(line, strlen(line), 1, &doc, &r, err, sizeof err, &code), "%s", err);
    CHECK(!strcmp(r.custom_id, "p7") && r.chat && r.n_msgs == 1 && !strcmp(r.msgs[0].content, "Why?"));
    CHECK(r.max_tokens == 5 && r.has_top_k && r.top_k == 20 && r.think == -1);
    kr_batch_request_free(&r);
    kr_json_doc_free(&doc);

    /* top_k -1 is taken as --top-k -1 is: off */
    line = "{\"id\":\"k\",\"prompt\":\"x\",\"top_k\":-1}";
    CHECK_MSG(kr_batch_request_parse(line, strlen(line), 1, &doc, &r, err, sizeof err, &code), "%s", err);
    CHECK(r.has_top_k && r.top_k == -1);
    kr_batch_request_free(&r);
    kr_json_doc_free(&doc);
    {
        kara_config cfg;
        kara_config_init(&cfg);
        CHECK_EQ_INT(kara_config_set(&cfg, "sampling.top_k", "-1", "--top-k"), KARA_OK);
        CHECK_EQ_INT(kara_config_set(&cfg, "sampling.top_k", "-2", "--top-k"), KARA_ERR_CONFIG);
        CHECK_MSG(!strcmp(kara_last_error(), "--top-k: sampling.top_k: -2 is out of range [-1, 16777216]"), "got '%s'",
                  kara_last_error());
    }
    /* custom_ids in messages: what is not printable ASCII is escaped */
    char shown[64];
    kr_batch_show_id("caf\xc3\xa9 \"x\"\x01", 10, shown, sizeof shown);
    CHECK_MSG(!strcmp(shown, "\"caf\\u00e9 \\\"x\\\"\\u0001\""), "got '%s'", shown);
    kr_batch_show_id("a\xf0\x9f\x98\x80", 5, shown, sizeof shown);
    CHECK_MSG(!strcmp(shown, "\"a\\U0001F600\""), "got '%s'", shown);
    kr_batch_show_id("abcdefghijklmnopqrstuvwxyz", 26, shown, 16);
    CHECK_MSG(!strcmp(shown, "\"abcdefghij...\""), "got '%s'", shown);
    CHECK(kr_batch_id_plain("q-1 x") && !kr_batch_id_plain("caf\xc3\xa9"));

    /* completions: raw prompt */
    line =
        "{\"custom_id\":\"c\",\"url\":\"/v1/completions\",\"body\":{\"prompt\":\"Once\",\"max_completion_tokens\":3}}";
    CHECK_MSG(kr_batch_request_parse(line, strlen(line), 1, &doc, &r, err, sizeof err, &code), "%s", err);
    CHECK(!r.chat && !strcmp(r.prompt, "Once") && r.max_tokens == 3);
    kr_batch_request_free(&r);
    kr_json_doc_free(&doc);

    struct {
        const char *line, *code, *msg, *custom_id;
    } bad[] = {
        {"{\"custom_id\":\"a\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]", KR_BATCH_ERR_JSON,
         "input line 9, column 68: expected ',' or '}' in an object, got end of input", NULL},
        {"[1]", KR_BATCH_ERR_REQUEST, "input line 9, column 1: a request must be a JSON object", NULL},
        {"{\"body\":{}}", KR_BATCH_ERR_REQUEST, "input line 9: missing \"custom_id\"", NULL},
        {"{\"custom_id\":5,\"body\":{}}", KR_BATCH_ERR_REQUEST, "column 14: custom_id must be a non-empty string",
         NULL},
        {"{\"custom_id\":\"u\",\"url\":\"/v1/embeddings\",\"body\":{}}", KR_BATCH_ERR_REQUEST,
         "unsupported url \"/v1/embeddings\"", "u"},
        {"{\"custom_id\":\"m\",\"method\":\"GET\",\"body\":{}}", KR_BATCH_ERR_REQUEST, "method must be \"POST\"", "m"},
        {"{\"custom_id\":\"b\"}", KR_BATCH_ERR_REQUEST, "missing \"body\"", "b"},
        {"{\"custom_id\":\"b\",\"body\":{}}", KR_BATCH_ERR_REQUEST, "missing body.messages", "b"},
        {"{\"custom_id\":\"e\",\"body\":{\"messages\":[]}}", KR_BATCH_ERR_REQUEST, "messages must be a non-empty array",
         "e"},
        {"{\"custom_id\":\"r\",\"body\":{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}}", KR_BATCH_ERR_REQUEST,
         "unknown role \"robot\"", "r"},
        {"{\"custom_id\":\"c\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}}",
         KR_BATCH_ERR_REQUEST, "only content parts of type \"text\"", "c"},
        {"{\"custom_id\":\"t\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1.5}}",
         KR_BATCH_ERR_REQUEST, "column 82: max_tokens must be an integer", "t"},
        {"{\"custom_id\":\"t\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":-1}}",
         KR_BATCH_ERR_REQUEST, "temperature -1 is out of range [0, 100] (the same limits as sampling.temperature)",
         "t"},
        {"{\"custom_id\":\"n\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":2}}",
         KR_BATCH_ERR_REQUEST, "only n = 1", "n"},
        {"{\"custom_id\":\"s\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true}}",
         KR_BATCH_ERR_REQUEST, "stream must be false", "s"},
        {"{\"custom_id\":\"s\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",\"b\","
         "\"c\","
         "\"d\",\"e\",\"f\",\"g\",\"h\",\"i\"]}}",
         KR_BATCH_ERR_REQUEST, "at most 8 stop strings", "s"},
        {"{\"custom_id\":\"s\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"\"]}}",
         KR_BATCH_ERR_REQUEST, "1 to 255 bytes", "s"},
        {"{\"id\":\"p\",\"prompt\":3}", KR_BATCH_ERR_REQUEST, "prompt must be a string", "p"},
        /* a NUL in custom_id is named, with where it is */
        {"{\"custom_id\":\"ab\\u0000c\",\"body\":{}}", KR_BATCH_ERR_REQUEST,
         "column 14: custom_id \"ab\\u0000c\" holds a NUL character (\\u0000) at byte 3; it must be a string without "
         "NUL",
         NULL},
        /* integer ranges as integers, never 1.67772e+07 */
        {"{\"custom_id\":\"t\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":20000000}"
         "}",
         KR_BATCH_ERR_REQUEST, "max_tokens 20000000 is out of range [1, 16777216]", "t"},
        {"{\"custom_id\":\"t\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":1e30}}",
         KR_BATCH_ERR_REQUEST, "seed 1e+30 is out of range [-9223372036854775808, 18446744073709549568]", "t"},
        /* top_k: the limits of --top-k (sampling.top_k), -1 and 0 meaning off */
        {"{\"custom_id\":\"t\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_k\":-2}}",
         KR_BATCH_ERR_REQUEST, "top_k -2 is out of range [-1, 16777216] (the same limits as sampling.top_k)", "t"},
        {"{\"custom_id\":\"t\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_k\":16777217}}",
         KR_BATCH_ERR_REQUEST, "top_k 16777217 is out of range [-1, 16777216] (the same limits as sampling.top_k)",
         "t"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        code = NULL;
        bool ok = kr_batch_request_parse(bad[i].line, strlen(bad[i].line), 9, &doc, &r, err, sizeof err, &code);
        CHECK_MSG(!ok, "bad request %zu parsed", i);
        CHECK_MSG(code && !strcmp(code, bad[i].code), "bad request %zu: code %s, want %s", i, code ? code : "(none)",
                  bad[i].code);
        CHECK_MSG(strstr(err, bad[i].msg) != NULL, "bad request %zu: '%s' should contain '%s'", i, err, bad[i].msg);
        CHECK_MSG(!strncmp(err, "input line 9", 12), "bad request %zu names the line: %s", i, err);
        if (bad[i].custom_id)
            CHECK_MSG(r.custom_id && !strcmp(r.custom_id, bad[i].custom_id), "bad request %zu keeps its custom_id", i);
        else
            CHECK(r.custom_id == NULL);
        kr_batch_request_free(&r);
        kr_json_doc_free(&doc);
    }

    const char *id;
    CHECK_EQ_INT(kr_batch_request_id("  \r", 3, 1, &doc, &id), -1);
    kr_json_doc_free(&doc);
    CHECK_EQ_INT(kr_batch_request_id("{oops", 5, 1, &doc, &id), 0);
    kr_json_doc_free(&doc);
    CHECK_EQ_INT(kr_batch_request_id("{\"id\":\"x\"}", 10, 1, &doc, &id), 0); /* id counts only in the plain form */
    kr_json_doc_free(&doc);
    CHECK_EQ_INT(kr_batch_request_id("{\"custom_id\":\"k\"}", 17, 1, &doc, &id), 1);
    CHECK(!strcmp(id, "k"));
    kr_json_doc_free(&doc);

    /* the line length limit: a request padded to exactly KR_BATCH_LINE_MAX bytes parses, one byte more is
     * refused by its length alone (as is its custom_id), even when blank */
    char *big = malloc((size_t)KR_BATCH_LINE_MAX + 1);
    CHECK(big != NULL);
    if (!big) return;
    const char *req = "{\"custom_id\":\"big\",\"body\":{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}}";
    memset(big, ' ', (size_t)KR_BATCH_LINE_MAX + 1);
    memcpy(big, req, strlen(req));
    CHECK_MSG(kr_batch_request_parse(big, KR_BATCH_LINE_MAX, 4, &doc, &r, err, sizeof err, &code), "%s", err);
    kr_batch_request_free(&r);
    kr_json_doc_free(&doc);
    CHECK_EQ_INT(kr_batch_request_id(big, KR_BATCH_LINE_MAX, 4, &doc, &id), 1);
    kr_json_doc_free(&doc);
    CHECK(!kr_batch_request_parse(big, (size_t)KR_BATCH_LINE_MAX + 1, 4, &doc, &r, err, sizeof err, &code));
    CHECK_MSG(!strcmp(err, "input line 4: longer than 16777216 bytes (16 MiB), the limit of a request line"), "%s",
              err);
    CHECK(!strcmp(code, KR_BATCH_ERR_REQUEST) && r.custom_id == NULL);
    kr_batch_request_free(&r);
    kr_json_doc_free(&doc);
    CHECK_EQ_INT(kr_batch_request_id(big, (size_t)KR_BATCH_LINE_MAX + 1, 4, &doc, &id), 0);
    kr_json_doc_free(&doc);
    memset(big, ' ', (size_t)KR_BATCH_LINE_MAX + 1);
    CHECK_EQ_INT(kr_batch_request_id(big, (size_t)KR_BATCH_LINE_MAX + 1, 4, &doc, &id), 0);
    kr_json_doc_free(&doc);
    free(big);
}

typedef struct seen {
    char ids[16][32];
    int lines[16];
    bool failed[16];
    int n;
} seen;

static void on_result(void *user, const char *custom_id, int input_line, bool failed) {
    seen *s = user;
    if (s->n >= 16) return;
    snprintf(s->ids[s->n], sizeof s->ids[0], "%s", custom_id ? custom_id : "(null)");
    s->lines[s->n] = input_line;
    s->failed[s->n] = failed;
    s->n++;
}

static void test_results_and_scan(void) {
    kr_jbuf b = {0};
    kr_batch_result ok = {"q\"1", 4, "tiny", "The \xff answer", 12, "thinking\n", 9, "stop", 10, 5, 1700000000};
    kr_batch_write_ok(&b, &ok);
    CHECK(b.len > 0 && b.p[b.len - 1] == '\n' && !memchr(b.p, '\n', b.len - 1));
    CHECK(parse(b.p, 1));
    const kr_json *resp = kr_json_get(doc.root, "response");
    const kr_json *body = kr_json_get(resp, "body");
    const kr_json *choice = kr_json_get(body, "choices")->first;
    const kr_json *msg = kr_json_get(choice, "message");
    CHECK(!strcmp(kr_json_get(doc.root, "custom_id")->str, "q\"1"));
    CHECK(!strncmp(kr_json_get(doc.root, "id")->str, "batch_req_", 10));
    CHECK(kr_json_get(doc.root, "error")->type == KR_JSON_NULL);
    CHECK_EQ_INT(kr_json_get(resp, "status_code")->number, 200);
    CHECK(!strcmp(kr_json_get(body, "object")->str, "chat.completion"));
    CHECK(!strcmp(kr_json_get(msg, "content")->str, "The \xef\xbf\xbd answer"));
    CHECK(!strcmp(kr_json_get(msg, "reasoning_content")->str, "thinking\n"));
    CHECK(!strcmp(kr_json_get(choice, "finish_reason")->str, "stop"));
    CHECK_EQ_INT(kr_json_get(kr_json_get(body, "usage"), "total_tokens")->number, 15);
    char id1[64], id2[64];
    kr_batch_make_id(id1, sizeof id1, "batch_req_", "q\"1", 4);
    kr_batch_make_id(id2, sizeof id2, "batch_req_", "q\"1", 99);
    CHECK(!strcmp(id1, kr_json_get(doc.root, "id")->str) && !strcmp(id1, id2)); /* stable per custom_id */
    ok.reasoning_len = 0;
    kr_jbuf_reset(&b);
    kr_batch_write_ok(&b, &ok);
    CHECK(parse(b.p, 1));
    msg = kr_json_get(kr_json_get(kr_json_get(kr_json_get(doc.root, "response"), "body"), "choices")->first, "message");
    CHECK(kr_json_get(msg, "reasoning_content")->type == KR_JSON_NULL);

    /* an output file: ok, error with id, error without id, then a torn line */
    kr_jbuf out = {0};
    kr_jbuf_reset(&b);
    ok.custom_id = "a";
    kr_batch_write_ok(&out, &ok);
    kr_batch_write_error(&out, "b", 2, KR_BATCH_ERR_CONTEXT, "input line 2: too long");
    kr_batch_write_error(&out, NULL, 3, KR_BATCH_ERR_JSON, "input line 3, column 1: bad");
    size_t whole = out.len;
    kr_batch_write_ok(&out, &ok);
    out.len -= 7; /* a write cut short */
    seen s = {0};
    long keep = kr_batch_scan_output(out.p, out.len, on_result, &s, err, sizeof err);
    CHECK_EQ_INT(keep, (long)whole);
    CHECK_EQ_INT(s.n, 3);
    CHECK(!strcmp(s.ids[0], "a") && !s.failed[0]);
    CHECK(!strcmp(s.ids[1], "b") && s.failed[1] && s.lines[1] == 2);
    CHECK(!strcmp(s.ids[2], "(null)") && s.failed[2] && s.lines[2] == 3);
    /* a complete but broken last line (a crash left garbage) is dropped too */
    out.len = whole;
    kr_jbuf_cstr(&out, "{\"custom_id\":\"zz\",\"resp\n");
    s.n = 0;
    CHECK_EQ_INT(kr_batch_scan_output(out.p, out.len, on_result, &s, err, sizeof err), (long)whole);
    CHECK_EQ_INT(s.n, 3);
    /* a last line that parses but is not a result is somebody's data, not a torn write */
    size_t before = out.len;
    kr_jbuf_cstr(&out, "{\"foo\":1}\n");
    s.n = 0;
    CHECK_EQ_INT(kr_batch_scan_output(out.p, out.len, on_result, &s, err, sizeof err), -1);
    CHECK_MSG(strstr(err, "output line 4 is not a batch result") != NULL, "names the line: %s", err);
    out.len = before;
    /* a broken line in the middle is not crash damage */
    kr_batch_write_error(&out, "c", 5, KR_BATCH_ERR_JSON, "x");
    s.n = 0;
    CHECK_EQ_INT(kr_batch_scan_output(out.p, out.len, on_result, &s, err, sizeof err), -1);
    CHECK_MSG(strstr(err, "output line 4") != NULL, "names the output line: %s", err);
    /* empty output */
    s.n = 0;
    CHECK_EQ_INT(kr_batch_scan_output("", 0, on_result, &s, err, sizeof err), 0);
    kr_jbuf_free(&out);
    kr_jbuf_free(&b);
}

/* Requests are hashed on their canonical form: a new spelling of the same
 * JSON keeps the hash, a new value changes it. */
static void test_request_hash(void) {
    const char *a = "{\"id\":\"q\",\"prompt\":\"hi\",\"max_tokens\":4,\"temperature\":0.5}";
    uint64_t h = kr_batch_request_hash(a, strlen(a));
    const char *same[] = {
        "{ \"temperature\" : 5e-1, \"max_tokens\":4.0,\"prompt\":\"h\\u0069\",\"id\":\"q\" }",
        "  {\"id\":\"q\",\"prompt\":\"hi\",\"max_tokens\":4,\"temperature\":0.50}\r",
    };
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        CHECK_MSG(kr_batch_request_hash(same[i], strlen(same[i])) == h, "same request: %s", same[i]);
    const char *other[] = {
        "{\"id\":\"q\",\"prompt\":\"hi \",\"max_tokens\":4,\"temperature\":0.5}",
        "{\"id\":\"q\",\"prompt\":\"hi\",\"max_tokens\":5,\"temperature\":0.5}",
        "{\"id\":\"q\",\"prompt\":\"hi\",\"max_tokens\":\"4\",\"temperature\":0.5}",
        "{\"id\":\"q\",\"prompt\":[\"hi\"],\"max_tokens\":4,\"temperature\":0.5}",
    };
    for (size_t i = 0; i < sizeof other / sizeof *other; i++)
        CHECK_MSG(kr_batch_request_hash(other[i], strlen(other[i])) != h, "another request: %s", other[i]);
    /* a line that does not parse is hashed on its bytes (white space around it aside) */
    CHECK(kr_batch_request_hash("{bad", 4) == kr_batch_request_hash_raw(" {bad ", 6));
    CHECK(kr_batch_request_hash("{bad", 4) != kr_batch_request_hash("{bad ]", 6));
}

int main(void) {
    test_values();
    test_errors();
    test_writer();
    test_requests();
    test_results_and_scan();
    test_request_hash();
    kr_json_doc_free(&doc);
    return kr_test_finish();
}
