/*
 * The terminal session's output filter (see term-filter.h).
 *
 * The parser follows the states terminals themselves use (DEC/ECMA-48, as
 * xterm, VTE and the vte crate implement them): ESC starts an escape, ESC [
 * a control sequence, ESC ] an operating system command (OSC) that ends at
 * BEL or ST (ESC \), ESC P, X, ^ and _ strings that end at ST; CAN and SUB
 * abort any of them, and an ESC inside one ends it and starts a new escape.
 * The 8-bit C1 forms count too, as UTF-8 (U+009B CSI, U+009D OSC, U+009C
 * ST...): VTE acts on them, so a payload could otherwise reach the
 * clipboard with "\xc2\x9d52;...".
 *
 * Only an OSC's number decides its fate, so the filter holds back "ESC ]"
 * and the digits after it until the number is known: OSC 52 (the clipboard,
 * set or query, whatever its leading zeros) is then dropped up to its
 * terminator unless the session allows it; any other sequence is given out
 * unchanged. Everything else passes byte for byte, never buffered. A
 * sequence that GNU screen or tmux would pass on to the terminal outside
 * (DCS) holds its OSC after an ESC, which ends the DCS for this parser too,
 * so the OSC inside is seen and dropped the same way.
 */
#include <stdio.h>
#include <string.h>

#include "term-filter.h"

enum state {
  S_GROUND,
  S_C2,        /* after 0xC2 (not given out yet): a C1 control may follow */
  S_ESC,       /* held: ESC */
  S_ESC_INTER, /* ESC and intermediates: given out */
  S_CSI,
  S_OSC_NUM, /* held: the introducer and the number's digits */
  S_OSC_PASS,
  S_OSC_PASS_ESC, /* held: ESC */
  S_OSC_DROP,
  S_OSC_DROP_ESC,
  S_STR, /* DCS, SOS, PM, APC */
  S_STR_ESC,
};

/* Modes a payload can leave set, each with the text that undoes it. */
enum {
  M_KEYPAD = 1u << 0,
  M_KITTY_FLAGS = 1u << 1,
  M_MODIFY_OTHER_KEYS = 1u << 2,
  M_SGR = 1u << 3,
};

typedef struct dec_mode {
  unsigned number;
  unsigned bit;
  bool set_by_reset; /* 25: "l" hides the cursor, which "h" undoes */
  const char* undo;
} dec_mode_t;

/* In the order they are undone: input modes first, the screen last. */
static const dec_mode_t dec_modes[] = {
    {1000, 1u << 8, false, "\x1b[?1000l"},
    {1001, 1u << 9, false, "\x1b[?1001l"},
    {1002, 1u << 10, false, "\x1b[?1002l"},
    {1003, 1u << 11, false, "\x1b[?1003l"},
    {1005, 1u << 12, false, "\x1b[?1005l"},
    {1006, 1u << 13, false, "\x1b[?1006l"},
    {1015, 1u << 14, false, "\x1b[?1015l"},
    {1016, 1u << 15, false, "\x1b[?1016l"},
    {1004, 1u << 16, false, "\x1b[?1004l"},
    {2004, 1u << 17, false, "\x1b[?2004l"},
    {1, 1u << 18, false, "\x1b[?1l"},
    {1049, 1u << 19, false, "\x1b[?1049l"},
    {1047, 1u << 20, false, "\x1b[?1047l"},
    {47, 1u << 21, false, "\x1b[?47l"},
    {25, 1u << 22, true, "\x1b[?25h"},
};

#define NDEC (sizeof dec_modes / sizeof dec_modes[0])

typedef struct sink {
  char* out;
  size_t len;
} sink_t;

static void put(sink_t* s, unsigned char c) {
  s->out[s->len++] = (char)c;
}

static void give_held(term_filter_t* f, sink_t* s) {
  for (size_t i = 0; i < f->held_len; i++)
    put(s, f->held[i]);
  f->held_len = 0;
}

static void hold(term_filter_t* f, unsigned char c) {
  if (f->held_len < sizeof f->held)
    f->held[f->held_len++] = c;
}

void term_filter_init(term_filter_t* f, bool allow_clipboard) {
  memset(f, 0, sizeof *f);
  f->allow_clipboard = allow_clipboard;
  f->state = S_GROUND;
}

void term_filter_reset(term_filter_t* f) {
  term_filter_init(f, f->allow_clipboard);
}

