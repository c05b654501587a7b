/* batch_shard.h - which shard of the input a `kara batch` job takes when
 * no --shard flag says: Slurm job arrays (SLURM_ARRAY_TASK_ID, _MIN, _STEP,
 * _COUNT) or a Kubernetes indexed Job (JOB_COMPLETION_INDEX, 0-based, plus
 * KARA_SHARD_COUNT = completions). */
#ifndef KR_BATCH_SHARD_H
#define KR_BATCH_SHARD_H

#include "kara.h"

/* Set batch.shard from the environment unless --shard set it. Returns -1
 * to go on, else an exit code after printing the problem. */
int kr_batch_shard_from_env(kara_config *cfg);

#endif
