/* cmd_chat.c - `kara chat`: an interactive conversation with a model.
 * Replies stream as they are generated; a reasoning model's thinking is
 * shown dimmed (or hidden) apart from its answer. On a terminal lines are
 * edited with our own line editor (tools/common/line_editor.c: history,
 * Ctrl-L, type-ahead kept out of the reply; docs/CHAT.md). Plain text when
 * stdin or stdout is not a terminal, so `printf 'hi\n' | kara chat -m M`
 * works in scripts: one reply per input line. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_args.h"
#include "cli_config.h"
#include "commands.h"
#include "console.h"
#include "draft_model.h"
#include "exit_codes.h"
#include "kara.h"
#include "chat_help.h"
#include "kv_exact.h"
#include "line_editor.h"
#include "safe_output.h"

#define CHAT_DEFAULT_CTX 4096
#define CHAT_CTX_ORIGIN "kara chat default (the model's context when smaller)"

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct chat_opts {
    kara_config cfg; /* sampling, max_tokens, chat.*, context: --config then flags */
    const char *system;
    bool hide_thinking;
    bool raw_reasoning; /* --reasoning-format none: tags stay in the text */
    bool simple_io;
    bool verbose;
    bool verbose_prompt; /* print each rendered prompt to stderr */
    bool ignore_eos;
} chat_opts;

static const kr_cli_flag chat_flags[] = {
    {"-sys|--system", true, "system prompt"},
    {"--think", true, "auto|on|off: thinking for templates that switch it (as /set think, /set nothink)"},
    {"--reasoning-format", true, "deepseek (thinking apart, default) | none (raw text with the tags)"},
    {"--hide-thinking", false, "do not show thinking"},
    {"--ignore-eos", false, "keep generating past end-of-generation tokens"},
    {"--simple-io", false, "plain output even on a terminal"},
    {"-v|--verbose", false, "print the effective settings"},
    {"--verbose-prompt", false, "print each prompt as the template renders it (stderr)"},
};
#define N_CHAT_FLAGS (int)(sizeof chat_flags / sizeof chat_flags[0])

/* Parse flags; returns -1 to go on, else the exit code. */
static int parse(int argc, char **argv, chat_opts *o) {
    kr_cli_parsed cli;
    int rc = kr_cli_parse("chat", argc, argv, chat_flags, N_CHAT_FLAGS, &o->cfg, &cli);
    for (int i = 0; rc < 0 && i < cli.n_args; i++) {
        const kr_cli_arg *a = &cli.args[i];
        if (!a->flag) {
            fprintf(stderr, "kara chat: unexpected argument '%s'\n", a->value);
            rc = KR_EXIT_USAGE;
        } else if (kr_cli_flag_is(a->flag, "--system")) {
            o->system = a->value;
        } else if (kr_cli_flag_is(a->flag, "--think")) {
            if (kara_config_set(&o->cfg, "chat.think", a->value, "--think") != KARA_OK) {
                fprintf(stderr, "kara chat: %s\n", kara_last_error());
                rc = KR_EXIT_USAGE;
            }
        } else if (kr_cli_flag_is(a->flag, "--reasoning-format")) {
            if (!strcmp(a->value, "none"))
                o->raw_reasoning = true;
            else if (!strcmp(a->value, "deepseek") || !strcmp(a->value, "auto"))
                o->raw_reasoning = false;
            else {
                fprintf(stderr, "kara chat: --reasoning-format: expected none or deepseek, got '%s'\n", a->value);
                rc = KR_EXIT_USAGE;
            }
        } else if (kr_cli_flag_is(a->flag, "--hide-thinking")) {
            o->hide_thinking = true;
        } else if (kr_cli_flag_is(a->flag, "--ignore-eos")) {
            o->ignore_eos = true;
        } else if (kr_cli_flag_is(a->flag, "--simple-io")) {
            o->simple_io = true;
        } else if (kr_cli_flag_is(a->flag, "--verbose")) {
            o->verbose = true;
        } else if (kr_cli_flag_is(a->flag, "--verbose-prompt")) {
            o->verbose_prompt = true;
        }
    }
    /* chat's own default context, applied before --print-config shows the
     * configuration, and named as such in its origin */
    const char *origin = kara_config_origin(&o->cfg, "context.size");
    if (rc < 0 && origin && !strcmp(origin, "default")) {
        char v[16];
        snprintf(v, sizeof v, "%d", CHAT_DEFAULT_CTX);
        kara_config_set(&o->cfg, "context.size", v, CHAT_CTX_ORIGIN);
    }
    char synopsis[1024];
    snprintf(synopsis, sizeof synopsis,
             "usage: kara chat -m MODEL [options]\n\n"
             "Talk to a model. Type a message and press Enter; end a line with \\ to continue it.\n"
             "Ctrl-C stops a reply; a second Ctrl-C (or one at the prompt) exits with 130; Ctrl-D exits.\n"
             "Without a terminal (e.g. printf 'hi\\n' | kara chat -m M) every input line gets a reply,\n"
             "in plain text. Thinking is shown dimmed (between [Start thinking] and [End thinking] in\n"
             "plain text). The context defaults to %d tokens (the model's, if smaller).\n\n"
             "commands: /exit (/quit, /bye), /clear, /regen, /read FILE, /set think, /set nothink, /stats, /help\n\n",
             CHAT_DEFAULT_CTX);
    return kr_cli_finish("chat", synopsis, chat_flags, N_CHAT_FLAGS, &o->cfg, &cli, rc);
}

