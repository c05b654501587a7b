/* fuzz_chat_template.c - the chat-template renderer on arbitrary messages.
 * The first byte picks the template family and the flags, the rest is
 * split at 0x00 bytes into messages whose roles cycle through system, user,
 * assistant (and tool). The rendering succeeds, *len is the same whatever
 * the buffer size, and a short buffer holds the first size-1 bytes of the
 * whole text, NUL-terminated. */
#include <string.h>

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    kara_log_set(kr_fuzz_quiet_log, NULL);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 8192) return 0;
    static const char *names[] = {"chatml", "qwen3", "deepseek-r1", "llama3", "llama3.1"};
    static const char *roles[] = {"system", "user", "assistant", "user", "tool", "assistant"};
    kara_chat_template t;
    FUZZ_CHECK(kara_chat_template_by_name(names[data[0] % 5], &t) == KARA_OK, "template %s", names[data[0] % 5]);
    bool gen_prompt = data[0] & 8, thinking = data[0] & 16;
    /* NUL-terminated copies of the parts */
    char *text = malloc(size);
    if (!text) return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    kara_chat_message msgs[64];
    size_t n = 0;
    for (char *p = text; n < 64;) {
        msgs[n].role = roles[(n + (data[0] >> 5)) % 6];
        msgs[n].content = p;
        n++;
        size_t l = strlen(p);
        if (p + l >= text + size - 1) break;
        p += l + 1;
    }
    size_t whole = 0, cut = 0;
    kara_status st = kara_chat_apply(&t, msgs, n, gen_prompt, thinking, NULL, 0, &whole);
    FUZZ_CHECK(st == KARA_OK, "size query: %s", kara_last_error());
    char *full = malloc(whole + 1);
    if (full) {
        size_t got = 0;
        st = kara_chat_apply(&t, msgs, n, gen_prompt, thinking, full, whole + 1, &got);
        FUZZ_CHECK(st == KARA_OK && got == whole && full[whole] == '\0', "render: %zu of %zu", got, whole);
        size_t small = whole / 2 + 1;
        char *part = malloc(small);
        if (part) {
            st = kara_chat_apply(&t, msgs, n, gen_prompt, thinking, part, small, &cut);
            FUZZ_CHECK(st == KARA_OK && cut == whole, "a short buffer changed the length: %zu vs %zu", cut, whole);
            FUZZ_CHECK(part[small - 1] == '\0' && !memcmp(part, full, small - 1), "a short buffer's prefix differs");
            free(part);
        }
        free(full);
    }
    free(text);
    return 0;
}
