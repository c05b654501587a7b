/* fuzz_config.c - the YAML configuration loader on arbitrary text. A load
 * is all or nothing: on failure the configuration is unchanged and the
 * message names FILE:LINE:COL; on success, printing it and loading the print
 * gives the same configuration (the format round-trips). Seeds: the
 * project's configs/ and a few broken files. */
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    kara_log_set(kr_fuzz_quiet_log, NULL);
    return 0;
}

static char text[1 << 16], again[1 << 16];

/* Drop each line's "# origin" comment and the spaces before it, in place. */
static void normalize(char *t) {
    char *w = t;
    for (const char *r = t; *r;) {
        const char *eol = strchr(r, '\n');
        size_t len = eol ? (size_t)(eol - r) : strlen(r);
        const char *hash = memchr(r, '#', len);
        size_t keep = hash ? (size_t)(hash - r) : len;
        while (keep > 0 && r[keep - 1] == ' ') keep--;
        memmove(w, r, keep);
        w += keep;
        if (eol) *w++ = '\n';
        r += len + (eol ? 1 : 0);
    }
    *w = '\0';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static kara_config c, before, back;
    kara_config_init(&c);
    before = c;
    kara_status st = kara_config_load_text(&c, (const char *)data, (long)size, "fuzz.yaml");
    if (st != KARA_OK) {
        FUZZ_CHECK(!memcmp(&c, &before, sizeof c), "a failed load (status %d) changed the configuration", st);
        FUZZ_CHECK(!strncmp(kara_last_error(), "fuzz.yaml", 9), "message without the file: %s", kara_last_error());
        return 0;
    }
    size_t n = kara_config_format(&c, text, sizeof text);
    FUZZ_CHECK(n < sizeof text, "format of %zu bytes", n);
    kara_config_init(&back);
    st = kara_config_load_text(&back, text, (long)n, "printed.yaml");
    FUZZ_CHECK(st == KARA_OK, "the printed configuration does not load: %s\n%s", kara_last_error(), text);
    size_t m = kara_config_format(&back, again, sizeof again);
    /* the values agree; the origins differ (fuzz.yaml vs printed.yaml) */
    normalize(text);
    normalize(again);
    (void)m;
    FUZZ_CHECK(!strcmp(text, again), "printing is not stable:\n%s\n---\n%s", text, again);
    return 0;
}
