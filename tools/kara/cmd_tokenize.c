/* cmd_tokenize.c - `kara tokenize -m MODEL (-p TEXT | -f FILE)...`: the token
 * ids (and pieces) the model's tokenizer gives each input, one line per input.
 * Loads the model vocab-only (kara_model_params.vocab_only: the tokenizer
 * metadata, no weights), so vocab-only GGUF files work too. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_args.h"
#include "commands.h"
#include "exit_codes.h"
#include "kara.h"
#include "monotonic_clock.h"
#include "safe_output.h"

#define MAX_INPUTS 64

static void usage(FILE *f) {
    fprintf(f,
            "usage: kara tokenize -m MODEL [--special] [--no-bos] [--pieces | --ids-only] (-p TEXT | -f FILE)...\n\n"
            "Tokenizes each input with the model's tokenizer and prints one line per input:\n"
            "  (default)     N tokens: ID ID ...\n"
            "  --pieces      N tokens: ID 'piece' ID 'piece' ...\n"
            "  --ids-only    ID ID ...             (nothing else on stdout, for scripts)\n\n"
            "options:\n"
            "  -m, --model FILE   GGUF file (a vocab-only file is enough)\n"
            "  -p, --prompt TEXT  an input text (repeatable)\n"
            "  -f, --file FILE    an input file, read whole; '-' reads stdin (repeatable)\n"
            "  --special          match special tokens such as <|im_start|> written in the text\n"
            "  --no-bos           do not add BOS/EOS even where the vocabulary asks for them\n"
            "  --stats            print load and tokenize times to stderr\n");
}

/* A piece in single quotes: valid UTF-8 as is, other bytes escaped. */
static void print_piece(const char *p, int32_t n) {
    putchar('\'');
    for (int32_t i = 0; i < n;) {
        unsigned char c = (unsigned char)p[i];
        int k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        bool ok = k > 0 && i + k <= n;
        for (int j = 1; ok && j < k; j++) ok = ((unsigned char)p[i + j] & 0xC0) == 0x80;
        if (!ok) {
            printf("\\x%02x", c);
            i++;
        } else if (c == '\n') {
            fputs("\\n", stdout), i++;
        } else if (c == '\t') {
            fputs("\\t", stdout), i++;
        } else if (c == '\r') {
            fputs("\\r", stdout), i++;
        } else if (c == '\'' || c == '\\') {
            printf("\\%c", c), i++;
        } else if (c < 0x20 || c == 0x7F) {
            printf("\\x%02x", c), i++;
        } else {
            fwrite(p + i, 1, (size_t)k, stdout);
            i += k;
        }
    }
    putchar('\'');
}

