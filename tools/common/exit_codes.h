/* exit_codes.h - the `kara` command's exit codes (sysexits-style numbers,
 * defined here because <sysexits.h> is not portable). */
#ifndef KARA_EXIT_CODES_H
#define KARA_EXIT_CODES_H

#define KARA_EXIT_OK 0
#define KARA_EXIT_PARTIAL 1      /* batch done, some requests failed */
#define KARA_EXIT_USAGE 64       /* bad command line */
#define KARA_EXIT_DATAERR 65     /* bad input data (malformed GGUF, JSONL, prompt too long) */
#define KARA_EXIT_NOINPUT 66     /* missing model or input file */
#define KARA_EXIT_SOFTWARE 70    /* internal error */
#define KARA_EXIT_CANTCREAT 73   /* cannot create output */
#define KARA_EXIT_IOERR 74       /* I/O error */
#define KARA_EXIT_CONFIG 78      /* bad configuration */
#define KARA_EXIT_SIGINT 130     /* interrupted */

#endif
