/* main.c - `kara`: git-style dispatcher over the subcommands in cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include "cli_config.h"
#include "commands.h"
#include "console.h"
#include "exit_codes.h"
#include "kara.h"
#include "safe_output.h"

static const kr_command *const commands[] = {
    &kr_cmd_run,      &kr_cmd_chat,  &kr_cmd_batch, &kr_cmd_inspect, &kr_cmd_tokenize, &kr_cmd_gen_model,
    &kr_cmd_quantize, &kr_cmd_bench, &kr_cmd_eval,  &kr_cmd_eval_kv, &kr_cmd_config,
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: kara <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f,
            "\n`kara <command> --help` describes each command's options. `kara -m MODEL.gguf ...` (llama-cli's\n"
            "command line) is `kara run`.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return KR_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return kr_stdout_finish("help", KR_EXIT_OK);
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("kara %s (%s)\n", kara_version_string(), kara_system_info());
        return kr_stdout_finish("version", KR_EXIT_OK);
    }
    /* llama-cli's command line (`kara -m M.gguf -p ...`) is `kara run` */
    if (argv[1][0] == '-' && argv[1][1]) return kr_stdout_finish("run", kr_cmd_run.main(argc, argv));
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(argv[1], commands[i]->name)) continue;
        /* commands with a parser of their own still take --color and --no-progress */
        static const char *const own_parser[] = {"inspect", "tokenize", "gen-model", "quantize", "config"};
        for (size_t k = 0; k < sizeof own_parser / sizeof own_parser[0]; k++)
            if (!strcmp(argv[1], own_parser[k])) argc = kr_console_take_flags(argc - 1, argv + 1) + 1;
        /* every command: a failed write to stdout is exit 74, never a success */
        return kr_stdout_finish(commands[i]->name, commands[i]->main(argc - 1, argv + 1));
    }
    const char *near = NULL;
    int best = 3;
    for (size_t i = 0; i < N_COMMANDS; i++) {
        int d = kr_edit_distance(argv[1], commands[i]->name);
        if (d < best) best = d, near = commands[i]->name;
    }
    if (near)
        fprintf(stderr, "kara: unknown command '%s'; did you mean '%s'?\n", argv[1], near);
    else
        fprintf(stderr, "kara: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return KR_EXIT_USAGE;
}
