/* params_size.h - the `size` that begins every public params struct
 * (kara.h, "Conventions"): checked where a *_create or *_load takes one. */
#ifndef KR_PARAMS_SIZE_H
#define KR_PARAMS_SIZE_H

#include <stddef.h>
#include <stdint.h>

#include "kara.h"

/* KARA_OK when params is NULL or its leading uint32_t size equals
 * expected (the struct's sizeof in this library); otherwise KARA_ERR_ARG
 * with a message naming fn and both sizes: 0 means the struct was never
 * filled by its _init function, another value a caller built against a
 * different kara.h. When a field is appended to a struct, the older sizes
 * it still takes are added here. */
kara_status kr_params_size_check(const void *params, size_t expected, const char *fn, const char *init_fn);

#endif
