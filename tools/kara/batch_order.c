/* batch_order.c - result lines in finish order or in input order, with the
 * hold file that keeps --ordered's memory bounded (see batch_order.h). */
#include "batch_order.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "batch_jsonl.h"
#include "batch_output.h"
#include "exit_codes.h"
#include "safe_output.h"

bool kr_batch_order_init(kr_batch_order *o, kr_batch_output *out, bool ordered, int n, int mem_max) {
    memset(o, 0, sizeof *o);
    o->out = out;
    o->ordered = ordered;
    o->n = n;
    o->mem_max = mem_max;
    o->hold_fd = -1;
    o->slots = calloc((size_t)n + 1, sizeof *o->slots);
    size_t plen = strlen(out->path) + sizeof ".hold";
    o->hold_path = malloc(plen);
    if (!o->slots || !o->hold_path) return false;
    snprintf(o->hold_path, plen, "%s.hold", out->path);
    return true;
}

void kr_batch_order_done(kr_batch_order *o, int slot) { o->slots[slot].state = KR_HOLD_DONE; }

bool kr_batch_order_waiting(const kr_batch_order *o, int slot) { return o->slots[slot].state == KR_HOLD_WAIT; }

/* Append one line to the hold file (created on first use), durably: a
 * result set aside there must survive a crash to be worth keeping. */
static int hold_write(kr_batch_order *o, int slot, const char *line, size_t len) {
    if (o->hold_fd < 0) {
        char why[512];
        if (kr_out_check(o->hold_path, NULL, why, sizeof why) != 0) { /* as safe as the output */
            fprintf(stderr, "kara batch: %s\n", why);
            return EINVAL;
        }
        o->hold_fd = open(o->hold_path, O_RDWR | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0644);
        if (o->hold_fd < 0) return errno;
        o->hold_size = 0;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t k = write(o->hold_fd, line + done, len - done);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return errno;
        done += (size_t)k;
    }
    if (fdatasync(o->hold_fd) != 0 && errno != EINVAL) return errno;
    kr_batch_hold *h = &o->slots[slot];
    h->off = o->hold_size;
    h->len = len;
    h->state = KR_HOLD_FILE;
    o->hold_size += (long)len;
    o->hold_count++;
    return 0;
}

/* Write a slot held in the hold file to the output. Once nothing is held
 * there the file is emptied: what it still holds is all in the output. */