/* ------------------------------------------------------------------------ */
/* Ctrl-C                                                                    */
/* ------------------------------------------------------------------------ */

static volatile sig_atomic_t g_generating;     /* a reply is being generated */
static volatile sig_atomic_t g_stop_reply;     /* Ctrl-C: stop the current reply */
static volatile sig_atomic_t g_exit;           /* Ctrl-C: leave (seen by the idle loop) */
static volatile sig_atomic_t g_color_out;      /* ANSI on stdout: reset it on a hard exit */
static volatile sig_atomic_t g_last_sigint_ms; /* ms since g_t0 of the last Ctrl-C + 1; 0 = none */
static struct timespec g_t0;

/* Milliseconds since the session started (fits a sig_atomic_t for weeks). */
static int now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int)((ts.tv_sec - g_t0.tv_sec) * 1000 + (ts.tv_nsec - g_t0.tv_nsec) / 1000000);
}

/* First Ctrl-C during a reply stops it; another within 2 s exits at once
 * (a long prompt chunk may keep the reply from noticing); one at the
 * prompt exits through the main loop. Only async-signal-safe calls. */
static void on_sigint(int sig) {
    (void)sig;
    int t = now_ms() + 1;
    bool second = g_last_sigint_ms && t - g_last_sigint_ms < 2000;
    g_last_sigint_ms = t;
    if (g_generating && !second) {
        g_stop_reply = 1;
        return;
    }
    g_exit = 1;
    if (g_generating) {
        static const char reset[] = KR_ANSI_RESET "\n";
        kr_term_restore(); /* the line editor's raw mode (async-signal-safe) */
        if (g_color_out)
            (void)!write(STDOUT_FILENO, reset, sizeof reset - 1);
        else
            (void)!write(STDOUT_FILENO, "\n", 1);
        _exit(KR_EXIT_SIGINT);
    }
}

/* SIGTERM, SIGHUP, SIGQUIT: give the terminal back its mode and colour,
 * then die of the signal as if unhandled. */
static void on_fatal_signal(int sig) {
    static const char reset[] = KR_ANSI_RESET;
    kr_term_restore();
    if (g_color_out) (void)!write(STDOUT_FILENO, reset, sizeof reset - 1);
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when the handler returns */
}

static bool abort_reply(void *user) {
    (void)user;
    return g_stop_reply != 0;
}

/* ------------------------------------------------------------------------ */
/* Session                                                                   */
/* ------------------------------------------------------------------------ */

typedef struct text_buf {
    char *p;
    size_t len, cap;
} text_buf;

