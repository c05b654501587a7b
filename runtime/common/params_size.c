/* params_size.c - the size check of public params structs (params_size.h). */
#include "params_size.h"

#include <string.h>

#include "status.h"

kara_status kr_params_size_check(const void *params, size_t expected, const char *fn, const char *init_fn) {
    if (!params) return KARA_OK;
    uint32_t size;
    memcpy(&size, params, sizeof size);
    if (size == expected) return KARA_OK;
    if (size == 0)
        return kr_set_error(KARA_ERR_ARG, "%s: params->size is 0: fill the params with %s first", fn, init_fn);
    return kr_set_error(KARA_ERR_ARG,
                        "%s: params->size is %u but this library's struct has %zu bytes: the program was built "
                        "against a different kara.h",
                        fn, (unsigned)size, expected);
}
