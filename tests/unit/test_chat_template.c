/* test_chat_template.c - the chat template families against the exact
 * strings their official Jinja templates render (Qwen3-8B, DeepSeek-R1-
 * Distill, Meta-Llama-3-Instruct, Llama-3.1-Instruct, plain ChatML) for
 * system + user + assistant + user conversations, thinking on and off;
 * earlier thinking dropped from the history; detection from template text;
 * the chatml fallback and its warning.
 *
 * The expected strings were produced by rendering the official templates
 * with jinja2 3.1 the way transformers' apply_chat_template does
 * (trim_blocks, lstrip_blocks, bos_token given), not by this code. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kara.h"
#include "synth_model.h"
#include "test_util.h"

typedef struct chat_case {
    const char *title;
    kara_chat_family family;
    size_t n;
    kara_chat_message msgs[6];
    bool gen, think;
    const char *expected;
} chat_case;

static const chat_case cases[] = {
    {"qwen3 thinking on",
     KARA_CHAT_QWEN3,
     4,
     {{"system", "You are a helpful assistant."},
      {"user", "Hello"},
      {"assistant", "<think>\nThe user greets me.\n</think>\n\nHi there!"},
      {"user", "What is 2+2?"}},
     true,
     true,
     "<|im_start|>system\nYou are a helpful "
     "assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi "
     "there!<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"},
    {"qwen3 thinking off",
     KARA_CHAT_QWEN3,
     4,
     {{"system", "You are a helpful assistant."},
      {"user", "Hello"},
      {"assistant", "<think>\nThe user greets me.\n</think>\n\nHi there!"},
      {"user", "What is 2+2?"}},
     true,
     false,
     "<|im_start|>system\nYou are a helpful "
     "assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi "
     "there!<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
    {"qwen3 first turn",
     KARA_CHAT_QWEN3,
     1,
     {{"user", "Hello"}},
     true,
     true,
     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"},
    {"qwen3 first turn, thinking off",
     KARA_CHAT_QWEN3,
     1,
     {{"user", "Hello"}},
     true,
     false,
     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"},
    {"qwen3 final assistant keeps a think block",
     KARA_CHAT_QWEN3,
     2,
     {{"user", "Hello"}, {"assistant", "Hello back"}},
     false,
     true,
     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello back<|im_end|>\n"},
    {"qwen3 final assistant with thinking",
     KARA_CHAT_QWEN3,
     2,
     {{"user", "Hello"}, {"assistant", "<think>\n\nhmm\n\n</think>\n\n\nHello back"}},
     false,
     true,
     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nHello back<|im_end|>\n"},
    {"qwen3 plain assistant",
     KARA_CHAT_QWEN3,
     3,
     {{"user", "Hello"}, {"assistant", "Hi!"}, {"user", "What is 2+2?"}},
     true,
     true,
     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi!<|im_end|>\n<|im_start|>user\nWhat is "
     "2+2?<|im_end|>\n<|im_start|>assistant\n"},
    {"qwen3 system after the first message",
     KARA_CHAT_QWEN3,
     3,
     {{"user", "Hello"}, {"system", "Be brief."}, {"user", "What is 2+2?"}},
     true,
     true,
     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is "
     "2+2?<|im_end|>\n<|im_start|>assistant\n"},
    {"qwen3 tool results",
     KARA_CHAT_QWEN3,
     4,
     {{"user", "Hello"}, {"assistant", "<think>\nneed a tool\n</think>\n\ncalling"}, {"tool", "42"}, {"tool", "43"}},
     true,
     true,
     "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\nneed a "
     "tool\n</think>\n\ncalling<|im_end|>\n<|im_start|>user\n<tool_response>\n42\n</"
     "tool_response>\n<tool_response>\n43\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},
    {"deepseek-r1",
     KARA_CHAT_DEEPSEEK_R1,
     4,
     {{"system", "You are a helpful assistant."},
      {"user", "Hello"},
      {"assistant", "<think>\nThe user greets me.\n</think>\n\nHi there!"},
      {"user", "What is 2+2?"}},
     true,
     true,
     "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hello<｜Assistant｜>\n\nHi "
     "there!<｜end▁of▁sentence｜><｜User｜>What is 2+2?<｜Assistant｜><think>\n"},
    {"deepseek-r1 first turn",
     KARA_CHAT_DEEPSEEK_R1,
     1,
     {{"user", "Hello"}},
     true,
     true,
     "<｜begin▁of▁sentence｜><｜User｜>Hello<｜Assistant｜><think>\n"},
    {"deepseek-r1 keeps the last system message",
     KARA_CHAT_DEEPSEEK_R1,
     3,
     {{"system", "You are a helpful assistant."}, {"system", "Be brief."}, {"user", "Hello"}},
     true,
     true,
     "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hello<｜Assistant｜><think>\n"},
    {"deepseek-r1 plain assistant",
     KARA_CHAT_DEEPSEEK_R1,
     3,
     {{"user", "Hello"}, {"assistant", "Hi!"}, {"user", "What is 2+2?"}},
     true,
     true,
     "<｜begin▁of▁sentence｜><｜User｜>Hello<｜Assistant｜>Hi!<｜end▁of▁sentence｜><｜User｜>What is "
     "2+2?<｜Assistant｜><think>\n"},
    {"deepseek-r1 tool outputs",
     KARA_CHAT_DEEPSEEK_R1,
     5,
     {{"user", "Hello"}, {"tool", "42"}, {"tool", "43"}, {"assistant", "<think>x</think>ok"}, {"user", "What is 2+2?"}},
     true,
     true,
     "<｜begin▁of▁sentence｜><｜User｜>Hello<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>42<｜tool▁output▁end｜>\n<"
     "｜tool▁output▁begin｜>43<｜tool▁output▁end｜><｜tool▁outputs▁end｜><think>x</"
     "think>ok<｜end▁of▁sentence｜><｜User｜>What is 2+2?<｜Assistant｜><think>\n"},
    {"llama3",
     KARA_CHAT_LLAMA3,
     4,
     {{"system", "You are a helpful assistant."},
      {"user", "Hello"},
      {"assistant", "<think>\nThe user greets me.\n</think>\n\nHi there!"},
      {"user", "What is 2+2?"}},
     true,
     true,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are a helpful "
     "assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_"
     "header_id|>\n\n<think>\nThe user greets me.\n</think>\n\nHi "
     "there!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is "
     "2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"llama3 trims contents",
     KARA_CHAT_LLAMA3,
     2,
     {{"system", "  sys \n"},
      {"user",
       "\n hi \xc2\xa0"
       "\xe3\x80\x80"
       ""}},
     true,
     true,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|><|start_header_id|>user<|end_header_"
     "id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"llama3.1",
     KARA_CHAT_LLAMA31,
     4,
     {{"system", "You are a helpful assistant."},
      {"user", "Hello"},
      {"assistant", "<think>\nThe user greets me.\n</think>\n\nHi there!"},
      {"user", "What is 2+2?"}},
     true,
     true,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday "
     "Date: 26 Jul 2024\n\nYou are a helpful "
     "assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_"
     "header_id|>\n\n<think>\nThe user greets me.\n</think>\n\nHi "
     "there!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is "
     "2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"llama3.1 without a system message",
     KARA_CHAT_LLAMA31,
     1,
     {{"user", "Hello"}},
     true,
     true,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday "
     "Date: 26 Jul "
     "2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_"
     "header_id|>\n\n"},
    {"llama3.1 trims contents",
     KARA_CHAT_LLAMA31,
     2,
     {{"system", "  sys \n"}, {"user", "\n hi  "}},
     true,
     true,
     "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday "
     "Date: 26 Jul "
     "2024\n\nsys<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|><|start_header_id|>assistant<|end_"
     "header_id|>\n\n"},
    {"chatml",
     KARA_CHAT_CHATML,
     4,
     {{"system", "You are a helpful assistant."},
      {"user", "Hello"},
      {"assistant", "<think>\nThe user greets me.\n</think>\n\nHi there!"},
      {"user", "What is 2+2?"}},
     true,
     true,
     "<|im_start|>system\nYou are a helpful "
     "assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\nThe user greets "
     "me.\n</think>\n\nHi there!<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"},
    {"chatml without generation prompt",
     KARA_CHAT_CHATML,
     2,
     {{"system", "You are a helpful assistant."}, {"user", "Hello"}},
     false,
     true,
     "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"},
};

/* Render into a buffer sized from a first measuring call. */
static char *render(const kara_chat_template *t, const kara_chat_message *m, size_t n, bool gen, bool think) {
    size_t len = 0;
    if (kara_chat_apply(t, m, n, gen, think, NULL, 0, &len) != KARA_OK) return NULL;
    char *buf = malloc(len + 1);
    size_t len2 = 0;
    if (!buf || kara_chat_apply(t, m, n, gen, think, buf, len + 1, &len2) != KARA_OK || len2 != len) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* Index of the first differing byte, for readable failures. */
static size_t first_diff(const char *a, const char *b) {
    size_t i = 0;
    while (a[i] && a[i] == b[i]) i++;
    return i;
}

static void test_official_strings(void) {
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const chat_case *c = &cases[i];
        kara_chat_template t;
        CHECK(kara_chat_template_by_name(kara_chat_family_name(c->family), &t) == KARA_OK);
        char *out = render(&t, c->msgs, c->n, c->gen, c->think);
        CHECK_MSG(out != NULL, "%s: render failed: %s", c->title, kara_last_error());
        if (!out) continue;
        size_t d = first_diff(out, c->expected);
        CHECK_MSG(!strcmp(out, c->expected), "%s: differs at byte %zu:\n  got      '%s'\n  expected '%s'", c->title, d,
                  out + d, c->expected + d);
        free(out);
    }
}

