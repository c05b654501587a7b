/* chat_help.h - the list of `kara chat`'s slash commands that /help prints,
 * kept apart so that the command loop stays readable. */
#ifndef KR_CHAT_HELP_H
#define KR_CHAT_HELP_H

#include <stdio.h>

/* Print every command chat takes, one a line, and the editing keys. */
void kr_chat_help(FILE *f);

#endif
