/* main.c - `kara`: git-style dispatcher over the subcommands in cmd_*.c. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "exit_codes.h"
#include "kara.h"

static const kr_command *const commands[] = {
    &kr_cmd_run,       &kr_cmd_chat,     &kr_cmd_batch, &kr_cmd_inspect, &kr_cmd_tokenize,
    &kr_cmd_gen_model, &kr_cmd_quantize, &kr_cmd_bench, &kr_cmd_eval,    &kr_cmd_eval_kv,
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: kara <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
    fprintf(f, "\n`kara <command> --help` describes each command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return KR_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return KR_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("kara %s (%s)\n", kara_version_string(), kara_system_info());
        return KR_EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i]->name)) return commands[i]->main(argc - 1, argv + 1);
    fprintf(stderr, "kara: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return KR_EXIT_USAGE;
}