/* Qwen3 and R1 drop the thinking of earlier turns; chatml and Llama 3 keep
 * the message as given. */
static void test_history_thinking(void) {
    const kara_chat_message conv[] = {
        {"user", "Hi"}, {"assistant", "<think>\nsecret reasoning\n</think>\n\nvisible answer"}, {"user", "Again"}};
    const struct {
        const char *name;
        bool keeps;
    } fams[] = {{"qwen3", false}, {"deepseek-r1", false}, {"chatml", true}, {"llama3", true}, {"llama3.1", true}};
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        kara_chat_template t;
        CHECK(kara_chat_template_by_name(fams[i].name, &t) == KARA_OK);
        for (int think = 0; think < 2; think++) {
            char *out = render(&t, conv, 3, true, think);
            CHECK_MSG(out && (strstr(out, "secret reasoning") != NULL) == fams[i].keeps,
                      "%s (thinking %s): earlier thinking %s", fams[i].name, think ? "on" : "off",
                      fams[i].keeps ? "should be kept" : "should be dropped");
            CHECK_MSG(out && strstr(out, "visible answer"), "%s: the earlier answer must stay", fams[i].name);
            free(out);
        }
    }
}

/* Thinking off where the official template has no switch but pre-fills
 * "<think>\n": the block is closed the way Qwen3 writes an empty one.
 * (Kara's behaviour, not rendered by those templates.) */