static int tokenize_main(int argc, char **argv) {
    const char *model = NULL;
    const char *inputs[MAX_INPUTS];
    bool is_file[MAX_INPUTS];
    int n_inputs = 0;
    bool special = false, add_special = true, pieces = false, ids_only = false, stats = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return KR_EXIT_OK;
        } else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && has_value) {
            model = argv[++i];
        } else if ((!strcmp(a, "-p") || !strcmp(a, "--prompt") || !strcmp(a, "-f") || !strcmp(a, "--file")) &&
                   has_value) {
            if (n_inputs == MAX_INPUTS) {
                fprintf(stderr, "kara tokenize: at most %d inputs\n", MAX_INPUTS);
                return KR_EXIT_USAGE;
            }
            is_file[n_inputs] = a[1] == 'f' || !strcmp(a, "--file");
            inputs[n_inputs++] = argv[++i];
        } else if (!strcmp(a, "--special")) {
            special = true;
        } else if (!strcmp(a, "--no-bos")) {
            add_special = false;
        } else if (!strcmp(a, "--pieces")) {
            pieces = true;
        } else if (!strcmp(a, "--ids-only")) {
            ids_only = true;
        } else if (!strcmp(a, "--stats")) {
            stats = true;
        } else {
            fprintf(stderr, "kara tokenize: %s '%s'\n",
                    a[0] == '-' ? "unknown option or missing value for" : "unexpected argument", a);
            usage(stderr);
            return KR_EXIT_USAGE;
        }
    }
    if (!model || !n_inputs) {
        fprintf(stderr, "kara tokenize: %s\n", !model ? "-m MODEL is required" : "give -p TEXT or -f FILE");
        usage(stderr);
        return KR_EXIT_USAGE;
    }
    if (pieces && ids_only) {
        fprintf(stderr, "kara tokenize: --pieces and --ids-only exclude each other\n");
        return KR_EXIT_USAGE;
    }

    double t0 = kr_monotonic_seconds();
    kara_model_params mp;
    kara_model_params_init(&mp);
    mp.vocab_only = true;
    kara_model *mdl;
    kara_status st = kara_model_load(model, &mp, &mdl);
    if (st) { /* the message names the file ("cannot open 'M': ...", "M: ... at byte offset N", "M: key: ...") */
        fprintf(stderr, "kara tokenize: %s\n", kara_last_error());
        return st == KARA_ERR_IO ? KR_EXIT_NOINPUT : KR_EXIT_DATAERR;
    }
    if (!kara_model_has_tokenizer(mdl)) {
        fprintf(stderr, "kara tokenize: %s: the file has no tokenizer (no tokenizer.ggml.model)\n", model);
        kara_model_free(mdl);
        return KR_EXIT_DATAERR;
    }
    if (stats)
        fprintf(stderr, "kara tokenize: loaded %d tokens in %.3f s\n", kara_model_n_vocab(mdl),
                kr_monotonic_seconds() - t0);

    int rc = KR_EXIT_OK;
    char piece[256];
    for (int k = 0; k < n_inputs && rc == KR_EXIT_OK; k++) {
        size_t len = 0;
        char *owned = NULL;
        const char *text = inputs[k];
        if (is_file[k]) {
            owned = !strcmp(inputs[k], "-") ? kr_read_text_stream("tokenize", stdin, "stdin", &len)
                                            : kr_read_text_file("tokenize", inputs[k], &len);
            if (!owned) {
                rc = errno == EFBIG ? KR_EXIT_DATAERR : KR_EXIT_NOINPUT;
                break;
            }
            text = owned;
        } else {
            len = strlen(text);
        }
        if (len > KR_PROMPT_TEXT_MAX) { /* only -p text gets here: files stop at the limit */
            char what[32];
            snprintf(what, sizeof what, "input %d", k + 1);
            kr_text_too_large("tokenize", what);
            free(owned);
            rc = KR_EXIT_DATAERR;
            break;
        }
        int32_t cap = (int32_t)len + 16;
        int32_t *ids = malloc((size_t)cap * sizeof *ids);
        double t1 = kr_monotonic_seconds();
        int32_t n = 0;
        kara_status st =
            ids ? kara_tokenize(mdl, text, (int32_t)len, ids, cap, add_special, special, &n) : KARA_ERR_NOMEM;
        if (st == KARA_ERR_BUFFER && n > cap) { /* malformed UTF-8 reads as U+FFFD, several tokens a byte */
            int32_t *more = realloc(ids, (size_t)n * sizeof *ids);
            st = more ? kara_tokenize(mdl, text, (int32_t)len, (ids = more), n, add_special, special, &n)
                      : KARA_ERR_NOMEM;
        }
        double dt = kr_monotonic_seconds() - t1;
        if (st) {
            fprintf(stderr, "kara tokenize: input %d: %s\n", k + 1, ids ? kara_last_error() : "out of memory");
            free(ids);
            free(owned);
            rc = kr_exit_for_status(st);
            break;
        }
        if (!ids_only) printf("%d tokens:", n);
        for (int32_t i = 0; i < n; i++) {
            printf(i || !ids_only ? " %d" : "%d", ids[i]);
            if (!pieces) continue;
            int32_t m = 0;
            putchar(' ');
            if (kara_token_to_piece(mdl, ids[i], piece, (int32_t)sizeof piece, true, &m) == KARA_OK) {
                print_piece(piece, m);
            } else { /* a piece longer than the buffer: m is its size */
                char *big = malloc((size_t)m);
                if (big && kara_token_to_piece(mdl, ids[i], big, m, true, &m) == KARA_OK) print_piece(big, m);
                free(big);
            }
        }
        putchar('\n');
        if (stats)
            fprintf(stderr, "kara tokenize: input %d: %zu bytes -> %d tokens in %.3f s (%.1f MB/s)\n", k + 1, len, n,
                    dt, dt > 0 ? (double)len / dt / 1e6 : 0.0);
        free(ids);
        free(owned);
    }
    if (!kr_stdout_flush() && rc == KR_EXIT_OK) rc = KR_EXIT_IOERR; /* main names the error */
    kara_model_free(mdl);
    return rc;
}

const kr_command kr_cmd_tokenize = {"tokenize", "print the token ids of a text", tokenize_main};
