/* fuzz_jsonl.c - the batch tool's request reader and its reader of an
 * earlier output (resume) on arbitrary bytes: a line either parses or
 * fails with "input line N..." and an error code; nothing reads past the
 * line. Seeds: lines of tests/data and OpenAI Batch API requests. */
#include <string.h>

#include "batch_jsonl.h"
#include "fuzz.h"
#include "json.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    kara_log_set(kr_fuzz_quiet_log, NULL);
    return 0;
}

static void on_result(void *user, const char *custom_id, int input_line, bool failed, const char *text, size_t len) {
    (void)custom_id;
    (void)failed;
    (void)text;
    size_t *n = user;
    FUZZ_CHECK(input_line >= 0, "input line %d", input_line);
    *n += len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a copy of exactly size bytes, so ASan sees any read past the line */
    char *line = malloc(size ? size : 1);
    if (!line) return 0;
    memcpy(line, data, size);
    kr_json_doc doc;
    kr_batch_request req;
    char err[512];
    const char *code = NULL;
    memset(&doc, 0, sizeof doc);
    if (kr_batch_request_parse(line, size, 7, &doc, &req, err, sizeof err, &code)) {
        FUZZ_CHECK(req.chat ? req.n_msgs > 0 : req.prompt != NULL, "a parsed request without input");
    } else {
        FUZZ_CHECK(!strncmp(err, "input line ", 11), "message: %s", err);
        FUZZ_CHECK(code && code[0], "no error code for: %s", err);
    }
    kr_batch_request_free(&req);
    kr_json_doc_free(&doc);
    const char *id = NULL;
    memset(&doc, 0, sizeof doc);
    int found = kr_batch_request_id(line, size, 7, &doc, &id);
    FUZZ_CHECK(found >= -1 && found <= 1, "custom_id lookup returned %d", found);
    kr_json_doc_free(&doc);
    size_t seen = 0;
    char serr[256];
    kr_batch_scan_lines(line, size, on_result, &seen, serr, sizeof serr);
    FUZZ_CHECK(seen <= size, "scan saw %zu bytes of %zu", seen, size);
    free(line);
    return 0;
}