static void test_prefill_thinking_off(void) {
    const kara_chat_message m[] = {{"user", "Hello"}};
    kara_chat_template t;
    CHECK(kara_chat_template_by_name("deepseek-r1", &t) == KARA_OK);
    CHECK(t.prefill_think);
    char *out = render(&t, m, 1, true, false);
    CHECK(out && !strcmp(out, "<｜begin▁of▁sentence｜><｜User｜>Hello<｜Assistant｜><think>\n\n</think>\n\n"));
    free(out);

    /* a Qwen3 "Thinking" template (generation prompt "<|im_start|>assistant\n<think>\n") */
    const char *jinja =
        "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}";
    CHECK(kara_chat_template_detect(jinja, &t));
    CHECK_EQ_INT(t.family, KARA_CHAT_QWEN3);
    CHECK(t.prefill_think);
    out = render(&t, m, 1, true, true);
    CHECK(out && !strcmp(out, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n"));
    free(out);
    out = render(&t, m, 1, true, false);
    CHECK(out && !strcmp(out, "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
    free(out);
}

static void test_detection(void) {
    const struct {
        const char *what, *jinja;
        bool known;
        kara_chat_family family;
        bool prefill;
    } d[] = {
        {"Qwen3",
         "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}\n"
         "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n"
         "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
         "        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}",
         true, KARA_CHAT_QWEN3, false},
        {"DeepSeek-R1-Distill",
         "{{bos_token}}{{ns.system_prompt}}{%- for message in messages %}"
         "{%- if message['role'] == 'user' %}{{'<｜User｜>' + message['content']}}{%- endif %}"
         "{% endfor %}{% if add_generation_prompt and not ns.is_tool %}"
         "{{'<｜Assistant｜><think>\\n'}}{% endif %}",
         true, KARA_CHAT_DEEPSEEK_R1, true},
        {"Llama 3",
         "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
         "+ message['content'] | trim + '<|eot_id|>' %}",
         true, KARA_CHAT_LLAMA3, false},
        {"Llama 3.1",
         "{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}\n"
         "{{- \"Cutting Knowledge Date: December 2023\\n\" }}\n"
         "{{- \"Today Date: \" + date_string + \"\\n\\n\" }}",
         true, KARA_CHAT_LLAMA31, false},
        {"ChatML (the synthetic models' template)",
         "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
         "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
         true, KARA_CHAT_CHATML, false},
        {"Gemma (unknown)", "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}",
         false, KARA_CHAT_CHATML, false},
        {"Mistral (unknown)", "{{ '[INST] ' + message['content'] + ' [/INST]' }}", false, KARA_CHAT_CHATML, false},
        {"empty", "", false, KARA_CHAT_CHATML, false},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++) {
        kara_chat_template t;
        t.family = KARA_CHAT_LLAMA3; /* must be overwritten */
        bool known = kara_chat_template_detect(d[i].jinja, &t);
        CHECK_MSG(known == d[i].known, "%s: recognised %d, expected %d", d[i].what, known, d[i].known);
        CHECK_MSG(t.family == d[i].family, "%s: family %s, expected %s", d[i].what, kara_chat_family_name(t.family),
                  kara_chat_family_name(d[i].family));
        CHECK_MSG(t.prefill_think == d[i].prefill, "%s: prefill_think %d", d[i].what, t.prefill_think);
    }
    kara_chat_template t;
    CHECK(!kara_chat_template_detect(NULL, &t) && t.family == KARA_CHAT_CHATML);

    /* Llama 3.2 stamps today's date through strftime_now */
    CHECK(kara_chat_template_detect("<|start_header_id|>Cutting Knowledge Date{%- if strftime_now is defined %}"
                                    "{%- set date_string = strftime_now(\"%d %b %Y\") %}",
                                    &t));
    char today[32];
    time_t now = time(NULL);
    strftime(today, sizeof today, "%d %b %Y", localtime(&now));
    CHECK_MSG(!strcmp(t.date, today), "llama 3.2 date '%s', expected '%s'", t.date, today);
    CHECK(kara_chat_template_detect("<|start_header_id|>Cutting Knowledge Date", &t) && !strcmp(t.date, "26 Jul 2024"));
}

/* Qwen2/Qwen2.5's ChatML template inserts a default system message when the
 * conversation has none (expected strings rendered by jinja2 from the
 * template in ../shared/vocab/ggml-vocab-qwen2.gguf, quoted here). */
static void test_default_system(void) {
    const char *jinja = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
                        "{{ '<|im_start|>system\nYou are a helpful assistant<|im_end|>\n' }}{% endif %}"
                        "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
                        "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
    kara_chat_template t;
    CHECK(kara_chat_template_detect(jinja, &t) && t.family == KARA_CHAT_CHATML);
    CHECK_MSG(!strcmp(t.default_system, "You are a helpful assistant"), "default system '%s'", t.default_system);
    const kara_chat_message user[] = {{"user", "Hello"}};
    const kara_chat_message sys_user[] = {{"system", "Be brief."}, {"user", "Hello"}};
    char *out = render(&t, user, 1, true, true);
    CHECK(out &&
          !strcmp(out,
                  "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello"
                  "<|im_end|>\n<|im_start|>assistant\n"));
    free(out);
    out = render(&t, sys_user, 2, true, true);
    CHECK(out &&
          !strcmp(out,
                  "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
                  "<|im_start|>assistant\n"));
    free(out);
    out = render(&t, NULL, 0, true, true);
    CHECK(out && !strcmp(out, "<|im_start|>assistant\n"));
    free(out);
    /* the same with the escapes as they appear in a tokenizer_config.json, Qwen2.5's wording */
    CHECK(kara_chat_template_detect("{%- if messages[0]['role'] != 'system' %}{{- '<|im_start|>system\\nYou are Qwen, "
                                    "created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}",
                                    &t));
    CHECK_MSG(!strcmp(t.default_system, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."),
              "default system '%s'", t.default_system);
    /* a system text built from an expression is not a default */
    CHECK(kara_chat_template_detect("{% if messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n' + "
                                    "sys + '<|im_end|>\n' }}{% endif %}",
                                    &t));
    CHECK(t.default_system[0] == '\0');
    /* the synthetic models' plain ChatML has none */
    CHECK(kara_chat_template_by_name("chatml", &t) == KARA_OK && t.default_system[0] == '\0');
}

static void test_names_and_errors(void) {
    const char *names[] = {"chatml", "qwen3", "deepseek-r1", "llama3", "llama3.1"};
    for (int i = 0; i < 5; i++) {
        kara_chat_template t;
        CHECK(kara_chat_template_by_name(names[i], &t) == KARA_OK);
        CHECK_MSG(!strcmp(kara_chat_family_name(t.family), names[i]), "name round trip of %s", names[i]);
    }
    CHECK(!strcmp(kara_chat_family_name((kara_chat_family)99), "?"));
    kara_chat_template t;
    CHECK(kara_chat_template_by_name("jinja", &t) == KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "'jinja'") && strstr(kara_last_error(), "deepseek-r1"),
              "the error names the value and the choices: %s", kara_last_error());

    /* snprintf-like sizing: the full length is reported, the text cut and terminated */
    CHECK(kara_chat_template_by_name("chatml", &t) == KARA_OK);
    const kara_chat_message m[] = {{"user", "Hello"}};
    char small[10];
    size_t len = 0;
    CHECK(kara_chat_apply(&t, m, 1, true, true, small, sizeof small, &len) == KARA_OK);
    CHECK_EQ_INT(len, strlen("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"));
    CHECK(!strcmp(small, "<|im_star"));

    /* the named-flags form renders the same text, each flag where the boolean was */
    CHECK(kara_chat_template_by_name("qwen3", &t) == KARA_OK);
    for (int g = 0; g < 2; g++)
        for (int k = 0; k < 2; k++) {
            char a[256], b[256];
            size_t la = 0, lb = 0;
            uint32_t fl = (g ? KARA_CHAT_ADD_GENERATION_PROMPT : 0) | (k ? KARA_CHAT_ENABLE_THINKING : 0);
            CHECK(kara_chat_apply(&t, m, 1, g, k, a, sizeof a, &la) == KARA_OK);
            CHECK(kara_chat_apply_ex(&t, m, 1, fl, b, sizeof b, &lb) == KARA_OK);
            CHECK_MSG(la == lb && !strcmp(a, b), "flags %u: '%s' vs '%s'", (unsigned)fl, a, b);
        }
    CHECK(kara_chat_apply_ex(&t, m, 1, 4u, small, sizeof small, &len) == KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "unknown flags 0x4"), "%s", kara_last_error());
    CHECK(kara_chat_template_by_name("chatml", &t) == KARA_OK);

    const kara_chat_message bad[] = {{"user", NULL}};
    CHECK(kara_chat_apply(&t, bad, 1, true, true, small, sizeof small, &len) == KARA_ERR_ARG);
    CHECK_MSG(strstr(kara_last_error(), "message 0 has no content"), "error: %s", kara_last_error());
    const kara_chat_message bad_role[] = {{NULL, "x"}};
    CHECK(kara_chat_apply(&t, bad_role, 1, true, true, small, sizeof small, &len) == KARA_ERR_ARG);
    CHECK(kara_chat_apply(&t, m, 1, true, true, small, sizeof small, NULL) == KARA_ERR_ARG);
    /* no messages: just the generation prompt */
    CHECK(kara_chat_apply(&t, NULL, 0, true, true, small, sizeof small, &len) == KARA_OK && len == 22);
}

/* ------------------------------------------------------------------------ */
/* Detection through a model, and the fallback warning                       */
/* ------------------------------------------------------------------------ */

typedef struct log_capture {
    int n_warn;
    char last[1024];
} log_capture;

static void capture_log(kara_log_level level, const char *msg, void *user) {
    log_capture *c = user;
    if (level == KARA_LOG_WARN) {
        c->n_warn++;
        snprintf(c->last, sizeof c->last, "%s", msg);
    }
}

/* Rewrite a same-length part of a file in place (keeps the GGUF valid). */
static bool patch_file(const char *path, const char *from, const char *to) {
    size_t size = 0;
    char *data = kr_test_read_file(path, &size);
    if (!data) return false;
    size_t n = strlen(from), hits = 0;
    for (size_t i = 0; i + n <= size; i++)
        if (!memcmp(data + i, from, n)) {
            memcpy(data + i, to, n);
            hits++;
        }
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(data, 1, size, f) == size && hits > 0;
    if (f) fclose(f);
    free(data);
    return ok;
}

static kara_model *load_synth(const char *name, const char *patch_from, const char *patch_to) {
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    char err[512];
    const char *path = kr_test_path(kr_test_tmpdir(), name);
    if (kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) != KARA_OK) {
        CHECK_MSG(false, "kr_synth_write: %s", err);
        return NULL;
    }
    if (patch_from) CHECK(patch_file(path, patch_from, patch_to));
    kara_model_params mp;
    kara_model_params_init(&mp);
    mp.vocab_only = true;
    kara_model *m = NULL;
    CHECK_MSG(kara_model_load(path, &mp, &m) == KARA_OK, "load %s: %s", name, kara_last_error());
    return m;
}

static void test_from_model(void) {
    log_capture cap = {0};
    kara_log_set(capture_log, &cap);

    kara_model *m = load_synth("chatml.gguf", NULL, NULL);
    kara_chat_template t;
    if (m) {
        CHECK(kara_chat_template_from_model(m, NULL, &t) == KARA_OK && t.family == KARA_CHAT_CHATML);
        CHECK(kara_chat_template_from_model(m, "auto", &t) == KARA_OK && t.family == KARA_CHAT_CHATML);
        CHECK_EQ_INT(cap.n_warn, 0);
        CHECK(kara_chat_template_from_model(m, "qwen3", &t) == KARA_OK && t.family == KARA_CHAT_QWEN3);
        CHECK(kara_chat_template_from_model(m, "nope", &t) == KARA_ERR_ARG);
        /* kara_tokenize_ex: the same ids as the booleans, per flag */
        const char *text = "<|im_start|>user\nhi";
        for (uint32_t fl = 0; fl < 4; fl++) {
            int32_t a[64], b[64], na = 0, nb = 0;
            CHECK(kara_tokenize(m, text, -1, a, 64, fl & 1, fl & 2, &na) == KARA_OK);
            CHECK(kara_tokenize_ex(m, text, -1, b, 64, fl, &nb) == KARA_OK);
            CHECK_MSG(na == nb && !memcmp(a, b, (size_t)na * sizeof a[0]), "flags %u: %d vs %d ids", fl, na, nb);
        }
        int32_t one[1], n1 = 0;
        CHECK(kara_tokenize_ex(m, text, -1, one, 1, KARA_TOKENIZE_PARSE_SPECIAL, &n1) == KARA_ERR_BUFFER && n1 > 1);
        CHECK(kara_tokenize_ex(m, text, -1, one, 1, 8u, &n1) == KARA_ERR_ARG);
        kara_model_free(m);
    }

    /* a template with no known marker: chatml, and a warning that says so */
    m = load_synth("unknown.gguf", "<|im_start|>", "<|xx_start|>");
    if (m) {
        t.family = KARA_CHAT_QWEN3;
        CHECK(kara_chat_template_from_model(m, NULL, &t) == KARA_OK);
        CHECK_EQ_INT(t.family, KARA_CHAT_CHATML);
        CHECK_EQ_INT(cap.n_warn, 1);
        CHECK_MSG(strstr(cap.last, "chatml") && strstr(cap.last, "not one of the known"), "warning: %s", cap.last);
        kara_model_free(m);
    }

    /* no template at all: chatml with a warning */
    m = load_synth("notemplate.gguf", "tokenizer.chat_template", "tokenizer.chat_templatX");
    if (m) {
        CHECK(kara_chat_template_from_model(m, NULL, &t) == KARA_OK && t.family == KARA_CHAT_CHATML);
        CHECK_EQ_INT(cap.n_warn, 2);
        CHECK_MSG(strstr(cap.last, "no tokenizer.chat_template"), "warning: %s", cap.last);
        kara_model_free(m);
    }
    kara_log_set(NULL, NULL);
}

int main(void) {
    test_official_strings();
    test_history_thinking();
    test_prefill_thinking_off();
    test_detection();
    test_default_system();
    test_names_and_errors();
    test_from_model();
    return kr_test_finish();
}
