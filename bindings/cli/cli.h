/* The agent-cli/v2 machinery of maelys-warden: parsing against the catalog,
 * envelopes and renderings, describe, help and completion. */
#ifndef MAELYS_WARDEN_CLI_H
#define MAELYS_WARDEN_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "catalog.h"

typedef enum format { FORMAT_TEXT, FORMAT_JSON, FORMAT_JSONL } format_t;

typedef struct given_option {
  const option_def_t* def;
  char** values; /* for repeatable options, every value in order */
  size_t count;
  bool flag; /* a flag's value (--flag=false gives false) */
} given_option_t;

typedef struct invocation {
  const command_def_t* cmd;
  given_option_t given[48];
  size_t given_count;
  char** operands; /* NULL-terminated */
  size_t operand_count;
  bool help; /* --help on the line: render the command's help */
  format_t format;
  bool compact;
  const char* field;
  bool verbose;
} invocation_t;

typedef struct cli_error {
  const char* code;
  const char* command; /* the resolved command's id, or "unknown" */
  char message[2048];
  char hint[1024];
} cli_error_t;

/* Fills err and returns -1. */
int cli_fail(cli_error_t* err, const char* code, const char* hint,
             const char* fmt, ...) __attribute__((format(printf, 4, 5)));

/* Parses argv against the catalog, in the causal order of agent-cli/v2 §8:
 * command resolution, what each option says alone, --help, the line as a
 * whole, rendering constraints. 0, or -1 with err filled. */
int cli_parse(int argc, char** argv, invocation_t* inv, cli_error_t* err);
void cli_invocation_free(invocation_t* inv);
/* After a parse failure: the rendering the line (or MAELYS_CLI_FORMAT) asked
 * for, as far as it could be read. */
void cli_guess_format(invocation_t* inv);

/* The option's value(s), or NULL/0 when not given. */
const given_option_t* cli_option(const invocation_t* inv, const char* name);
const char* cli_value(const invocation_t* inv, const char* name);
bool cli_flag(const invocation_t* inv, const char* name);

/* "2s", "150ms", "10m" -> milliseconds; -1 when malformed. */
int64_t cli_duration_ms(const char* text);
/* "512", "64K", "4G" (powers of 1024) -> bytes; -1 when malformed. */
int64_t cli_size_bytes(const char* text);

/* Success: the envelope (json), records or a member (jsonl), or the text
 * rendering `text` (which may be NULL to render `data` generically). Takes
 * `data`. Returns the exit code (0), or 1 after a rendering failure. */
int cli_emit_success(const invocation_t* inv, json_t* data, const char* text);
/* Failure: an envelope (json/jsonl) or "maelys-warden: [CODE] message" and
 * "Hint: ..." (text) on stderr. Returns 1. */
int cli_emit_failure(const invocation_t* inv, const cli_error_t* err);

/* The describe document: "catalog", "summary" (optionally filtered by
 * prefix) or "command". NULL with err filled when nothing matches. */
json_t* cli_describe(const char* kind, const char* id_or_prefix,
                     cli_error_t* err);
/* The help text of the program (cmd NULL) or of one command. */
char* cli_help_text(const command_def_t* cmd);
/* A completion script for bash, zsh or fish. */
char* cli_completion_script(const char* shell);
/* Candidates for the words typed so far (the last one may be partial). */
json_t* cli_complete(char** words, size_t count);
/* The man page, in roff, from the catalog. */
void cli_man_page(FILE* out, const char* version);

const char* cli_version(void);

#endif
