/*
 * test_gguf.h - comparing GGUF metadata values in tests (a copied or
 * rewritten file must keep every value).
 */
#ifndef KR_TEST_GGUF_H
#define KR_TEST_GGUF_H

#include <stdbool.h>

#include "gguf.h"

/* Same type and same contents, arrays compared element by element and
 * nested arrays deeply; floats compared by their bits. */
bool kr_test_gguf_value_eq(const kara_gguf_value *a, const kara_gguf_value *b);

#endif
