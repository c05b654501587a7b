/* fuzz.h - what every harness under tests/fuzz/ shares. Each fuzz_*.c
 * defines LLVMFuzzerTestOneInput (and may define LLVMFuzzerInitialize): built
 * with clang's libFuzzer (-DKARA_FUZZ=ON, tools/fuzz.sh) it explores; built
 * with replay_main.c (every build, a CTest test) it runs the checked-in
 * seeds and the regression inputs of tests/fuzz/regress/ once each.
 * FUZZ_CHECK states an invariant: a violation aborts, which both drivers
 * report as a crash with the input that caused it. */
#ifndef KR_FUZZ_H
#define KR_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "kara.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Every harness defines it (replay_main.c calls it): set-up before the first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FUZZ_CHECK(cond, ...)                                                                                          \
    do {                                                                                                               \
        if (!(cond)) {                                                                                                 \
            fprintf(stderr, "fuzz invariant failed at %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                                              \
            fputc('\n', stderr);                                                                                       \
            abort();                                                                                                   \
        }                                                                                                              \
    } while (0)

/* The library's log, dropped: warnings about odd inputs are expected, and
 * the harness checks statuses and messages itself. */
static inline void kr_fuzz_quiet_log(kara_log_level level, const char *msg, void *user) {
    (void)level;
    (void)msg;
    (void)user;
}

#endif