static bool tb_put(text_buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

typedef struct chat_session {
    chat_opts *o;
    kara_model *model;
    kara_context *ctx;
    kr_draft_model draft; /* speculative.mode draft */
    kara_generator *gen;
    kara_chat_template tmpl;
    bool think;     /* thinking on for the next reply */
    bool fancy;     /* an interactive terminal: line editor, a placeholder erased */
    bool color_out; /* ANSI styling on stdout (kr_console_color) */
    bool color_err; /* ANSI styling of the notes on stderr */
    bool tty_in;
    kara_chat_message *msgs; /* history; contents malloc'd (roles are literals) */
    size_t n_msgs, cap_msgs;
    text_buf prompt;
    int32_t *ids;
    int32_t cap_ids;
    text_buf think_text, answer_text;
    bool have_stats;
    kara_generator_stats stats;
    bool failed;            /* a turn failed (exit status in script mode) */
    bool single_turn;       /* the model says it answers one message per conversation */
    bool single_turn_noted; /* and a follow-up was told so */
    kara_kv_params kv;      /* the KV settings of ctx (the exact-context notice) */
} chat_session;

static bool push_msg(chat_session *s, const char *role, const char *text, size_t len) {
    if (s->n_msgs == s->cap_msgs) {
        size_t cap = s->cap_msgs ? s->cap_msgs * 2 : 16;
        kara_chat_message *m = realloc(s->msgs, cap * sizeof *m);
        if (!m) return false;
        s->msgs = m;
        s->cap_msgs = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return false;
    memcpy(c, text, len);
    c[len] = '\0';
    s->msgs[s->n_msgs++] = (kara_chat_message){role, c};
    return true;
}

static void pop_msg(chat_session *s) {
    if (s->n_msgs == 0) return;
    free((char *)s->msgs[--s->n_msgs].content);
}

/* Forget the conversation but the system prompt. */
static void clear_history(chat_session *s) {
    while (s->n_msgs > (s->o->system ? 1u : 0u)) pop_msg(s);
    kara_seq_clear(s->ctx, 0);
}

static bool template_has_think_switch(const chat_session *s) {
    return s->tmpl.family == KARA_CHAT_QWEN3 || s->tmpl.prefill_think;
}

/* Prompt tokens for the whole conversation plus the generation prompt. */
static int32_t render_prompt(chat_session *s) {
    size_t len = 0;
    if (kara_chat_apply(&s->tmpl, s->msgs, s->n_msgs, true, s->think, NULL, 0, &len) != KARA_OK) return -1;
    s->prompt.len = 0;
    if (len + 1 > s->prompt.cap) {
        char *p = realloc(s->prompt.p, len + 1);
        if (!p) return -1;
        s->prompt.p = p;
        s->prompt.cap = len + 1;
    }
    kara_chat_apply(&s->tmpl, s->msgs, s->n_msgs, true, s->think, s->prompt.p, s->prompt.cap, &len);
    s->prompt.len = len;
    int32_t n = 0;
    kara_status st = kara_tokenize(s->model, s->prompt.p, (int32_t)len, s->ids, s->cap_ids, false, true, &n);
    if (st && !(st == KARA_ERR_BUFFER && n > s->cap_ids)) {
        fprintf(stderr, "kara chat: cannot tokenize the conversation: %s\n", kara_last_error());
        return -1;
    }
    if (s->o->verbose_prompt) {
        fprintf(stderr, "prompt (%d tokens):\n%s\n", n, s->prompt.p);
        fflush(stderr);
    }
    if (st || n > kara_context_n_ctx(s->ctx)) {
        fprintf(stderr,
                "kara chat: the conversation (%d tokens) no longer fits the context of %d tokens; "
                "/clear starts over (or raise -c)\n",
                n, kara_context_n_ctx(s->ctx));
        return -1;
    }
    return n;
}

/* How the reply is shown: thinking dimmed on a terminal, between markers
 * in plain output, or not at all; the answer without the blank lines that
 * follow "</think>". */
typedef struct reply_view {
    chat_session *s;
    bool started;  /* a piece has been seen */
    bool in_think; /* the last piece seen was thinking */
    bool strip_nl; /* drop newlines until the channel's first other byte */
    char last;     /* last byte written */
} reply_view;

static void out_str(reply_view *v, const char *s) {
    size_t n = strlen(s);
    if (n == 0) return;
    fwrite(s, 1, n, stdout);
    v->last = s[n - 1];
}

static void out_text(reply_view *v, const char *s, size_t n) {
    if (n == 0) return;
    fwrite(s, 1, n, stdout);
    v->last = s[n - 1];
}

#define THINKING_PLACEHOLDER "thinking..."
#define THINKING_PLACEHOLDER_BLANK "           " /* as many spaces */

/* Leave the thinking section on screen. */
static void close_think(reply_view *v, bool answer_follows) {
    const chat_session *s = v->s;
    if (s->o->hide_thinking) {
        /* erase the placeholder; without colour, not even "ESC [ K" */
        if (s->fancy) out_str(v, s->color_out ? "\r\033[K" : "\r" THINKING_PLACEHOLDER_BLANK "\r");
        v->last = 0;
    } else if (s->color_out) {
        out_str(v, KR_ANSI_RESET);
        if (answer_follows) out_str(v, v->last == '\n' ? "\n" : "\n\n");
    } else {
        out_str(v, v->last == '\n' ? "[End thinking]\n" : "\n[End thinking]\n");
        if (answer_follows) out_str(v, "\n");
    }
}

static void show_piece(reply_view *v, const kara_piece *p) {
    const chat_session *s = v->s;
    const char *t = p->text;
    size_t n = (size_t)p->len;
    bool think = p->channel == KARA_CHANNEL_THINK;
    if (!v->started || think != v->in_think) {
        if (think) {
            if (!s->o->hide_thinking)
                out_str(v, s->color_out ? KR_ANSI_DIM : "[Start thinking]\n");
            else if (s->fancy)
                out_str(v, s->color_out ? KR_ANSI_DIM THINKING_PLACEHOLDER KR_ANSI_RESET : THINKING_PLACEHOLDER);
        } else if (v->started) {
            close_think(v, true);
        }
        v->started = true;
        v->in_think = think;
        v->strip_nl = true;
    }
    if (think && s->o->hide_thinking) return;
    if (v->strip_nl) {
        while (n > 0 && (*t == '\n' || *t == '\r')) t++, n--;
        if (n == 0) return;
        v->strip_nl = false;
    }
    out_text(v, t, n);
}

/* Close the reply on screen: leave the dim colour, end the line. */
static void end_reply(reply_view *v) {
    if (v->in_think) close_think(v, false);
    if (v->last && v->last != '\n') out_str(v, "\n");
    fflush(stdout);
}

/* A short remark about the session, on stderr (dimmed on a terminal). */
static void note(const chat_session *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (s->color_err) fputs(KR_ANSI_DIM, stderr);
    vfprintf(stderr, fmt, ap);
    if (s->color_err) fputs(KR_ANSI_RESET, stderr);
    fputc('\n', stderr);
    va_end(ap);
}

/* Generate the assistant's reply to the history as it stands and append
 * it. Returns false when the turn failed (nothing appended). */
static bool reply(chat_session *s) {
    int32_t n = render_prompt(s);
    if (n < 0) return false;
    g_stop_reply = 0;
    g_last_sigint_ms = 0;
    g_generating = 1;
    kara_status st = kara_generator_start(s->gen, 0, s->ids, n);
    if (st) {
        g_generating = 0;
        if (st == KARA_ERR_ABORTED) {
            note(s, "(stopped)");
            return false;
        }
        fprintf(stderr, "kara chat: %s\n", kara_last_error());
        return false;
    }
    s->think_text.len = s->answer_text.len = 0;
    reply_view v = {s, false, false, false, 0};
    kara_piece p;
    while ((st = kara_generator_next(s->gen, &p)) == KARA_OK) {
        show_piece(&v, &p);
        if (!kr_stdout_flush()) break; /* stdout failed: the loop stops, main reports it (exit 74) */
        text_buf *b = p.channel == KARA_CHANNEL_THINK ? &s->think_text : &s->answer_text;
        if (!tb_put(b, p.text, (size_t)p.len)) {
            st = KARA_ERR_NOMEM;
            break;
        }
    }
    g_generating = 0;
    end_reply(&v);
    kara_generator_get_stats(s->gen, &s->stats);
    s->have_stats = true;
    if (st < 0) {
        fprintf(stderr, "kara chat: %s\n", kara_last_error());
        return false;
    }
    kara_stop_reason why = kara_generator_stop_reason(s->gen);
    if (why == KARA_STOP_ABORT)
        note(s, "(stopped)");
    else if (why == KARA_STOP_CONTEXT_FULL)
        note(s, "(the context is full; /clear starts over)");
    else if (why == KARA_STOP_MAX_TOKENS && s->tty_in)
        note(s, "(reply cut at %d tokens)", s->stats.n_generated);

    /* the history keeps the reply as the model wrote it; the template drops
     * the thinking where the model's own template does */
    text_buf raw = {0};
    bool ok = tb_put(&raw, "", 0);
    bool thought = s->think_text.len > 0 || (s->tmpl.prefill_think && s->think);
    if (thought && !s->o->raw_reasoning) {
        if (!s->tmpl.prefill_think || !s->think) ok = ok && tb_put(&raw, "<think>", 7);
        ok = ok && tb_put(&raw, s->think_text.p ? s->think_text.p : "", s->think_text.len);
        ok = ok && tb_put(&raw, "</think>", 8);
    }
    ok = ok && tb_put(&raw, s->answer_text.p ? s->answer_text.p : "", s->answer_text.len);
    ok = ok && push_msg(s, "assistant", raw.p, raw.len);
    free(raw.p);
    return ok;
}

static void show_stats(const chat_session *s) {
    if (!s->have_stats) {
        printf("no reply yet\n");
    } else {
        const kara_generator_stats *t = &s->stats;
        printf("prompt:     %d tokens (%d decoded, %d reused) in %.3f s, %.1f tok/s\n", t->n_prompt,
               t->n_prompt_decoded, t->n_prompt - t->n_prompt_decoded, t->t_prompt_s,
               t->t_prompt_s > 0 ? t->n_prompt_decoded / t->t_prompt_s : 0.0);
        printf("generation: %d tokens (%d thinking, %d forced) in %.3f s, %.1f tok/s\n", t->n_generated, t->n_think,
               t->n_forced, t->t_generate_s, t->t_generate_s > 0 ? t->n_generated / t->t_generate_s : 0.0);
    }
    printf("context:    %d of %d tokens\n", kara_seq_n_past(s->ctx, 0), kara_context_n_ctx(s->ctx));
    printf("KV memory:  %.2f MiB (peak %.2f MiB)\n", kara_context_kv_bytes(s->ctx) / 1048576.0,
           kara_context_kv_bytes_peak(s->ctx) / 1048576.0);
    printf("template:   %s, thinking %s\n", kara_chat_family_name(s->tmpl.family), s->think ? "on" : "off");
    char exact[256];
    if (kr_kv_exact_text(s->ctx, &s->kv, exact, sizeof exact)) printf("KV budget:  %s\n", exact);
    fflush(stdout);
}

/* Send a user message and show the reply. */
static void user_turn(chat_session *s, const char *text, size_t len) {
    if (s->single_turn && !s->single_turn_noted && s->n_msgs > 0 && !strcmp(s->msgs[s->n_msgs - 1].role, "assistant")) {
        note(s, "(this model answers one message per conversation: /clear before a new question)");
        s->single_turn_noted = true;
    }
    if (!push_msg(s, "user", text, len)) {
        fprintf(stderr, "kara chat: out of memory\n");
        s->failed = true;
        return;
    }
    if (!reply(s)) {
        pop_msg(s);
        s->failed = true;
    }
}

typedef enum cmd_result { CMD_NONE, CMD_DONE, CMD_EXIT } cmd_result;

/* Run a /command; CMD_NONE when the line is a message (including Qwen3's
 * in-message /think and /no_think, which the model reads itself). */
static cmd_result command(chat_session *s, const char *line) {
    if (line[0] != '/') return CMD_NONE;
    const char *cmd = line + 1;
    size_t w = strcspn(cmd, " \t");
    const char *arg = cmd + w;
    while (*arg == ' ' || *arg == '\t') arg++;
#define IS(name) (w == strlen(name) && !strncmp(cmd, name, w))
    if (IS("think") || IS("no_think")) return CMD_NONE;
    if (IS("exit") || IS("bye") || IS("quit")) return CMD_EXIT;
    if (IS("help") || IS("?")) {
        kr_chat_help(stdout);
    } else if (IS("clear")) {
        clear_history(s);
        note(s, "(conversation cleared)");
    } else if (IS("regen")) {
        if (s->n_msgs == 0 || strcmp(s->msgs[s->n_msgs - 1].role, "assistant") != 0) {
            note(s, "(nothing to regenerate)");
        } else {
            /* The same prompt again: the generator cuts the sequence back to
             * it (kara_seq_truncate) and decodes only its last two tokens; where
             * KV compression has touched the prompt the cut is refused and
             * the prompt is decoded again. The note says which (docs/CHAT.md). */
            pop_msg(s);
            if (!reply(s))
                s->failed = true;
            else if (s->tty_in)
                note(s, "(regenerated: %d prompt tokens reused, %d decoded again)",
                     s->stats.n_prompt - s->stats.n_prompt_decoded, s->stats.n_prompt_decoded);
        }
    } else if (IS("read")) {
        if (!*arg) {
            note(s, "(usage: /read FILE)");
            return CMD_DONE;
        }
        size_t len = 0;
        char *text = kr_read_text_file("chat", arg, &len);
        if (!text) {
            s->failed = true;
            return CMD_DONE;
        }
        user_turn(s, text, len);
        free(text);
    } else if (IS("set")) {
        if (!strcmp(arg, "think") || !strcmp(arg, "nothink")) {
            s->think = !strcmp(arg, "think");
            if (!template_has_think_switch(s))
                note(s, "(the %s template has no thinking switch; the model decides)",
                     kara_chat_family_name(s->tmpl.family));
            else
                note(s, s->think ? "(thinking on)" : "(thinking off)");
        } else {
            note(s, "(usage: /set think | /set nothink)");
        }
    } else if (IS("stats")) {
        show_stats(s);
    } else {
        fprintf(stderr, "kara chat: unknown command '%.*s' (/help lists them)\n", (int)w + 1, line);
    }
#undef IS
    return CMD_DONE;
}

#define PROMPT_FIRST "> "
#define PROMPT_MORE "... "

/* The plain reader's prompt (a terminal without the line editor: TERM=dumb,
 * --simple-io, or stdout not a terminal). */
static void print_prompt(const chat_session *s, bool continuation) {
    if (!s->tty_in) return;
    FILE *f = isatty(STDOUT_FILENO) ? stdout : stderr;
    bool bold = kr_console_color(fileno(f)) && !s->o->simple_io;
    if (bold) fputs(KR_ANSI_BOLD, f);
    fputs(continuation ? PROMPT_MORE : PROMPT_FIRST, f);
    if (bold) fputs(KR_ANSI_RESET, f);
    if (fflush(f) != 0 && errno == EINTR) clearerr(f); /* a Ctrl-C costs the prompt, not the session */
}

/* Where input lines come from: the line editor on an interactive
 * terminal, else the plain read(2) reader (pipes, files, TERM=dumb). */
typedef struct chat_input {
    kr_line_editor *ed; /* NULL: plain reader */
    kr_line_reader r;
    bool prompt_due; /* plain reader: the prompt is still to be printed */
} chat_input;

static kr_line_status read_input(chat_input *in, const chat_session *s, bool continuation, char **line, size_t *cap) {
    if (in->ed) {
        fflush(stdout);
        fflush(stderr);
        kr_line_status ls = kr_le_read(in->ed, continuation ? PROMPT_MORE : PROMPT_FIRST, line, cap);
        if (ls == KR_LINE_OK && !kr_le_history_add(&in->ed->st, *line)) return KR_LINE_ERROR;
        return ls;
    }
    if (in->prompt_due) print_prompt(s, continuation);
    kr_line_status ls = kr_read_line(&in->r, line, cap);
    in->prompt_due = ls != KR_LINE_INTERRUPTED; /* an interrupted read goes on after the same prompt */
    return ls;
}

/* Ctrl-C's handler. Without SA_RESTART it interrupts the read at the prompt,
 * as it must; with it (replies, commands) a write to stdout is not failed
 * with EINTR, which stdio turns into a lost buffer and "cannot write stdout". */
static void set_sigint(bool restart) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGINT, &sa, NULL);
}