static void csi_begin(term_filter_t* f) {
  f->state = S_CSI;
  f->csi_private = 0;
  f->csi_count = 0;
  f->csi_ignore = false;
  memset(f->csi_params, 0, sizeof f->csi_params);
}

static unsigned param(const term_filter_t* f, size_t i, unsigned dflt) {
  return i < f->csi_count && f->csi_params[i] != 0 ? f->csi_params[i] : dflt;
}

/* A complete control sequence: record the modes it changes. */
static void csi_end(term_filter_t* f, unsigned char final) {
  if (f->csi_ignore)
    return;
  if (f->csi_private == '?' && (final == 'h' || final == 'l')) {
    for (size_t i = 0; i < f->csi_count; i++)
      for (size_t k = 0; k < NDEC; k++)
        if (dec_modes[k].number == f->csi_params[i]) {
          bool set = (final == 'h') != dec_modes[k].set_by_reset;
          if (set)
            f->modes |= dec_modes[k].bit;
          else
            f->modes &= ~dec_modes[k].bit;
        }
  } else if (f->csi_private == '>' && final == 'u') {
    /* The kitty keyboard protocol's stack: push, pop, set. */
    if (f->kitty_pushes < 1000)
      f->kitty_pushes++;
  } else if (f->csi_private == '<' && final == 'u') {
    unsigned n = param(f, 0, 1);
    f->kitty_pushes = n >= f->kitty_pushes ? 0 : f->kitty_pushes - n;
  } else if (f->csi_private == '=' && final == 'u') {
    if (param(f, 0, 0) != 0)
      f->modes |= M_KITTY_FLAGS;
    else
      f->modes &= ~M_KITTY_FLAGS;
  } else if (f->csi_private == '>' && final == 'm' && param(f, 0, 0) == 4) {
    if (param(f, 1, 0) != 0)
      f->modes |= M_MODIFY_OTHER_KEYS;
    else
      f->modes &= ~M_MODIFY_OTHER_KEYS;
  } else if (f->csi_private == 0 && final == 'm') {
    /* Graphic rendition: left set unless the last parameter resets it. */
    if (f->csi_count == 0 || f->csi_params[f->csi_count - 1] == 0)
      f->modes &= ~M_SGR;
    else
      f->modes |= M_SGR;
  }
}

static void csi_byte(term_filter_t* f, unsigned char c) {
  if (c >= '0' && c <= '9') {
    size_t i = f->csi_count ? f->csi_count - 1 : 0;
    if (f->csi_count == 0)
      f->csi_count = 1;
    unsigned v = f->csi_params[i] * 10 + (unsigned)(c - '0');
    f->csi_params[i] = v > 100000 ? 100000 : v;
  } else if (c == ';') {
    if (f->csi_count == 0)
      f->csi_count = 1;
    if (f->csi_count < sizeof f->csi_params / sizeof f->csi_params[0])
      f->csi_count++;
    else
      f->csi_ignore = true;
  } else if (c >= 0x3c && c <= 0x3f) {
    if (f->csi_count == 0 && f->csi_private == 0)
      f->csi_private = (char)c;
    else
      f->csi_ignore = true;
  } else {
    f->csi_ignore = true; /* ':' sub-parameters, intermediates */
  }
}

/* The OSC's number is known (or will not be): drop a clipboard access,
 * give out anything else. */
static void osc_decide(term_filter_t* f, sink_t* s) {
  if (f->osc == 52 && f->osc_digits > 0 && !f->allow_clipboard) {
    f->held_len = 0;
    f->dropped++;
    f->state = S_OSC_DROP;
  } else {
    give_held(f, s);
    f->state = S_OSC_PASS;
  }
}

static void step(term_filter_t* f, sink_t* s, unsigned char c);

/* An ESC inside a sequence ends it and starts a new escape (held). */
static void restart_escape(term_filter_t* f) {
  f->held_len = 0;
  hold(f, 0x1b);
  f->state = S_ESC;
}

/* Resolves what is held when a byte other than the one expected comes: an
 * ESC that ended a string starts a new escape, an OSC's number is final. */
static void settle(term_filter_t* f, sink_t* s) {
  switch (f->state) {
  case S_OSC_PASS_ESC:
  case S_OSC_DROP_ESC:
  case S_STR_ESC:
    f->state = S_ESC; /* the held ESC ended the string and starts anew */
    break;
  case S_OSC_NUM:
    osc_decide(f, s);
    break;
  default:
    break;
  }
}

