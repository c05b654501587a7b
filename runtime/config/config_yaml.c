/* config_yaml.c - kara_config_load: a YAML file onto the key table, all or
 * nothing, with FILE:LINE:COL errors. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "config_impl.h"
#include "file_map.h"
#include "status.h"

/* Deepest nesting of sequences and mappings a configuration may have. */
#define KR_CONFIG_MAX_DEPTH 32

#define keys kr_config_table()
/* ------------------------------------------------------------------------ */
/* YAML                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct loader {
    kara_config *cfg;
    yaml_document_t *doc;
    const char *name;
    /* where each key of the schema was set in this file (key node marks;
     * line 0: not yet), so `a.b:` beside `a: {b:}` is caught as a duplicate */
    size_t set_line[KARA_CONFIG_MAX_KEYS], set_col[KARA_CONFIG_MAX_KEYS];
    char unknown[1024]; /* every unknown key's message, "; "-joined: reported together at the end */
    int n_unknown;
} loader;

static kara_status at_error(const loader *ld, yaml_mark_t m, const char *key, const char *msg) {
    if (key) return kr_set_error(KARA_ERR_CONFIG, "%s:%zu:%zu: %s: %s", ld->name, m.line + 1, m.column + 1, key, msg);
    return kr_set_error(KARA_ERR_CONFIG, "%s:%zu:%zu: %s", ld->name, m.line + 1, m.column + 1, msg);
}

/* "NAME:LINE:COL", shortening a long NAME from the left so the position
 * always fits. */
static void set_file_origin(const loader *ld, int i, yaml_mark_t m) {
    char pos[48];
    snprintf(pos, sizeof pos, ":%zu:%zu", m.line + 1, m.column + 1);
    size_t lp = strlen(pos), room = KARA_CONFIG_ORIGIN_MAX - 1 - lp, n = strlen(ld->name);
    char *o = ld->cfg->origin[i];
    if (n <= room) {
        memcpy(o, ld->name, n);
    } else {
        memcpy(o, "...", 3);
        memcpy(o + 3, ld->name + n - (room - 3), room - 3);
        n = room;
    }
    memcpy(o + n, pos, lp + 1);
}

static const char *node_kind(const yaml_node_t *n) {
    return n->type == YAML_MAPPING_NODE ? "a mapping" : n->type == YAML_SEQUENCE_NODE ? "a list" : "a value";
}

static const char *scalar_text(const yaml_node_t *n) { return (const char *)n->data.scalar.value; }

/* An empty plain scalar (`key:`), `~` or `null`: nothing given. Quoted
 * "" is a real empty string. */
static bool is_null_node(const yaml_node_t *n) {
    return n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        kr_config_is_null_text(scalar_text(n));
}

static kara_status apply_node(loader *ld, int ki, yaml_node_t *n) {
    const key_spec *k = &keys[ki];
    value v;
    char err[512];
    if (k->type == K_INT_LIST && n->type == YAML_SEQUENCE_NODE) {
        memset(&v, 0, sizeof v);
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
            yaml_node_t *e = yaml_document_get_node(ld->doc, *it);
            if (e->type != YAML_SCALAR_NODE) {
                snprintf(err, sizeof err, "expected an integer in the list, got %s", node_kind(e));
                return at_error(ld, e->start_mark, k->key, err);
            }
            if (!kr_config_parse_list_item(k, scalar_text(e), &v, err, sizeof err))
                return at_error(ld, e->start_mark, k->key, err);
        }
    } else if (n->type != YAML_SCALAR_NODE) {
        char want[300];
        kr_config_type_desc(k, want, sizeof want);
        snprintf(err, sizeof err, "expected %s, got %s", want, node_kind(n));
        return at_error(ld, n->start_mark, k->key, err);
    } else {
        const char *text = is_null_node(n) ? "" : scalar_text(n);
        if (!kr_config_parse_value(k, text, &v, err, sizeof err)) return at_error(ld, n->start_mark, k->key, err);
    }
    kr_config_store(k, ld->cfg, &v);
    set_file_origin(ld, ki, n->start_mark);
    return KARA_OK;
}

