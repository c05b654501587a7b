/* sampler_internal.h - library-internal sampler calls (sampler.c). */
#ifndef KR_SAMPLER_INTERNAL_H
#define KR_SAMPLER_INTERNAL_H

#include "kara.h"

/* Reuse a sampler with new parameters: the seed restarts the random state
 * and the repetition history is emptied. Allocates nothing; KARA_ERR_ARG
 * when p->repeat_last_n exceeds the history the sampler was created with,
 * or for invalid parameters (s unchanged then). */
kara_status kr_sampler_reconfigure(kara_sampler *s, const kara_sampler_params *p);

#endif
