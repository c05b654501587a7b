/* status.h - the thread-local "last error" message behind kara_last_error(),
 * and the library's log sink (stderr by default, never stdout). */
#ifndef KR_STATUS_H
#define KR_STATUS_H

#include "kara.h"

#if defined(__GNUC__)
#define KR_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KR_PRINTF(a, b)
#endif

/* Record a formatted message as this thread's last error and return st, so
 * callers can write `return kr_set_error(KARA_ERR_FORMAT, "...", ...);`. */
kara_status kr_set_error(kara_status st, const char *fmt, ...) KR_PRINTF(2, 3);

/* Put a formatted prefix and ": " in front of this thread's last error and
 * return st, so a caller can name what a lower layer's message is about:
 * `return kr_error_prefix(st, "%s", path);` turns "bad magic at byte
 * offset 0" into "model.gguf: bad magic at byte offset 0". */
kara_status kr_error_prefix(kara_status st, const char *fmt, ...) KR_PRINTF(2, 3);

/* Log through the installed sink. */
void kr_log(kara_log_level level, const char *fmt, ...) KR_PRINTF(2, 3);

#endif