/* Walk one mapping whose keys extend `prefix` ("" at the top). */
static kara_status walk_mapping(loader *ld, yaml_node_t *map, const char *prefix) {
    yaml_node_pair_t *first = map->data.mapping.pairs.start;
    for (yaml_node_pair_t *pr = first; pr < map->data.mapping.pairs.top; pr++) {
        yaml_node_t *kn = yaml_document_get_node(ld->doc, pr->key);
        yaml_node_t *vn = yaml_document_get_node(ld->doc, pr->value);
        if (kn->type != YAML_SCALAR_NODE) return at_error(ld, kn->start_mark, NULL, "keys must be plain names");
        const char *name = scalar_text(kn);
        char path[256];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", name);
        for (yaml_node_pair_t *q = first; q < pr; q++) {
            yaml_node_t *qk = yaml_document_get_node(ld->doc, q->key);
            if (qk->type == YAML_SCALAR_NODE && !strcmp(scalar_text(qk), name)) {
                char msg[400];
                snprintf(msg, sizeof msg, "duplicate key '%s' (first given at line %zu, column %zu)", path,
                         qk->start_mark.line + 1, qk->start_mark.column + 1);
                return at_error(ld, kn->start_mark, NULL, msg);
            }
        }
        int ki = kr_config_find_key(path);
        kara_status st;
        if (ki >= 0 && ld->set_line[ki]) {
            char msg[400];
            snprintf(msg, sizeof msg,
                     "duplicate key '%s' (first given at line %zu, column %zu: a dotted key and its nested form are "
                     "the same key)",
                     path, ld->set_line[ki], ld->set_col[ki]);
            return at_error(ld, kn->start_mark, NULL, msg);
        }
        if (ki >= 0) {
            ld->set_line[ki] = kn->start_mark.line + 1;
            ld->set_col[ki] = kn->start_mark.column + 1;
            st = apply_node(ld, ki, vn);
        } else if (kr_config_is_section(path)) {
            if (vn->type == YAML_MAPPING_NODE)
                st = walk_mapping(ld, vn, path);
            else if (is_null_node(vn))
                st = KARA_OK; /* a section with every key commented out */
            else {
                char msg[400];
                snprintf(msg, sizeof msg, "'%s' is a section and needs keys below it, got %s", path, node_kind(vn));
                st = at_error(ld, vn->start_mark, NULL, msg);
            }
        } else { /* noted, and the walk goes on: a file with several typos hears of all of them at once */
            char hint[160];
            kr_config_suggest(path, hint, sizeof hint);
            size_t used = strlen(ld->unknown);
            snprintf(ld->unknown + used, sizeof ld->unknown - used, "%s%s:%zu:%zu: unknown key '%s'%s",
                     ld->n_unknown ? "; " : "", ld->name, kn->start_mark.line + 1, kn->start_mark.column + 1, path,
                     hint);
            ld->n_unknown++;
            st = KARA_OK;
        }
        if (st != KARA_OK) return st;
    }
    return KARA_OK;
}

/* Refuse nesting deeper than KR_CONFIG_MAX_DEPTH before libyaml builds a
 * document: its work grows with the square of the depth (a 4 MiB file of
 * "[[[..." took hours), while the deepest key of a configuration is 3 levels
 * down. Streams events and stops at the first one too deep, so the check
 * costs little on any input. Syntax errors are left to the loader. */
static kara_status check_depth(const char *name, const char *text, size_t n) {
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return kr_set_error(KARA_ERR_NOMEM, "%s: out of memory", name);
    yaml_parser_set_input_string(&p, (const unsigned char *)text, n);
    kara_status st = KARA_OK;
    int depth = 0;
    for (;;) {
        yaml_event_t e;
        if (!yaml_parser_parse(&p, &e)) {
            /* out of memory is reported, not left to the loader with the depth unchecked (issue 19) */
            if (p.error == YAML_MEMORY_ERROR) st = kr_set_error(KARA_ERR_NOMEM, "%s: out of memory reading YAML", name);
            break;
        }
        yaml_event_type_t t = e.type;
        if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
            if (++depth > KR_CONFIG_MAX_DEPTH)
                st =
                    kr_set_error(KARA_ERR_CONFIG, "%s:%zu:%zu: nesting deeper than %d levels (a configuration needs 3)",
                                 name, e.start_mark.line + 1, e.start_mark.column + 1, KR_CONFIG_MAX_DEPTH);
        } else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) {
            depth--;
        }
        yaml_event_delete(&e);
        if (st || t == YAML_STREAM_END_EVENT) break;
    }
    yaml_parser_delete(&p);
    return st;
}

