/* eval_tasks.c - reading `kara eval` problems and judging answers. */
#include "eval_tasks.h"
#include "safe_output.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static char *dup_json_text(const kr_json *v) {
    char buf[64];
    const char *s = NULL;
    if (v && v->type == KR_JSON_STRING) {
        s = v->str;
    } else if (v && v->type == KR_JSON_NUMBER) {
        if (v->integer)
            snprintf(buf, sizeof buf, "%.0f", v->number);
        else
            snprintf(buf, sizeof buf, "%.17g", v->number);
        s = buf;
    }
    return s ? strdup(s) : NULL;
}

static bool add_task(kr_eval_tasks *t, int *cap, const kr_json *root, const char *where) {
    const kr_json *prompt = kr_json_get(root, "prompt");
    if (!prompt) prompt = kr_json_get(root, "problem");
    const kr_json *answer = kr_json_get(root, "answer");
    const kr_json *id = kr_json_get(root, "id");
    if (!prompt || prompt->type != KR_JSON_STRING) {
        fprintf(stderr, "kara eval: %s: needs a string \"prompt\" (or \"problem\")\n", where);
        return false;
    }
    if (!answer || (answer->type != KR_JSON_STRING && answer->type != KR_JSON_NUMBER)) {
        fprintf(stderr, "kara eval: %s: needs an \"answer\" (string or number)\n", where);
        return false;
    }
    if (t->n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        kr_eval_task *items = realloc(t->items, (size_t)*cap * sizeof *items);
        if (!items) return false;
        t->items = items;
    }
    kr_eval_task *task = &t->items[t->n];
    memset(task, 0, sizeof *task);
    task->prompt = strdup(prompt->str);
    task->answer = dup_json_text(answer);
    task->id = id ? dup_json_text(id) : strdup(where);
    const kr_json *think = kr_json_get(root, "think_tokens");
    if (think && think->type == KR_JSON_NUMBER && think->number > 0 && think->number < 1e8)
        task->think_tokens = (int32_t)think->number;
    snprintf(task->where, sizeof task->where, "%s", where);
    if (!task->prompt || !task->answer || !task->id) return false;
    t->n++;
    return true;
}

bool kr_eval_tasks_load(kr_eval_tasks *t, const char *const *files, int n_files, int limit) {
    memset(t, 0, sizeof *t);
    int cap = 0;
    for (int f = 0; f < n_files; f++) {
        FILE *fp = fopen(files[f], "r");
        if (!fp) {
            fprintf(stderr, "kara eval: cannot open '%s': %s\n", files[f], strerror(errno));
            kr_eval_tasks_free(t);
            return false;
        }
        kr_out_add_input(files[f], "the tasks file (--tasks)");
        char *line = NULL;
        size_t lcap = 0;
        ssize_t len;
        int lineno = 0, taken = 0;
        bool ok = true;
        while (ok && (limit <= 0 || taken < limit) && (len = getline(&line, &lcap, fp)) >= 0) {
            lineno++;
            while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
            size_t i = 0;
            while (i < (size_t)len && isspace((unsigned char)line[i])) i++;
            if (i == (size_t)len) continue; /* blank line */
            char where[160], err[200];
            snprintf(where, sizeof where, "%s:%d", files[f], lineno);
            kr_json_doc doc;
            if (!kr_json_parse(line, (size_t)len, lineno, &doc, err, sizeof err)) {
                fprintf(stderr, "kara eval: %s: %s\n", files[f], err);
                ok = false;
            } else if (!doc.root || doc.root->type != KR_JSON_OBJECT) {
                fprintf(stderr, "kara eval: %s: a line must be a JSON object\n", where);
                ok = false;
            } else {
                ok = add_task(t, &cap, doc.root, where);
                taken++;
            }
            kr_json_doc_free(&doc);
        }
        free(line);
        fclose(fp);
        if (!ok) {
            kr_eval_tasks_free(t);
            return false;
        }
    }
    if (!t->n) fprintf(stderr, "kara eval: no problems in the task files\n");
    return t->n > 0;
}

void kr_eval_tasks_free(kr_eval_tasks *t) {
    for (int i = 0; i < t->n; i++) {
        free(t->items[i].id);
        free(t->items[i].prompt);
        free(t->items[i].answer);
    }
    free(t->items);
    memset(t, 0, sizeof *t);
}

static void trim_into(const char *s, size_t n, char *out, size_t size) {
    while (n && isspace((unsigned char)*s)) s++, n--;
    while (n && (isspace((unsigned char)s[n - 1]) || s[n - 1] == '.')) n--;
    if (n >= size) n = size - 1;
    memcpy(out, s, n);
    out[n] = 0;
}

void kr_eval_extract_answer(const char *text, char *out, size_t size) {
    const char *box = NULL;
    for (const char *p = strstr(text, "\\boxed{"); p; p = strstr(p + 1, "\\boxed{")) box = p;
    if (!box) {
        trim_into(text, strlen(text), out, size);
        return;
    }
    const char *start = box + 7, *p = start;
    int depth = 1;
    while (*p && depth) {
        depth += *p == '{';
        depth -= *p == '}';
        if (depth) p++;
    }
    trim_into(start, (size_t)(p - start), out, size);
}

static bool as_number(const char *s, double *v) {
    char clean[128];
    size_t n = 0;
    for (; *s && n + 1 < sizeof clean; s++)
        if (*s != ',' && *s != ' ') clean[n++] = *s; /* "12,430" and "12 430" are numbers too */
    clean[n] = 0;
    char *end;
    errno = 0;
    *v = strtod(clean, &end);
    return n && !*end && !errno;
}

bool kr_eval_answer_matches(const char *generated, const char *reference) {
    char got[256], want[256];
    kr_eval_extract_answer(generated, got, sizeof got);
    kr_eval_extract_answer(reference, want, sizeof want);
    double a, b;
    if (as_number(got, &a) && as_number(want, &b)) return a == b;
    return strcmp(got, want) == 0;
}
