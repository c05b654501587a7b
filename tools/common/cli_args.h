/* cli_args.h - strict parsing of numeric command-line values, so a typo
 * such as `-n 12x` is a usage error instead of a silent 12. */
#ifndef KR_CLI_ARGS_H
#define KR_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "kara.h"

/* Each returns false (after printing "kara <cmd>: <flag>: ..." to stderr)
 * when the value is missing, malformed or out of [lo, hi]. */
bool kr_arg_int(const char *cmd, const char *flag, const char *value, long long lo, long long hi, long long *out);
bool kr_arg_float(const char *cmd, const char *flag, const char *value, double lo, double hi, double *out);
/* Parse "1,2,3" into ids (malloc'd); returns the count or -1 on error. */
int32_t kr_arg_id_list(const char *cmd, const char *flag, const char *value, int32_t **out);
/* The exit code for a library status (see exit_codes.h): a missing file is
 * 66, bad input data (format, tokens, context or KV budget too small for the
 * request) 65, bad settings 78, anything else 70. */
int kr_exit_for_status(kara_status st);
/* The same for kara_context_create on device: a device that is not there (a
 * build without the CUDA backend, no usable GPU, a GPU failure) is 69, not
 * bad input. */
int kr_exit_for_context(kara_device device, kara_status st);
/* The largest prompt text, in bytes: a prompt file (run -f, chat /read, eval-kv -f), a tokenize input, a
 * chat message. 64 MiB is four bytes for each position of the largest context (context.size <= 16777216
 * tokens), so no longer text can fit, and it keeps every length within kara_tokenize's int32_t. */
#define KR_PROMPT_TEXT_MAX (64u << 20)
/* Read a whole file into a NUL-terminated malloc'd buffer, or NULL with a
 * message on stderr; errno is EFBIG (exit 65, not 66) when the file holds
 * more than KR_PROMPT_TEXT_MAX bytes, found after reading one byte more. */
char *kr_read_text_file(const char *cmd, const char *path, size_t *len);
/* The same from an open stream (stdin), named path in messages; f stays open. */
char *kr_read_text_stream(const char *cmd, FILE *f, const char *path, size_t *len);
/* Both with a smaller bound max (bytes): a text of more than max bytes
 * (max < KR_PROMPT_TEXT_MAX) is NULL with errno ERANGE and no message, found
 * after reading max + 1 bytes. Either way a UTF-8 byte order mark at the
 * start is dropped with a note on stderr. */
char *kr_read_text_file_max(const char *cmd, const char *path, size_t max, size_t *len);
char *kr_read_text_stream_max(const char *cmd, FILE *f, const char *path, size_t max, size_t *len);
/* "kara CMD: WHAT: larger than 67108864 bytes (64 MiB), the limit of a prompt text", errno = EFBIG. */
void kr_text_too_large(const char *cmd, const char *what);

/* Turn the escapes of a prompt typed with -e into characters, in place
 * (\n \t \r \\ \' \" \a \b \f \v and \xHH; \x00 is dropped). */
void kr_unescape(char *s);

#endif
