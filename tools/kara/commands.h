/* commands.h - the subcommands of `kara`. Each lives in its own cmd_*.c file
 * and is listed in the table in main.c. */
#ifndef KR_COMMANDS_H
#define KR_COMMANDS_H

typedef struct kr_command {
    const char *name;
    const char *summary;
    int (*main)(int argc, char **argv); /* argv[0] is the subcommand name */
} kr_command;

extern const kr_command kr_cmd_run;
extern const kr_command kr_cmd_chat;
extern const kr_command kr_cmd_inspect;
extern const kr_command kr_cmd_tokenize;
extern const kr_command kr_cmd_gen_model;
extern const kr_command kr_cmd_quantize;
extern const kr_command kr_cmd_bench;
extern const kr_command kr_cmd_batch;
extern const kr_command kr_cmd_eval_kv;
extern const kr_command kr_cmd_eval;
extern const kr_command kr_cmd_config;

#endif
