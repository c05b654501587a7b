/* safe_output.h - every file the `kara` command writes goes through here, so
 * that a file the project writes is the project's, or it is not touched
 * (docs/RELIABILITY.md, "Files the CLI writes"):
 *
 *  - what is at the path must be absent or a regular file: a directory,
 *    FIFO, device or socket is refused (writing would block, fill a disk
 *    through /dev/zero's inode, or replace a node with a file);
 *  - a symlink is resolved and its target is what gets checked and
 *    replaced: the new file is written beside the target and renamed over
 *    it, so the link stays and points at the new content. Why not refuse:
 *    an output reached through a link (a results folder shared between
 *    machines) is a normal setup, and the appends of `kara batch` already
 *    go through the link, so a rewrite must land where they did;
 *  - the file may not be an input of the run (the model, the draft model,
 *    a prompt file, the batch input, a config file), compared by device and
 *    inode, so no spelling, symlink or hard link gets around it;
 *  - with a magic given (the prompt cache), an existing file must start
 *    with it: only a file of that kind is replaced;
 *  - the temporary file is created exclusively (O_CREAT|O_EXCL) beside the
 *    target under a name no other file has, so a stale or planted PATH.tmp
 *    is never truncated; every write, the fsync and the close are checked
 *    and the rename is atomic: a kill at any moment leaves the old file or
 *    the new one (and at worst a PATH.tmp.PID.N of ours beside it).
 *
 * The checks guard against mistakes, not against someone who can change the
 * folder between the check and the rename.
 *
 * stdout: kr_stdout_flush records the first failed write, and
 * kr_stdout_finish (called by main for every command) turns a failed stdout
 * into exit 74 with "kara CMD: cannot write stdout: REASON". */
#ifndef KR_SAFE_OUTPUT_H
#define KR_SAFE_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* Remember path (if it exists) as an input of this run, described by what
 * ("the model (-m)"): no output may be the same file. */
void kr_out_add_input(const char *path, const char *what);

/* May path be written (created, replaced or appended to)? 0 when it may;
 * else an errno value, with the reason in why ("'x' is a FIFO, not a regular
 * file"). magic: when not NULL, an existing file must start with these
 * bytes. */
int kr_out_check(const char *path, const char *magic, char *why, size_t why_size);
/* The same check on a descriptor just opened on path (closes the window
 * between kr_out_check and the open): a regular file, not an input. */
int kr_out_check_fd(int fd, const char *path, char *why, size_t why_size);

/* A file written whole and then put in place atomically. */
typedef struct kr_out_file {
    char *target; /* the file replaced: path, or the file its symlink names */
    char *tmp;    /* the temporary beside it, ours alone */
    int fd;       /* open on tmp; kr_out_commit keeps it open unless f is used */
    FILE *f;      /* from kr_out_stream, else NULL */
    char why[512];
} kr_out_file;

/* Check path (kr_out_check with magic) and create the temporary file.
 * 0, or an errno value with the reason in o->why. */
int kr_out_begin(kr_out_file *o, const char *path, const char *magic);
/* A stdio stream on the temporary file (NULL, with o->why, on failure). */
FILE *kr_out_stream(kr_out_file *o);
/* Write len bytes (no stdio); 0 or an errno value. */
int kr_out_write(kr_out_file *o, const void *buf, size_t len);
/* Flush, fsync and rename the temporary file over the target, and fsync
 * the folder. A stream is closed; a bare descriptor stays open in o->fd
 * (take it by setting o->fd = -1, else kr_out_discard closes it). 0, or an
 * errno value with o->why set; on failure the temporary file is removed and
 * the target is untouched. */
int kr_out_commit(kr_out_file *o);
/* Release o: close what is open, remove the temporary file unless it was
 * committed, free the names. Call it after kr_out_commit too. */
void kr_out_discard(kr_out_file *o);

/* The stdio way to write a whole file with kr_out_begin (no magic): a
 * stream on the temporary file, NULL after printing "kara CMD: REASON". */
FILE *kr_out_fopen(kr_out_file *o, const char *cmd, const char *path);
/* Commit and release a kr_out_fopen file: 0, or 74 after printing
 * "kara CMD: cannot write 'PATH': REASON" (the target is then untouched). */
int kr_out_fclose(kr_out_file *o, const char *cmd);
/* The same, with fn writing the content: 0, or after printing the reason 73
 * (the path is refused or cannot be created) or 74 (a write failed). */
int kr_out_write_file(const char *cmd, const char *path, void (*fn)(FILE *f, void *user), void *user);

/* fflush(stdout), remembering the first failure; false when stdout has
 * failed (now or before). */
bool kr_stdout_flush(void);
/* At the end of a command: flush stdout; when any write to it failed,
 * print "kara CMD: cannot write stdout: REASON" and return 74 (where rc
 * was 0 or 1; another failure keeps its code). Else rc. */
int kr_stdout_finish(const char *cmd, int rc);

#endif
