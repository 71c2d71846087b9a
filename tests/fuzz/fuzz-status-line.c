/*
 * Fuzz target: the status-line parsers. The bubblewrap backend's
 * status_line slot reads what the sandbox helper writes on the status
 * channel -- a channel the core reads from a process tree that started a
 * hostile payload -- so every line must turn into one well-formed event.
 * The input is split at newlines as the core splits the channel, and each
 * line is parsed through the public vtable (backend.h), as the core calls
 * it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "maelys/backend.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void parse_line(const maelys_backend_t* vt, const char* line,
                       size_t length) {
  maelys_backend_event_t ev;
  memset(&ev, 0, sizeof ev);
  vt->status_line(NULL, line, length, &ev);
  if (ev.kind < MAELYS_BACKEND_EVENT_NONE ||
      ev.kind > MAELYS_BACKEND_EVENT_IDENTITY)
    abort();
  /* Strings stay inside their arrays and end there. */
  if (memchr(ev.step, '\0', sizeof ev.step) == NULL ||
      memchr(ev.message, '\0', sizeof ev.message) == NULL)
    abort();
  if (ev.kind == MAELYS_BACKEND_EVENT_LAUNCH_FAILED && ev.step[0] == '\0')
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const maelys_backend_t* vt = maelys_backend_bubblewrap();
  const char* text = (const char*)data;
  size_t start = 0;
  for (size_t i = 0; i <= size; i++) {
    if (i == size || text[i] == '\n') {
      /* The core hands over lines without their newline, and never one
       * longer than its 1023-byte line buffer. */
      size_t length = i - start;
      if (length < 1024)
        parse_line(vt, text + start, length);
      start = i + 1;
    }
  }
  return 0;
}
