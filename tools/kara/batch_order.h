/* batch_order.h - where the result lines of `kara batch` go: straight to
 * the output as requests finish (the default), or, with --ordered, in input
 * order.
 *
 * Ordered: each request of the shard has a slot (its rank in the shard's
 * input order) and the output always holds a prefix of the slots. A result
 * that finishes ahead of the next slot still running is held: in memory up
 * to mem_max lines (and KR_BATCH_HOLD_BYTES bytes), beyond that appended to
 * a hold file next to the output (OUTPUT.hold, one result line each, made
 * durable like the output), so a long request at the head costs disk, not
 * memory. When the head finishes, it and every held result after it are
 * written. On SIGINT/SIGTERM/SIGHUP the results held in memory are moved to
 * the hold file; after SIGKILL they are lost and run again.
 *
 * Resume: the output answers some slots (a prefix when every run was
 * ordered); the hold file, if any, answers others: they are taken back
 * instead of being run again, and a hold line whose request is already in
 * the output is ignored, so every request is answered exactly once. A run
 * that is not ordered writes what a hold file answers straight to the
 * output. The hold file is emptied whenever nothing is held in it, and
 * removed when the job closes with nothing held. */
#ifndef KR_BATCH_ORDER_H
#define KR_BATCH_ORDER_H

#include <stdbool.h>
#include <stddef.h>

#include "batch_output.h"

#define KR_BATCH_HOLD_BYTES ((size_t)64 << 20) /* most bytes held in memory */

typedef struct kr_batch_hold {
    char *mem;           /* the line, held in memory; NULL otherwise */
    size_t len;          /* of the held line, '\n' included */
    long off;            /* in the hold file, when held there */
    unsigned char state; /* KR_HOLD_* */
} kr_batch_hold;

enum { KR_HOLD_WAIT = 0, KR_HOLD_MEM, KR_HOLD_FILE, KR_HOLD_DONE };

typedef struct kr_batch_order {
    kr_batch_output *out;
    bool ordered;
    int n, head;          /* slots; the first one not yet in the output */
    kr_batch_hold *slots; /* n */
    int mem_count, mem_max;
    size_t mem_bytes;
    char *hold_path; /* OUTPUT.hold */
    int hold_fd;     /* -1 until needed */
    long hold_size;
    int hold_count;            /* slots held in the file */
    int recovered, rec_failed; /* slots a hold file answered when opening (error lines among them) */
    long hold_truncated;       /* bytes of a torn last hold line cut off */
} kr_batch_order;

/* For n slots; mem_max lines held in memory at most (0: everything ahead
 * of the head goes to the hold file). Returns false when out of memory. */
bool kr_batch_order_init(kr_batch_order *o, kr_batch_output *out, bool ordered, int n, int mem_max);
/* The slot's request is already answered in the output. */
void kr_batch_order_done(kr_batch_order *o, int slot);
/* Take back the results of the hold file (resume), or remove it (no
 * resume). slot_of maps a held result (its custom_id, NULL: none, input
 * line and request hash) to its slot, -1 when it is not one of this job's
 * or answers an older version of the request. Then writes everything that
 * can be written. Returns -1, or an exit code after printing the problem. */
int kr_batch_order_open(kr_batch_order *o, bool resume, int (*slot_of)(void *user, const kr_batch_scanned *r),
                        void *user);
/* Does the slot's request still have to run? */
bool kr_batch_order_waiting(const kr_batch_order *o, int slot);
/* The result line (with its '\n') of a slot: written now, or held. 0 or
 * an errno value. */
int kr_batch_order_put(kr_batch_order *o, int slot, const char *line, size_t len);
/* Move what is held in memory to the hold file, so a rerun keeps it. */
int kr_batch_order_park(kr_batch_order *o);
/* Free everything; removes the hold file when nothing is held in it. */
void kr_batch_order_close(kr_batch_order *o);

#endif