static int hold_flush_one(kr_batch_order *o, int slot) {
    kr_batch_hold *h = &o->slots[slot];
    char *buf = malloc(h->len ? h->len : 1);
    if (!buf) return ENOMEM;
    size_t got = 0;
    while (got < h->len) {
        ssize_t k = pread(o->hold_fd, buf + got, h->len - got, h->off + (off_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            free(buf);
            return k < 0 ? errno : EIO;
        }
        got += (size_t)k;
    }
    int e = kr_batch_output_append(o->out, buf, h->len);
    free(buf);
    if (e) return e;
    h->state = KR_HOLD_DONE;
    if (--o->hold_count == 0 && ftruncate(o->hold_fd, 0) == 0) o->hold_size = 0;
    return 0;
}

/* Ordered: write the head and every held result that follows it. */
static int flush(kr_batch_order *o) {
    while (o->head < o->n) {
        kr_batch_hold *h = &o->slots[o->head];
        int e = 0;
        if (h->state == KR_HOLD_WAIT) break;
        if (h->state == KR_HOLD_MEM) {
            e = kr_batch_output_append(o->out, h->mem, h->len);
            if (e) return e;
            free(h->mem);
            h->mem = NULL;
            o->mem_count--;
            o->mem_bytes -= h->len;
            h->state = KR_HOLD_DONE;
        } else if (h->state == KR_HOLD_FILE) {
            e = hold_flush_one(o, o->head);
            if (e) return e;
        }
        o->head++;
    }
    return 0;
}

int kr_batch_order_put(kr_batch_order *o, int slot, const char *line, size_t len) {
    kr_batch_hold *h = &o->slots[slot];
    if (!o->ordered || slot == o->head) {
        int e = kr_batch_output_append(o->out, line, len);
        if (e) return e;
        h->state = KR_HOLD_DONE;
        return o->ordered ? flush(o) : 0;
    }
    if (o->mem_count < o->mem_max && o->mem_bytes + len <= KR_BATCH_HOLD_BYTES) {
        h->mem = malloc(len);
        if (h->mem) {
            memcpy(h->mem, line, len);
            h->len = len;
            h->state = KR_HOLD_MEM;
            o->mem_count++;
            o->mem_bytes += len;
            return 0;
        }
    }
    return hold_write(o, slot, line, len);
}

int kr_batch_order_park(kr_batch_order *o) {
    for (int s = o->head; s < o->n && o->mem_count > 0; s++) {
        kr_batch_hold *h = &o->slots[s];
        if (h->state != KR_HOLD_MEM) continue;
        int e = hold_write(o, s, h->mem, h->len);
        if (e) return e;
        free(h->mem);
        h->mem = NULL;
        o->mem_count--;
        o->mem_bytes -= h->len;
    }
    return 0;
}

typedef struct recover_ctx {
    kr_batch_order *o;
    const char *data;
    int (*slot_of)(void *user, const kr_batch_scanned *r);
    void *user;
} recover_ctx;

/* One line of an old hold file: keep it when its request is this job's
 * and is not answered yet (the output wins over the hold file). */
static void on_hold_line(void *user, const kr_batch_scanned *r) {
    recover_ctx *c = user;
    kr_batch_order *o = c->o;
    int s = c->slot_of(c->user, r);
    if (s < 0 || s >= o->n || o->slots[s].state != KR_HOLD_WAIT) return;
    o->slots[s] = (kr_batch_hold){NULL, r->len, (long)(r->text - c->data), KR_HOLD_FILE};
    o->hold_count++;
    o->recovered++;
    if (r->failed) o->rec_failed++;
}

/* Read an old hold file into the slots; a file that is not ours is left
 * alone, one that is damaged before its last line is given up on (its
 * requests simply run again). */
static int recover(kr_batch_order *o, int (*slot_of)(void *, const kr_batch_scanned *), void *user) {
    o->hold_fd = open(o->hold_path, O_RDWR | O_APPEND | O_NONBLOCK | O_CLOEXEC);
    if (o->hold_fd < 0) {
        if (errno == ENOENT) return -1;
        fprintf(stderr, "kara batch: cannot open %s: %s\n", o->hold_path, strerror(errno));
        return KR_EXIT_IOERR;
    }
    char why[512];
    if (kr_out_check_fd(o->hold_fd, o->hold_path, why, sizeof why) != 0) { /* a FIFO, the input ... */
        fprintf(stderr, "kara batch: %s\n", why);
        return KR_EXIT_CANTCREAT;
    }
    size_t len = 0;
    bool added;
    char *data = kr_batch_read_results(o->hold_fd, &len, &added);
    if (!data) {
        fprintf(stderr, "kara batch: cannot read %s: %s\n", o->hold_path, strerror(errno));
        return KR_EXIT_IOERR;
    }
    recover_ctx c = {o, data, slot_of, user};
    char err[256];
    long keep = kr_batch_scan_results(data, len, on_hold_line, &c, err, sizeof err);
    free(data);
    if (keep < 0) {
        fprintf(stderr, "kara batch: %s: %s; its held results run again\n", o->hold_path, err);
        for (int s = 0; s < o->n; s++)
            if (o->slots[s].state == KR_HOLD_FILE) o->slots[s].state = KR_HOLD_WAIT;
        o->hold_count = o->recovered = o->rec_failed = 0;
        keep = 0;
    } else if ((size_t)keep < len) {
        o->hold_truncated = (long)len - keep;
    }
    if (o->hold_count == 0) keep = 0; /* nothing in it is needed */
    if ((size_t)keep < len && ftruncate(o->hold_fd, keep) != 0) {
        fprintf(stderr, "kara batch: cannot cut %s: %s\n", o->hold_path, strerror(errno));
        return KR_EXIT_IOERR;
    }
    o->hold_size = keep;
    return -1;
}

int kr_batch_order_open(kr_batch_order *o, bool resume, int (*slot_of)(void *user, const kr_batch_scanned *r),
                        void *user) {
    if (!resume) {
        if (unlink(o->hold_path) != 0 && errno != ENOENT) {
            fprintf(stderr, "kara batch: cannot remove %s: %s\n", o->hold_path, strerror(errno));
            return KR_EXIT_CANTCREAT;
        }
    } else {
        int rc = recover(o, slot_of, user);
        if (rc >= 0) return rc;
    }
    int e = 0;
    if (o->ordered) {
        e = flush(o);
    } else {
        for (int s = 0; s < o->n && !e; s++)
            if (o->slots[s].state == KR_HOLD_FILE) e = hold_flush_one(o, s);
    }
    if (e) {
        fprintf(stderr, "kara batch: cannot write %s: %s\n", o->out->path, strerror(e));
        return KR_EXIT_IOERR;
    }
    return -1;
}

void kr_batch_order_close(kr_batch_order *o) {
    if (o->slots)
        for (int s = 0; s < o->n; s++) free(o->slots[s].mem);
    free(o->slots);
    o->slots = NULL;
    if (o->hold_fd >= 0) {
        close(o->hold_fd);
        if (o->hold_count == 0) unlink(o->hold_path);
    }
    o->hold_fd = -1;
    free(o->hold_path);
    o->hold_path = NULL;
}
