/* batch_input.h - the requests file of `kara batch`, read whole: its lines
 * (numbered from 1, a trailing \r dropped) and each line's custom_id, with
 * duplicate custom_ids refused before any work is done. */
#ifndef KR_BATCH_INPUT_H
#define KR_BATCH_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kr_batch_line {
    size_t off, len;
    int no;          /* 1-based */
    char *custom_id; /* copy, NULL when it cannot be read (the line becomes an error line) */
    size_t too_long; /* a line over KR_BATCH_LINE_MAX: its true length (len is what was kept); else 0 */
} kr_batch_line;

typedef struct kr_batch_long {
    int no;
    size_t len;
} kr_batch_long;

typedef struct kr_batch_input {
    char *data;
    size_t size;
    kr_batch_line *lines;
    int n_lines;
} kr_batch_input;

/* Read path and index it (a line over KR_BATCH_LINE_MAX is kept cut, to be
 * refused as an error line, with a note on stderr). Returns -1 on success, else an exit code after
 * printing the problem to stderr: 66 when the file cannot be opened, 74 on
 * a read error, 65 (with every duplicate named "FILE:LINE") when two lines
 * share a custom_id. */
int kr_batch_input_load(kr_batch_input *in, const char *path);
void kr_batch_input_free(kr_batch_input *in);
/* Only white space: not a request. */
bool kr_batch_line_blank(const kr_batch_input *in, const kr_batch_line *l);
/* The request hash of a line (kr_batch_request_hash; a cut line's true length is mixed in). */
uint64_t kr_batch_line_hash(const kr_batch_input *in, const kr_batch_line *l);
/* The same with the raw-bytes hash of older versions (kr_batch_request_hash_raw). */
uint64_t kr_batch_line_hash_raw(const kr_batch_input *in, const kr_batch_line *l);

#endif