/* libyaml marks scanner and parser errors with a position; reader errors
 * (bad encoding) only with a byte offset, turned into line:column here. */
static kara_status syntax_error(const loader *ld, const yaml_parser_t *p, const char *text, size_t len) {
    char msg[400];
    if (p->error == YAML_MEMORY_ERROR) return kr_set_error(KARA_ERR_NOMEM, "%s: out of memory reading YAML", ld->name);
    yaml_mark_t m = p->problem_mark;
    if (p->error == YAML_READER_ERROR) {
        m.line = m.column = 0;
        for (size_t i = 0; i < p->problem_offset && i < len; i++) {
            if (text[i] == '\n')
                m.line++, m.column = 0;
            else
                m.column++;
        }
    }
    snprintf(msg, sizeof msg, "invalid YAML: %s%s%s", p->problem ? p->problem : "syntax error", p->context ? " " : "",
             p->context ? p->context : "");
    return at_error(ld, m, NULL, msg);
}

kara_status kara_config_load_text(kara_config *c, const char *text, long len, const char *name) {
    if (!c || !text) return kr_set_error(KARA_ERR_ARG, "kara_config_load_text: NULL argument");
    if (!name) name = "<config>";
    size_t n = len < 0 ? strlen(text) : (size_t)len;
    kara_status dst = check_depth(name, text, n);
    if (dst) return dst;
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) return kr_set_error(KARA_ERR_NOMEM, "%s: out of memory", name);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, n);

    /* Work on a copy: a file with an error anywhere changes nothing. */
    kara_config *work = malloc(sizeof *work);
    if (!work) {
        yaml_parser_delete(&parser);
        return kr_set_error(KARA_ERR_NOMEM, "%s: out of memory", name);
    }
    *work = *c;
    loader ld = {.cfg = work, .doc = NULL, .name = name};
    yaml_document_t doc;
    kara_status st = KARA_OK;
    if (!yaml_parser_load(&parser, &doc)) {
        st = syntax_error(&ld, &parser, text, n);
    } else {
        ld.doc = &doc;
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        if (!root || is_null_node(root))
            st = KARA_OK; /* empty file: nothing to change */
        else if (root->type != YAML_MAPPING_NODE)
            st = at_error(&ld, root->start_mark, NULL,
                          "the top level must be a mapping of sections (model:, sampling:, ...)");
        else
            st = walk_mapping(&ld, root, "");
        if (st == KARA_OK && ld.n_unknown) st = kr_set_error(KARA_ERR_CONFIG, "%s", ld.unknown);
        if (st == KARA_OK) {
            /* A second document ("---") would be silently ignored: refuse it. */
            yaml_document_t next;
            if (!yaml_parser_load(&parser, &next)) {
                st = syntax_error(&ld, &parser, text, n);
            } else {
                yaml_node_t *r2 = yaml_document_get_root_node(&next);
                if (r2) st = at_error(&ld, r2->start_mark, NULL, "only one YAML document is allowed");
                yaml_document_delete(&next);
            }
        }
        yaml_document_delete(&doc);
    }
    yaml_parser_delete(&parser);
    if (st == KARA_OK) *c = *work;
    free(work);
    return st;
}

kara_status kara_config_load(kara_config *c, const char *path) {
    if (!c || !path) return kr_set_error(KARA_ERR_ARG, "kara_config_load: NULL argument");
    int err = 0;
    FILE *f = kr_file_open_regular(path, &err);
    if (!f) return kr_set_error(KARA_ERR_IO, "%s: cannot open config: %s", path, kr_file_error_str(err));
    enum { MAX_CONFIG = 4 << 20 };
    char *buf = malloc(MAX_CONFIG + 1);
    if (!buf) {
        fclose(f);
        return kr_set_error(KARA_ERR_NOMEM, "%s: out of memory", path);
    }
    size_t n = fread(buf, 1, MAX_CONFIG + 1, f);
    bool bad = ferror(f);
    fclose(f);
    kara_status st;
    if (bad)
        st = kr_set_error(KARA_ERR_IO, "%s: read error", path);
    else if (n > MAX_CONFIG)
        st = kr_set_error(KARA_ERR_CONFIG, "%s: larger than %d bytes; not a config file", path, MAX_CONFIG);
    else
        st = kara_config_load_text(c, buf, (long)n, path);
    free(buf);
    return st;
}
