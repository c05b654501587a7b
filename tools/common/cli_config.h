/* cli_config.h - the flags every model-running command shares (model,
 * context, threads, sampling, KV cache), mapped onto kara_config keys so a
 * flag and a YAML key are checked by the same code. Precedence: flags over
 * --config files (in the order given) over defaults, whatever the order on
 * the command line. */
#ifndef KR_CLI_CONFIG_H
#define KR_CLI_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "kara.h"

/* A command's own flag. */
typedef struct kr_cli_flag {
    const char *names; /* "-p|--prompt" */
    bool has_value;
    const char *help; /* one line, ending "(default: X)" where there is one; NULL hides it */
} kr_cli_flag;

/* One of the command's own flags as found on the command line. */
typedef struct kr_cli_arg {
    const kr_cli_flag *flag; /* NULL for a positional argument */
    const char *value;
} kr_cli_arg;

typedef struct kr_cli_parsed {
    kr_cli_arg *args; /* the command's own flags and positionals, in order */
    int n_args;
    bool print_config;
    bool help;
    bool help_all; /* --help-all: every option, not only the everyday ones */
    bool escape;   /* -e/--escape: the prompt's \n, \t, \\ ... are turned into characters */
} kr_cli_parsed;

/* Parse argv (argv[0] = command name) into cfg and out. Returns -1 on
 * success, else an exit code (usage/config error already printed).
 * Besides the shared flags and the command's own, every command takes the
 * terminal flags (--color, --no-progress) and llama.cpp's spellings where
 * the meaning is the same (--no-mmap, -ctk/-ctv, -e, --seed -1); GPU
 * flags (-ngl, -fa, ...) are accepted with a note that this build runs on
 * the CPU. An unknown flag is a usage error with a did-you-mean. */
int kr_cli_parse(const char *cmd, int argc, char **argv, const kr_cli_flag *own, int n_own, kara_config *cfg,
                 kr_cli_parsed *out);
void kr_cli_parsed_free(kr_cli_parsed *p);
/* True when name is one of the "|"-separated names of f. */
bool kr_cli_flag_is(const kr_cli_flag *f, const char *name);
/* Print the command's own flags, then the shared ones: the everyday ones,
 * or with all every one (--help-all). */
void kr_cli_usage(FILE *f, const kr_cli_flag *own, int n_own, bool all);
/* Restrict the shared flags the help lists to keys (NULL-terminated, each
 * "key" or "key=default" for a default of the command's own), for a command
 * that uses only a few; NULL lists them all. */
void kr_cli_help_keys(const char *const *keys);
/* Print the resolved configuration (--print-config) to f. */
void kr_cli_print_config(FILE *f, const kara_config *cfg);
/* cfg's context params as the commands create their contexts with: when
 * they speculate, verify_max draft_max + 1, so that h2o, lazy and read
 * tracking keep each drafted entry's attention apart too. */
kara_context_params kr_cli_context_params(const kara_config *cfg);
/* Load cfg's model (model.path) with its model.* options. */
kara_status kr_cli_load_model(const kara_config *cfg, kara_model **out);
/* The same for another file (the draft model) with cfg's model.* options. */
kara_status kr_cli_load_model_at(const kara_config *cfg, const char *path, kara_model **out);
/* The end of every command's flag parsing: with rc < 0 (go on), --help
 * prints the synopsis and the options and --print-config the resolved
 * configuration (both then exit 0), and a missing model path is a usage
 * error. Frees the parsed flags. Returns the exit code to stop with, or -1
 * to go on. */
int kr_cli_finish(const char *cmd, const char *synopsis, const kr_cli_flag *own, int n_own, const kara_config *cfg,
                  kr_cli_parsed *cli, int rc);

/* Tell safe_output.h the files cfg names for reading (model, draft model,
 * batch input): no file the command writes may be one of them. Called by
 * kr_cli_finish; a command that ends its parsing otherwise calls it. */
void kr_cli_note_inputs(const kara_config *cfg);

/* Edit distance with transpositions, capped at 9 (did-you-mean). */
int kr_edit_distance(const char *a, const char *b);

#endif
