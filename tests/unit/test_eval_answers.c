/* test_eval_answers.c - how `kara eval` reads problems and judges answers:
 * \boxed{} extraction (nested braces, the last box wins), numeric equality
 * ("12,430" == "12430.0"), trimming, and task files with line-numbered
 * errors. */
#include <stdio.h>
#include <string.h>

#include "eval_tasks.h"
#include "test_util.h"

static const char *write_file(const char *name, const char *text) {
    const char *path = kr_test_path(kr_test_tmpdir(), name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

int main(void) {
    char out[64];
    kr_eval_extract_answer("so the answer is \\boxed{\\frac{1}{2}} hmm \\boxed{42}.", out, sizeof out);
    CHECK(!strcmp(out, "42"));
    kr_eval_extract_answer("\\boxed{\\frac{1}{2}}", out, sizeof out);
    CHECK(!strcmp(out, "\\frac{1}{2}"));
    kr_eval_extract_answer("  8976.\n", out, sizeof out);
    CHECK(!strcmp(out, "8976"));

    CHECK(kr_eval_answer_matches("8976", "8976"));
    CHECK(kr_eval_answer_matches(" 12,430 ", "12430"));
    CHECK(kr_eval_answer_matches("The result: \\boxed{12430.0}", "12430"));
    CHECK(!kr_eval_answer_matches("8977", "8976"));
    CHECK(!kr_eval_answer_matches("", "0"));
    CHECK(kr_eval_answer_matches("\\boxed{x+1}", "x+1"));
    CHECK(!kr_eval_answer_matches("89761", "8976"));

    const char *good = write_file("good.jsonl",
                                  "{\"id\": \"a\", \"prompt\": \"Compute 2*3.\", \"answer\": \"6\"}\n"
                                  "\n"
                                  "{\"problem\": \"What is 1+1?\", \"answer\": 2}\n");
    kr_eval_tasks t;
    const char *files[] = {good};
    CHECK(kr_eval_tasks_load(&t, files, 1, 0));
    CHECK_EQ_INT(t.n, 2);
    if (t.n == 2) {
        CHECK(!strcmp(t.items[0].prompt, "Compute 2*3.") && !strcmp(t.items[0].answer, "6"));
        CHECK(!strcmp(t.items[1].prompt, "What is 1+1?") && !strcmp(t.items[1].answer, "2"));
        CHECK(strstr(t.items[1].where, "good.jsonl:3") != NULL);
    }
    kr_eval_tasks_free(&t);
    CHECK(kr_eval_tasks_load(&t, files, 1, 1));
    CHECK_EQ_INT(t.n, 1);
    kr_eval_tasks_free(&t);

    /* a bad line fails the load (its FILE:LINE goes to stderr) */
    const char *bad = write_file("bad.jsonl", "{\"prompt\": \"x\", \"answer\": \"1\"}\n{\"prompt\": \"y\"}\n");
    files[0] = bad;
    CHECK(!kr_eval_tasks_load(&t, files, 1, 0));
    const char *broken = write_file("broken.jsonl", "{\"prompt\": \"x\", \"answer\": \"1\"\n");
    files[0] = broken;
    CHECK(!kr_eval_tasks_load(&t, files, 1, 0));

    /* every shipped held-out set loads, with numeric answers */
    const char *sets[] = {"late-tier1.jsonl",  "late-tier2.jsonl",  "late-tier3.jsonl",  "late-tier4.jsonl",
                          "reuse-tier1.jsonl", "reuse-tier2.jsonl", "reuse-tier3.jsonl", "reuse-tier4.jsonl"};
    for (int i = 0; i < 8; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/data/%s", KARA_SOURCE_DIR, sets[i]);
        files[0] = path;
        if (CHECK_MSG(kr_eval_tasks_load(&t, files, 1, 0), "%s", path)) {
            CHECK(t.n >= 50);
            CHECK(kr_eval_answer_matches(t.items[0].answer, t.items[0].answer));
        }
        kr_eval_tasks_free(&t);
    }
    return kr_test_finish();
}