/* The read-eval loop; returns the exit code. */
static int chat_loop(chat_session *s) {
    chat_input in = {0};
    kr_line_reader_init(&in.r, STDIN_FILENO);
    in.r.max = KR_PROMPT_TEXT_MAX;
    in.prompt_due = true;
    kr_line_editor ed;
    /* raw mode from here to the end, replies included: keys typed during a
     * reply are not echoed into it and wait for the next prompt. A terminal
     * that refuses raw mode gets the plain reader. */
    if (s->fancy && kr_term_raw(STDIN_FILENO)) {
        if (!kr_line_editor_init(&ed, STDIN_FILENO, STDOUT_FILENO, s->color_out)) {
            fprintf(stderr, "kara chat: out of memory\n");
            return KR_EXIT_SOFTWARE;
        }
        in.ed = &ed;
    }
    char *line = NULL;
    size_t cap = 0;
    text_buf msg = {0};
    int rc = KR_EXIT_OK;
    bool continuation = false;
    for (;;) {
        set_sigint(false);
        kr_line_status ls = read_input(&in, s, continuation, &line, &cap);
        set_sigint(true);
        if (ls == KR_LINE_INTERRUPTED) {
            if (g_exit) {
                if (s->tty_in) fputc('\n', stdout);
                rc = KR_EXIT_SIGINT;
                break;
            }
            continue;
        }
        if (ls == KR_LINE_ERROR) {
            fprintf(stderr, "kara chat: cannot read the input: %s\n", strerror(errno));
            rc = KR_EXIT_IOERR;
            break;
        }
        if (ls == KR_LINE_EOF) {
            if (s->tty_in) fputc('\n', stdout);
            if (msg.len) user_turn(s, msg.p, msg.len); /* a last line ended by "\" */
            break;
        }
        size_t n = strlen(line);
        if (ls == KR_LINE_TOO_LONG || msg.len + n > KR_PROMPT_TEXT_MAX) { /* refused; the session goes on */
            kr_text_too_large("chat", "message not sent");
            s->failed = true;
            msg.len = 0;
            continuation = false;
            continue;
        }
        if (n > 0 && line[n - 1] == '\\') {
            tb_put(&msg, line, n - 1);
            tb_put(&msg, "\n", 1);
            continuation = true;
            continue;
        }
        tb_put(&msg, line, n);
        continuation = false;
        if (msg.len == 0 || strspn(msg.p, " \t\n") == msg.len) {
            msg.len = 0;
            continue;
        }
        cmd_result c = command(s, msg.p);
        if (c == CMD_EXIT) break;
        if (c == CMD_NONE) user_turn(s, msg.p, msg.len);
        msg.len = 0;
        if (!kr_stdout_flush()) {
            rc = KR_EXIT_IOERR; /* main prints "cannot write stdout" */
            break;
        }
        if (g_exit) {
            rc = KR_EXIT_SIGINT;
            break;
        }
    }
    fflush(stdout);
    kr_term_restore();
    if (in.ed) kr_line_editor_free(in.ed);
    free(line);
    free(msg.p);
    if (rc == KR_EXIT_OK && s->failed && !s->tty_in) rc = KR_EXIT_DATAERR;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */
/* ------------------------------------------------------------------------ */

static int chat_main(int argc, char **argv) {
    static chat_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    chat_session s = {0};
    s.o = &o;
    s.fancy = kr_console_fancy() && !o.simple_io;
    s.color_out = kr_console_color(STDOUT_FILENO) && !o.simple_io;
    s.color_err = kr_console_color(STDERR_FILENO) && !o.simple_io;
    s.tty_in = isatty(STDIN_FILENO);
    g_color_out = s.color_out;

    kara_status st = kr_cli_load_model(&o.cfg, &s.model);
    if (st) {
        fprintf(stderr, "kara chat: %s\n", kara_last_error());
        return kr_exit_for_status(st);
    }
    kara_config *c = &o.cfg;
    const char *ctx_origin = kara_config_origin(c, "context.size");
    if (ctx_origin && !strcmp(ctx_origin, CHAT_CTX_ORIGIN)) {
        int32_t train = kara_model_n_ctx_train(s.model);
        if (train > 0 && train < c->context.n_ctx) c->context.n_ctx = train;
    }
    c->context.n_seq_max = 1;
    rc = KR_EXIT_OK;
    if ((st = kara_chat_template_from_model(s.model, c->chat_template, &s.tmpl))) {
        fprintf(stderr, "kara chat: --chat-template: %s\n", kara_last_error());
        rc = KR_EXIT_USAGE;
        goto done;
    }
    s.think = c->think != KARA_THINK_OFF && c->reasoning_budget != 0;
    kara_context_params cp = kr_cli_context_params(c);
    if ((st = kara_context_create(s.model, &cp, &s.ctx))) {
        fprintf(stderr, "kara chat: %s\n", kara_last_error());
        rc = kr_exit_for_context(cp.device, st);
        goto done;
    }
    kara_generator_params gp;
    kara_generator_params_init(&gp);
    gp.sampling = c->sampling;
    gp.max_tokens = c->max_tokens;
    gp.reasoning_budget = c->reasoning_budget;
    gp.split_thinking = !o.raw_reasoning;
    gp.abort = abort_reply;
    gp.ignore_eog = o.ignore_eos;
    gp.spec = c->spec;
    gp.draft_max = c->draft_max;
    gp.draft_p_min = c->draft_p_min;
    if ((st = kr_draft_model_open("chat", c, s.ctx, 1, &s.draft))) {
        rc = kr_exit_for_status(st);
        goto done;
    }
    gp.draft_ctx = s.draft.ctx;
    if ((st = kara_generator_create(s.ctx, &gp, &s.gen))) {
        fprintf(stderr, "kara chat: %s\n", kara_last_error());
        rc = kr_exit_for_status(st);
        goto done;
    }
    s.cap_ids = kara_context_n_ctx(s.ctx) + 1;
    s.ids = malloc((size_t)s.cap_ids * sizeof *s.ids);
    if (!s.ids || (o.system && !push_msg(&s, "system", o.system, strlen(o.system)))) {
        fprintf(stderr, "kara chat: out of memory\n");
        rc = KR_EXIT_SOFTWARE;
        goto done;
    }
    if (o.verbose) {
        fprintf(stderr,
                "kara chat: %s\n  template %s%s, thinking %s, reasoning budget %d, context %d, max tokens %d\n"
                "  temp %.2f, top-k %d, top-p %.2f, min-p %.2f, repeat penalty %.2f, seed %llu\n",
                kara_model_desc(s.model), kara_chat_family_name(s.tmpl.family),
                s.tmpl.prefill_think ? " (pre-fills <think>)" : "", s.think ? "on" : "off", c->reasoning_budget,
                kara_context_n_ctx(s.ctx), c->max_tokens, c->sampling.temperature, c->sampling.top_k, c->sampling.top_p,
                c->sampling.min_p, c->sampling.repeat_penalty, (unsigned long long)c->sampling.seed);
    }
    char flag[8]; /* a model that answers one message per conversation says so in its GGUF */
    s.single_turn =
        kara_model_meta_str(s.model, "kara.chat.single_turn", flag, sizeof flag, NULL) && !strcmp(flag, "true");
    s.kv = cp.kv;
    char exact[256];
    if (kr_kv_exact_text(s.ctx, &s.kv, exact, sizeof exact)) fprintf(stderr, "kara chat: note: %s\n", exact);
    if (s.tty_in) {
        fprintf(stderr,
                "kara chat: %s, %s template, thinking %s, context %d.\n"
                "Type a message; /help lists the commands; /exit or Ctrl-D quits.\n",
                kara_model_desc(s.model), kara_chat_family_name(s.tmpl.family), s.think ? "on" : "off",
                kara_context_n_ctx(s.ctx));
        if (s.single_turn)
            fputs("This model answers one message per conversation: /clear before each question.\n", stderr);
    }

    clock_gettime(CLOCK_MONOTONIC, &g_t0);
    struct sigaction old_sa;
    sigaction(SIGINT, NULL, &old_sa);
    set_sigint(false); /* chat_loop switches SA_RESTART off at the prompt, on elsewhere */
    /* the line editor's raw mode must not outlive a kill */
    struct sigaction fa, old_fa[3];
    static const int fatal[3] = {SIGTERM, SIGHUP, SIGQUIT};
    memset(&fa, 0, sizeof fa);
    fa.sa_handler = on_fatal_signal;
    sigemptyset(&fa.sa_mask);
    for (int i = 0; i < 3; i++) sigaction(fatal[i], &fa, &old_fa[i]);
    rc = chat_loop(&s);
    for (int i = 0; i < 3; i++) sigaction(fatal[i], &old_fa[i], NULL);
    sigaction(SIGINT, &old_sa, NULL);

done:
    while (s.n_msgs) pop_msg(&s);
    free(s.msgs);
    free(s.prompt.p);
    free(s.think_text.p);
    free(s.answer_text.p);
    free(s.ids);
    kara_generator_free(s.gen);
    kr_draft_model_close(&s.draft);
    kara_context_free(s.ctx);
    kara_model_free(s.model);
    return rc;
}

const kr_command kr_cmd_chat = {"chat", "talk to a model (thinking shown apart)", chat_main};
