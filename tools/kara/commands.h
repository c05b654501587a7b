/* commands.h - the subcommands of `kara`. Each lives in its own cmd_*.c file
 * and is listed in the table in main.c. */
#ifndef KARA_COMMANDS_H
#define KARA_COMMANDS_H

typedef struct kara_command {
    const char *name;
    const char *summary;
    int (*main)(int argc, char **argv);   /* argv[0] is the subcommand name */
} kara_command;

extern const kara_command kara_cmd_run;
extern const kara_command kara_cmd_chat;
extern const kara_command kara_cmd_inspect;
extern const kara_command kara_cmd_tokenize;
extern const kara_command kara_cmd_gen_model;
extern const kara_command kara_cmd_quantize;
extern const kara_command kara_cmd_bench;
extern const kara_command kara_cmd_batch;
extern const kara_command kara_cmd_eval_kv;
extern const kara_command kara_cmd_eval;

#endif
