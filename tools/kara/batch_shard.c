/* batch_shard.c - the shard of a `kara batch` job from a scheduler's
 * environment (batch_shard.h). */
#include "batch_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "exit_codes.h"

/* The shard from a scheduler when no --shard flag gave one: Slurm job
 * arrays (SLURM_ARRAY_TASK_ID, _MIN, _STEP, _COUNT) or a Kubernetes indexed
 * Job (JOB_COMPLETION_INDEX, 0-based, plus KARA_SHARD_COUNT = completions). */
int kr_batch_shard_from_env(kara_config *cfg) {
    const char *origin = kara_config_origin(cfg, "batch.shard");
    if (origin && !strcmp(origin, "--shard")) return -1;
    const char *slurm = getenv("SLURM_ARRAY_TASK_ID"), *k8s = getenv("JOB_COMPLETION_INDEX");
    long long idx, count, min = 0, step = 1;
    char value[64];
    if (slurm && *slurm) {
        const char *c = getenv("SLURM_ARRAY_TASK_COUNT"), *mn = getenv("SLURM_ARRAY_TASK_MIN"),
                   *st = getenv("SLURM_ARRAY_TASK_STEP");
        if (!c || !kr_arg_int("batch", "SLURM_ARRAY_TASK_COUNT", c, 1, 65536, &count) ||
            !kr_arg_int("batch", "SLURM_ARRAY_TASK_ID", slurm, 0, 1 << 30, &idx) ||
            (mn && !kr_arg_int("batch", "SLURM_ARRAY_TASK_MIN", mn, 0, 1 << 30, &min)) ||
            (st && !kr_arg_int("batch", "SLURM_ARRAY_TASK_STEP", st, 1, 1 << 30, &step))) {
            fprintf(stderr, "kara batch: a Slurm array task needs SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT\n");
            return KR_EXIT_CONFIG;
        }
        if (idx < min || (idx - min) % step || (idx - min) / step >= count) {
            fprintf(stderr,
                    "kara batch: SLURM_ARRAY_TASK_ID %lld does not fit the array (min %lld, step %lld, count %lld)\n",
                    idx, min, step, count);
            return KR_EXIT_CONFIG;
        }
        snprintf(value, sizeof value, "%lld/%lld", (idx - min) / step + 1, count);
        return kara_config_set(cfg, "batch.shard", value, "SLURM_ARRAY_TASK_ID") == KARA_OK ? -1 : KR_EXIT_CONFIG;
    }
    if (k8s && *k8s) {
        const char *c = getenv("KARA_SHARD_COUNT");
        if (!c) {
            fprintf(stderr,
                    "kara batch: JOB_COMPLETION_INDEX is set but KARA_SHARD_COUNT is not: set it to the Job's "
                    "completions (see configs/k8s-indexed-job.yaml)\n");
            return KR_EXIT_CONFIG;
        }
        if (!kr_arg_int("batch", "KARA_SHARD_COUNT", c, 1, 65536, &count) ||
            !kr_arg_int("batch", "JOB_COMPLETION_INDEX", k8s, 0, count - 1, &idx))
            return KR_EXIT_CONFIG;
        snprintf(value, sizeof value, "%lld/%lld", idx + 1, count);
        return kara_config_set(cfg, "batch.shard", value, "JOB_COMPLETION_INDEX") == KARA_OK ? -1 : KR_EXIT_CONFIG;
    }
    return -1;
}
