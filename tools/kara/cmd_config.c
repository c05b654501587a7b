/* cmd_config.c - `kara config keys [PREFIX]`: every key of the job
 * configuration with its type, default, the values it takes and a line of
 * help, from the schema itself (kara_config_key_info_get), so the listing
 * never drifts from what the loader accepts. */
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "exit_codes.h"
#include "kara.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kara config keys [PREFIX]\n\n"
            "Lists every configuration key (YAML, --set-style flags, kara_config_set) with its type, default,\n"
            "the values it takes and what it does; PREFIX (such as kara.score or baselines.snapkv) keeps the keys\n"
            "under it. configs/README.md describes each key in full.\n");
}

/* Whether key is prefix itself or lies under it ("kara" takes "kara.buffer", not "karafoo"). */
static bool under(const char *key, const char *prefix) {
    size_t n = strlen(prefix);
    return !n || (!strncmp(key, prefix, n) && (key[n] == 0 || key[n] == '.' || prefix[n - 1] == '.'));
}

static int config_main(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return KR_EXIT_OK;
    }
    if (argc < 2 || strcmp(argv[1], "keys") || argc > 3) {
        usage(stderr);
        return KR_EXIT_USAGE;
    }
    const char *prefix = argc == 3 ? argv[2] : "";
    kara_config defaults;
    kara_config_init(&defaults);
    int key_w = 3, type_w = 4, def_w = 7, shown = 0;
    kara_config_key_info info;
    char def[1100];
    for (int pass = 0; pass < 2; pass++) {
        if (pass && shown)
            printf("%-*s  %-*s  %-*s  %s\n", key_w, "key", type_w, "type", def_w, "default", "values: help");
        for (int i = 0; kara_config_key_info_get(i, &info) == KARA_OK; i++) {
            if (!under(info.key, prefix)) continue;
            if (kara_config_get(&defaults, info.key, def, sizeof def) != KARA_OK) snprintf(def, sizeof def, "?");
            if (!*def) snprintf(def, sizeof def, "\"\"");
            if (!pass) {
                int kw = (int)strlen(info.key), tw = (int)strlen(info.type), dw = (int)strlen(def);
                key_w = kw > key_w ? kw : key_w;
                type_w = tw > type_w ? tw : type_w;
                def_w = dw > def_w ? dw : def_w;
                shown++;
            } else {
                printf("%-*s  %-*s  %-*s  %s: %s\n", key_w, info.key, type_w, info.type, def_w, def, info.bounds,
                       info.help);
            }
        }
    }
    if (!shown) {
        fprintf(stderr, "kara config keys: no key is under '%s'\n", prefix);
        return KR_EXIT_USAGE;
    }
    return KR_EXIT_OK;
}

const kr_command kr_cmd_config = {"config", "list the configuration's keys: type, default, values, help", config_main};
