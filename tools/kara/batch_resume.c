/* batch_resume.c - resume checks of `kara batch`: answered, changed and
 * old-format results, and the --on-changed policy (see batch_resume.h). */
#include "batch_resume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exit_codes.h"

enum { ST_TODO = 0, ST_ANSWERED, ST_CHANGED, ST_MOVED, ST_RETRY };

int kr_batch_slot_of(const kr_batch_slots *s, const char *custom_id, int line) {
    int slot;
    if (custom_id) return kr_strset_get(s->ids, custom_id, &slot) ? slot : -1;
    int lo = 0, hi = s->n_shard - 1; /* shard is in input order */
    while (lo <= hi) {
        int mid = (lo + hi) / 2, no = s->in->lines[s->shard[mid]].no;
        if (no == line) return s->in->lines[s->shard[mid]].custom_id ? -1 : mid;
        if (no < line)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* The slot of input line `line` whatever its custom_id, -1 if none. */
static int slot_of_line(const kr_batch_slots *s, int line) {
    int lo = 0, hi = s->n_shard - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, no = s->in->lines[s->shard[mid]].no;
        if (no == line) return mid;
        if (no < line)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Does the hash a line carries name the slot's request as it is now (or
 * in the raw-bytes form of older versions)? */
static bool same_request(const kr_batch_slots *s, int slot, uint64_t h) {
    return h == s->hash[slot] || h == s->raw_hash[slot];
}

/* How a request is named in messages: "custom_id" or input line N. */
static void name_slot(const kr_batch_slots *s, int slot, char *buf, size_t size) {
    const kr_batch_line *l = &s->in->lines[s->shard[slot]];
    if (l->custom_id)
        snprintf(buf, size, "\"%.60s\" (line %d)", l->custom_id, l->no);
    else
        snprintf(buf, size, "input line %d", l->no);
}

/* Print the refusal: the changed requests (the first 10) and the flags
 * that go on. */
static void refuse_message(const kr_batch_slots *s, const unsigned char *st, int n, const char *where) {
    fprintf(stderr, "kara batch: %d request%s changed since %s answered %s:", n, n == 1 ? "" : "s", where,
            n == 1 ? "it" : "them");
    int shown = 0;
    for (int i = 0; i < s->n_shard && shown < 10; i++)
        if (st[i] == ST_CHANGED) {
            char name[96];
            name_slot(s, i, name, sizeof name);
            fprintf(stderr, "%s %s", shown ? "," : "", name);
            shown++;
        }
    fprintf(stderr,
            "%s\nkara batch: nothing was run (--on-changed refuse); --on-changed rerun runs them again (their old "
            "answers move to OUTPUT.superseded), --on-changed keep keeps the old answers\n",
            n > shown ? ", ..." : "");
}

typedef struct classify_ctx {
    const kr_batch_slots *slots;
    unsigned char *st;
    int first_changed; /* slot */
    bool ordered, drop_all;
} classify_ctx;

/* A line of the output during the rewrite: the answers of changed
 * requests and retried error lines go (all lines with drop_all), as does
 * the error line of an input line that did not parse and now has a
 * custom_id; with --ordered the answers after the first of them in input
 * order step aside to the hold file, so the output stays a prefix. */
static int classify(void *user, const kr_batch_scanned *r) {
    classify_ctx *c = user;
    if (c->drop_all) return KR_REWRITE_DROP;
    if (!r->custom_id) {
        int at = slot_of_line(c->slots, r->input_line);
        if (at >= 0 && c->slots->in->lines[c->slots->shard[at]].custom_id) return KR_REWRITE_DROP;
    }
    int slot = kr_batch_slot_of(c->slots, r->custom_id, r->input_line);
    if (slot < 0) return KR_REWRITE_KEEP;
    if (c->st[slot] == ST_CHANGED || c->st[slot] == ST_RETRY) return KR_REWRITE_DROP;
    if (c->ordered && slot > c->first_changed && (c->st[slot] == ST_ANSWERED || c->st[slot] == ST_MOVED)) {
        c->st[slot] = ST_MOVED;
        return KR_REWRITE_HOLD;
    }
    return KR_REWRITE_KEEP;
}

int kr_batch_resume_scan(kr_batch_resume *r, kr_batch_output *out, kr_batch_order *ord) {
    const kr_batch_slots *s = r->slots;
    unsigned char *st = calloc((size_t)s->n_shard + 1, 1);
    if (!st) return KR_EXIT_SOFTWARE;
    int first_changed = -1;
    for (int i = 0; i < s->n_shard; i++) {
        const kr_batch_line *l = &s->in->lines[s->shard[i]];
        /* the error line of this input line from when it did not parse */
        if (l->custom_id && kr_batch_output_lookup(out, NULL, l->no)) {
            r->fixed++;
            if (first_changed < 0) first_changed = i;
        }
        const kr_batch_answer *a = kr_batch_output_lookup(out, l->custom_id, l->no);
        if (!a) continue;
        st[i] = ST_ANSWERED;
        if (r->drop_all) {
            st[i] = ST_CHANGED;
            r->dropped++;
        } else if (!a->has_hash) {
            r->legacy++;
        } else if (!same_request(s, i, a->hash)) {
            r->changed++;
            if (r->policy != KR_ON_CHANGED_KEEP) st[i] = ST_CHANGED;
        } else if (a->limit && r->limits_changed) {
            st[i] = ST_RETRY;
            r->limits++;
        }
        if (st[i] != ST_ANSWERED && first_changed < 0) first_changed = i;
    }
    int rc = -1;
    bool rewrite = r->fixed || r->limits || out->n_dup || (r->drop_all && out->n_ok + out->n_failed) ||
        (r->changed && r->policy == KR_ON_CHANGED_RERUN);
    if (r->changed && r->policy == KR_ON_CHANGED_REFUSE) {
        refuse_message(s, st, r->changed, out->path);
        rc = KR_EXIT_DATAERR;
    } else if (rewrite) {
        classify_ctx c = {s, st, first_changed < 0 ? s->n_shard : first_changed, ord->ordered, r->drop_all};
        int e = kr_batch_output_rewrite(out, classify, &c, ord->hold_path, &r->superseded, &r->moved);
        if (e) {
            fprintf(stderr, "kara batch: cannot take superseded answers out of %s: %s\n", out->path, strerror(e));
            rc = KR_EXIT_IOERR;
        }
    }
    for (int i = 0; i < s->n_shard && rc < 0; i++)
        if (st[i] == ST_ANSWERED) {
            kr_batch_order_done(ord, i);
            r->answered++;
        }
    free(st);
    return rc;
}

/* Is a held result for another version of its request than the input's? */
static bool stale(const kr_batch_resume *r, int slot, const kr_batch_scanned *h) {
    return slot >= 0 && h->has_hash && !same_request(r->slots, slot, h->hash);
}

int kr_batch_resume_hold_slot(void *user, const kr_batch_scanned *h) {
    kr_batch_resume *r = user;
    int slot = kr_batch_slot_of(r->slots, h->custom_id, h->input_line);
    if (slot < 0 || !kr_batch_order_waiting(r->ord, slot)) return slot;
    bool limit =
        h->failed && h->code && (!strcmp(h->code, KR_BATCH_ERR_BUDGET) || !strcmp(h->code, KR_BATCH_ERR_CONTEXT));
    if (r->drop_all) {
        r->hold_stale++;
        return -1;
    }
    if (r->policy != KR_ON_CHANGED_KEEP && stale(r, slot, h)) {
        r->hold_stale++;
        return -1; /* it runs again */
    }
    if (limit && r->limits_changed && !stale(r, slot, h)) {
        r->hold_stale++;
        return -1;
    }
    return slot;
}

typedef struct hold_scan {
    kr_batch_resume *r;
    const kr_batch_order *ord;
    unsigned char *st;
    int n;
} hold_scan;

static void on_hold(void *user, const kr_batch_scanned *h) {
    hold_scan *c = user;
    int slot = kr_batch_slot_of(c->r->slots, h->custom_id, h->input_line);
    if (stale(c->r, slot, h) && kr_batch_order_waiting(c->ord, slot) && c->st[slot] != ST_CHANGED) {
        c->st[slot] = ST_CHANGED;
        c->n++;
    }
}

int kr_batch_resume_hold_check(kr_batch_resume *r, const kr_batch_order *ord) {
    if (r->policy != KR_ON_CHANGED_REFUSE) return -1;
    FILE *f = fopen(ord->hold_path, "rb");
    if (!f) return -1; /* none: nothing held */
    kr_jbuf b = {0};
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) kr_jbuf_raw(&b, chunk, k);
    fclose(f);
    hold_scan c = {r, ord, calloc((size_t)r->slots->n_shard + 1, 1), 0};
    char err[256];
    if (c.st && !b.failed) kr_batch_scan_results(b.p ? b.p : "", b.len, on_hold, &c, err, sizeof err);
    int rc = -1;
    if (c.n) {
        refuse_message(r->slots, c.st, c.n, ord->hold_path);
        rc = KR_EXIT_DATAERR;
    }
    free(c.st);
    kr_jbuf_free(&b);
    return rc;
}

void kr_batch_resume_report(const kr_batch_resume *r, const char *out_path, const char *hold_path) {
    if (r->fixed || r->limits)
        fprintf(stderr,
                "kara batch: retrying %d error line%s (%d of input lines that now parse, %d of limits that "
                "changed); the old line%s moved to %s.superseded\n",
                r->fixed + r->limits, r->fixed + r->limits == 1 ? "" : "s", r->fixed, r->limits,
                r->fixed + r->limits == 1 ? "" : "s", out_path);
    if (r->dropped)
        fprintf(stderr, "kara batch: %d answer%s superseded (settings changed, --on-changed rerun)\n", r->dropped,
                r->dropped == 1 ? "" : "s");
    if (r->changed && r->policy == KR_ON_CHANGED_RERUN)
        fprintf(stderr,
                "kara batch: %d request%s changed since %s answered %s: the old answer%s moved to "
                "%s.superseded and %s again (--on-changed)\n",
                r->changed, r->changed == 1 ? "" : "s", out_path, r->changed == 1 ? "it" : "them",
                r->changed == 1 ? "" : "s", out_path, r->changed == 1 ? "it runs" : "they run");
    if (r->changed && r->policy == KR_ON_CHANGED_KEEP)
        fprintf(stderr,
                "kara batch: %d request%s changed since %s answered %s; the old answer%s kept (--on-changed keep)\n",
                r->changed, r->changed == 1 ? "" : "s", out_path, r->changed == 1 ? "it" : "them",
                r->changed == 1 ? " is" : "s are");
    if (r->moved)
        fprintf(stderr, "kara batch: --ordered: %d later answer%s moved to %s to keep the input order\n", r->moved,
                r->moved == 1 ? "" : "s", hold_path);
    if (r->hold_stale)
        fprintf(stderr,
                "kara batch: %d held answer%s in %s for an older version of %s request, settings or limits: run "
                "again\n",
                r->hold_stale, r->hold_stale == 1 ? "" : "s", hold_path, r->hold_stale == 1 ? "its" : "their");
    if (r->legacy)
        fprintf(stderr,
                "kara batch: note: %d answer%s in %s carr%s no request hash (written by an older kara): trusted "
                "as answered without checking the request\n",
                r->legacy, r->legacy == 1 ? "" : "s", out_path, r->legacy == 1 ? "ies" : "y");
}

void kr_batch_resume_errors(const kr_batch_slots *s, const kr_batch_output *out, int failed_new, int failed_old) {
    int n = failed_new + failed_old, shown = 0;
    if (!n) return;
    fprintf(stderr, "kara batch: %s holds %d error line%s: %d written this run, %d from earlier runs", out->path, n,
            n == 1 ? "" : "s", failed_new, failed_old);
    for (int i = 0; i < s->n_shard && shown < 5; i++) {
        const kr_batch_line *l = &s->in->lines[s->shard[i]];
        const kr_batch_answer *a = kr_batch_output_lookup(out, l->custom_id, l->no);
        if (!a || !a->failed) continue; /* the index holds the lines from before this run */
        char name[96];
        name_slot(s, i, name, sizeof name);
        fprintf(stderr, "%s%s", shown ? ", " : " (", name);
        shown++;
    }
    fprintf(stderr, "%s\n", shown && shown < failed_old ? ", ...)" : shown ? ")" : "");
}