/* A byte that is text where it comes (not a control): given out unless it
 * is part of a dropped clipboard access; it ends an escape or a control
 * sequence. */
static void text(term_filter_t* f, sink_t* s, unsigned char c) {
  settle(f, s);
  switch (f->state) {
  case S_OSC_DROP:
    return;
  case S_OSC_PASS:
  case S_STR:
    put(s, c);
    return;
  default:
    give_held(f, s);
    put(s, c);
    f->state = S_GROUND;
    return;
  }
}

/* A C1 control, 8-bit (`utf8` false) or as UTF-8 (0xC2 then c): C1
 * controls act from any state. */
static void c1(term_filter_t* f, sink_t* s, unsigned char c, bool utf8) {
  settle(f, s);
  if (f->state == S_ESC)
    give_held(f, s); /* ESC then a C1 control: the C1 control wins */
  bool dropping = f->state == S_OSC_DROP;
  f->held_len = 0;
  if (c == 0x9d) {
    if (utf8)
      hold(f, 0xc2);
    hold(f, c);
    f->osc = 0;
    f->osc_digits = 0;
    f->state = S_OSC_NUM;
    return;
  }
  if (!(dropping && c == 0x9c)) { /* ST ends the dropped OSC: dropped too */
    if (utf8)
      put(s, 0xc2);
    put(s, c);
  }
  if (c == 0x9b)
    csi_begin(f);
  else if (c == 0x90 || c == 0x98 || c == 0x9e || c == 0x9f)
    f->state = S_STR;
  else
    f->state = S_GROUND;
}

static void after_escape(term_filter_t* f, sink_t* s, unsigned char c) {
  if (c == 0x1b) {
    give_held(f, s); /* the first ESC ended with nothing after it */
    hold(f, c);
    return;
  }
  if (c == 0x18 || c == 0x1a) {
    give_held(f, s);
    put(s, c);
    f->state = S_GROUND;
    return;
  }
  if (c < 0x20 || c == 0x7f) {
    /* Executed without leaving the escape: give it out, keep the ESC. */
    put(s, c);
    return;
  }
  if (c == ']') {
    hold(f, c);
    f->osc = 0;
    f->osc_digits = 0;
    f->state = S_OSC_NUM;
    return;
  }
  give_held(f, s);
  put(s, c);
  if (c == '[') {
    csi_begin(f);
  } else if (c == 'P' || c == 'X' || c == '^' || c == '_') {
    f->state = S_STR;
  } else if (c >= 0x20 && c <= 0x2f) {
    f->state = S_ESC_INTER;
  } else {
    if (c == '=')
      f->modes |= M_KEYPAD;
    else if (c == '>')
      f->modes &= ~M_KEYPAD;
    else if (c == 'c') { /* RIS: the terminal resets everything itself */
      f->modes = 0;
      f->kitty_pushes = 0;
    }
    f->state = S_GROUND;
  }
}

/* A 7-bit byte. */
static void ascii(term_filter_t* f, sink_t* s, unsigned char c) {
  switch (f->state) {
  case S_GROUND:
    if (c == 0x1b) {
      hold(f, c);
      f->state = S_ESC;
    } else {
      put(s, c);
    }
    return;
  case S_ESC:
    after_escape(f, s, c);
    return;
  case S_ESC_INTER:
  case S_CSI:
    if (c == 0x1b) {
      restart_escape(f);
      return;
    }
    put(s, c);
    if (c == 0x18 || c == 0x1a) {
      f->state = S_GROUND;
    } else if (f->state == S_ESC_INTER) {
      if (c >= 0x30 && c <= 0x7e)
        f->state = S_GROUND;
    } else if (c >= 0x40 && c <= 0x7e) {
      csi_end(f, c);
      f->state = S_GROUND;
    } else if (c >= 0x20 && c <= 0x3f) {
      csi_byte(f, c);
    }
    return; /* other C0 controls are executed inside: given out */
  case S_OSC_NUM:
    if (c >= '0' && c <= '9' && f->osc_digits < 10) {
      hold(f, c);
      f->osc = f->osc * 10 + (unsigned long)(c - '0');
      f->osc_digits++;
      return;
    }
    osc_decide(f, s);
    ascii(f, s, c); /* the separator, the terminator or a parameter */
    return;
  case S_OSC_PASS:
  case S_OSC_DROP: {
    bool drop = f->state == S_OSC_DROP;
    if (c == 0x07 || c == 0x18 || c == 0x1a) {
      if (!drop)
        put(s, c);
      f->state = S_GROUND;
    } else if (c == 0x1b) {
      hold(f, c);
      f->state = drop ? S_OSC_DROP_ESC : S_OSC_PASS_ESC;
    } else if (!drop) {
      put(s, c);
    }
    return;
  }
  case S_STR:
    if (c == 0x1b) {
      hold(f, c);
      f->state = S_STR_ESC;
      return;
    }
    put(s, c);
    if (c == 0x18 || c == 0x1a)
      f->state = S_GROUND;
    return;
  case S_OSC_PASS_ESC:
  case S_OSC_DROP_ESC:
  case S_STR_ESC:
    if (c == '\\') {
      if (f->state != S_OSC_DROP_ESC) {
        give_held(f, s);
        put(s, c);
      }
      f->held_len = 0;
      f->state = S_GROUND;
      return;
    }
    /* The string ended at the ESC (held), which starts a new escape. */
    f->state = S_ESC;
    after_escape(f, s, c);
    return;
  }
}

