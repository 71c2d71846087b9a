/*
 * What a terminal session lets through from the payload's terminal to the
 * operator's: every escape sequence (a TUI needs them) except clipboard
 * access (OSC 52), and a record of the modes the payload left set, so that
 * whatever ends the session can undo them. A pure, stream-safe parser: a
 * sequence may arrive split across any number of reads.
 */
#ifndef MAELYS_WARDEN_TERM_FILTER_H
#define MAELYS_WARDEN_TERM_FILTER_H

#include <stdbool.h>
#include <stddef.h>

/* The most bytes a feed may hold back (an escape's start, an OSC's number)
 * and give out with a later one: out holds n + TERM_FILTER_SLACK bytes. */
#define TERM_FILTER_SLACK 32
/* The longest reset text term_filter_resets writes. */
#define TERM_FILTER_RESETS_MAX 256

typedef struct term_filter {
  bool allow_clipboard;
  int state;
  int c2_base;   /* the state 0xC2 came in */
  int utf8_left; /* continuation bytes of a UTF-8 character to come */
  unsigned char held[TERM_FILTER_SLACK]; /* bytes not given out yet */
  size_t held_len;
  unsigned long osc; /* the OSC's number so far */
  int osc_digits;
  char csi_private; /* '<', '=', '>', '?' or 0 */
  unsigned csi_params[16];
  size_t csi_count;
  bool csi_ignore; /* sub-parameters, intermediates, overflow */
  /* Modes left set, for term_filter_resets. */
  unsigned modes;
  unsigned kitty_pushes;
  unsigned long dropped; /* OSC 52 sequences dropped */
} term_filter_t;

void term_filter_init(term_filter_t* f, bool allow_clipboard);

/* Filters `n` bytes into `out` (n + TERM_FILTER_SLACK bytes); returns how
 * many it wrote. */
size_t term_filter_feed(term_filter_t* f, const char* in, size_t n, char* out);

/* The text that ends a sequence left unfinished (CAN) and undoes every mode
 * the stream left set (alternate screen, mouse reporting, focus events,
 * bracketed paste, application keys, keyboard protocols, hidden cursor,
 * graphic rendition), into `out` (TERM_FILTER_RESETS_MAX bytes); returns
 * its length, 0 when nothing needs undoing. */
size_t term_filter_resets(const term_filter_t* f, char* out);

/* Forgets the modes and any unfinished sequence, once resets were written. */
void term_filter_reset(term_filter_t* f);

#endif
