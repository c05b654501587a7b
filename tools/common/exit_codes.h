/* exit_codes.h - the `kara` command's exit codes (sysexits-style numbers,
 * defined here because <sysexits.h> is not portable). */
#ifndef KR_EXIT_CODES_H
#define KR_EXIT_CODES_H

#define KR_EXIT_OK 0
#define KR_EXIT_PARTIAL 1      /* batch done, some requests failed */
#define KR_EXIT_USAGE 64       /* bad command line */
#define KR_EXIT_DATAERR 65     /* bad input data (malformed GGUF, JSONL, prompt too long) */
#define KR_EXIT_NOINPUT 66     /* missing model or input file */
#define KR_EXIT_UNAVAILABLE 69 /* the device asked for is not there (no GPU backend in this build, no usable GPU) */
#define KR_EXIT_SOFTWARE 70    /* internal error */
#define KR_EXIT_CANTCREAT 73   /* cannot create output */
#define KR_EXIT_IOERR 74       /* I/O error */
#define KR_EXIT_CONFIG 78      /* bad configuration */
#define KR_EXIT_SIGINT 130     /* interrupted */

#endif