/*
 * One byte. UTF-8 first: a continuation of a character in progress is
 * text; 0xC2 may introduce a C1 control (U+0080..U+009F), so it waits for
 * the next byte; a stray 0x80..0x9F is an 8-bit C1 control (what a terminal
 * outside UTF-8 mode acts on). This assumes the operator's terminal decodes
 * UTF-8 or Latin-1 without C1 controls in text, as every current one does.
 */
static void step(term_filter_t* f, sink_t* s, unsigned char c) {
  if (f->state == S_C2) {
    f->state = f->c2_base;
    if (c >= 0x80 && c <= 0x9f) {
      c1(f, s, c, true);
    } else if (c >= 0xa0 && c <= 0xbf) {
      text(f, s, 0xc2);
      text(f, s, c);
    } else {
      text(f, s, 0xc2); /* not UTF-8: 0xC2 alone is text */
      step(f, s, c);
    }
    return;
  }
  if (f->utf8_left > 0 && c >= 0x80 && c <= 0xbf) {
    f->utf8_left--;
    text(f, s, c);
    return;
  }
  f->utf8_left = 0;
  if (c == 0xc2) {
    settle(f, s);
    if (f->state == S_ESC) {
      give_held(f, s);
      f->state = S_GROUND;
    }
    f->c2_base = f->state;
    f->state = S_C2;
  } else if (c >= 0x80 && c <= 0x9f) {
    c1(f, s, c, false);
  } else if (c >= 0xc3 && c <= 0xf4) {
    f->utf8_left = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
    text(f, s, c);
  } else if (c >= 0x80) {
    text(f, s, c);
  } else {
    ascii(f, s, c);
  }
}

size_t term_filter_feed(term_filter_t* f, const char* in, size_t n, char* out) {
  sink_t s = {out, 0};
  for (size_t i = 0; i < n; i++)
    step(f, &s, (unsigned char)in[i]);
  return s.len;
}

static size_t append(char* out, size_t len, const char* text) {
  size_t n = strlen(text);
  if (len + n >= TERM_FILTER_RESETS_MAX)
    return len;
  memcpy(out + len, text, n);
  return len + n;
}

size_t term_filter_resets(const term_filter_t* f, char* out) {
  size_t len = 0;
  /* Whatever sequence the payload left unfinished would swallow what
   * follows: CAN ends it (held bytes were never given out). */
  if (f->state != S_GROUND)
    len = append(out, len, "\x18");
  if (f->kitty_pushes > 0) {
    char pop[32];
    snprintf(pop, sizeof pop, "\x1b[<%uu", f->kitty_pushes);
    len = append(out, len, pop);
  }
  if (f->modes & M_KITTY_FLAGS)
    len = append(out, len, "\x1b[=0;1u");
  if (f->modes & M_MODIFY_OTHER_KEYS)
    len = append(out, len, "\x1b[>4;0m");
  for (size_t k = 0; k < NDEC; k++)
    if (f->modes & dec_modes[k].bit)
      len = append(out, len, dec_modes[k].undo);
  if (f->modes & M_KEYPAD)
    len = append(out, len, "\x1b>");
  if (f->modes & M_SGR)
    len = append(out, len, "\x1b[0m");
  return len;
}
