/* json_canon.h - a canonical text of a parsed JSON value, so that two
 * spellings of the same value (key order, white space, number spelling,
 * string escapes) hash the same: `kara batch` hashes requests on it.
 *
 * Objects are written with their keys sorted (bytewise), nothing between
 * tokens, strings with kr_jbuf_str's escapes and numbers by value (an
 * integral value as an integer, others as "%.17g"). The text is for
 * hashing, not a JSON standard form. */
#ifndef KR_JSON_CANON_H
#define KR_JSON_CANON_H

#include "json.h"

void kr_json_canon(kr_jbuf *b, const kr_json *v);

#endif
