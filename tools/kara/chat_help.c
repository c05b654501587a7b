/* chat_help.c - see chat_help.h. */
#include "chat_help.h"

void kr_chat_help(FILE *f) {
    fprintf(f,
            "/exit, /quit, /bye  leave (also Ctrl-D)\n"
            "/help, /?           this list\n"
            "/clear              forget the conversation (the system prompt stays)\n"
            "/regen              generate the last reply again\n"
            "/read FILE          send a file's text as your message\n"
            "/set think          turn thinking on\n"
            "/set nothink        turn thinking off\n"
            "/stats              speed of the last reply, context and KV memory\n"
            "A line ending in \\ continues on the next line. Ctrl-C stops a reply.\n"
            "On a terminal: Up/Down recall earlier lines, Ctrl-L clears the screen, and what\n"
            "you type during a reply waits for the next prompt (docs/CHAT.md lists the keys).\n");
    fflush(f);
}
