/*
 * The catalog of maelys-warden: the single source of its parser, --help,
 * describe, completion and man page (agent-cli/v2 §10).
 */
#ifndef MAELYS_WARDEN_CATALOG_H
#define MAELYS_WARDEN_CATALOG_H

#include <stdbool.h>
#include <stddef.h>

#define WARDEN_PROGRAM "maelys-warden"
#define WARDEN_PRODUCT "Maelys Warden"
#define WARDEN_CONTRACT "agent-cli/v2"
#define WARDEN_FRAMEWORK "maelys-warden catalog (C)"

typedef enum value_kind {
  KIND_NONE = 0, /* a flag */
  KIND_STRING,
  KIND_PATH,
  KIND_ABSOLUTE_PATH,
  KIND_CHOICE,
  KIND_DURATION,
  KIND_SIZE,
  KIND_UNSIGNED
} value_kind_t;

typedef struct option_def {
  const char* name; /* "--ro" */
  const char* summary;
  const char* arg_name; /* NULL for a flag */
  value_kind_t kind;
  const char* const* choices; /* KIND_CHOICE, NULL-terminated */
  const char* default_text;
  const char* pattern; /* KIND_STRING: a POSIX ERE the value must match */
  bool repeatable;
  bool hidden;
  const char* const* requires;  /* NULL-terminated option names */
  const char* const* conflicts; /* option names or operand names */
} option_def_t;

typedef struct operand_def {
  const char* name;
  const char* summary;
  bool required;
  bool variadic;
  value_kind_t kind;
  const char* const* choices;
} operand_def_t;

typedef struct constraint_def {
  const char* kind; /* "requires", "at-most-one", "exactly-one" */
  const char* const* options;
} constraint_def_t;

typedef struct example_def {
  const char* const* words;
  const char* summary;
} example_def_t;

typedef struct command_def {
  const char* id;
  const char* word; /* the single word of its pattern */
  const char* usage;
  const char* purpose;
  const char* effect; /* "read" or "stream" */
  const char* output_mode;
  bool hidden;
  const option_def_t* const* options; /* NULL-terminated */
  const operand_def_t* operands;
  size_t operand_count;
  const constraint_def_t* constraints;
  size_t constraint_count;
  const example_def_t* examples;
  size_t example_count;
  const char* output_schema; /* JSON text */
  const char* details;       /* longer help text, may be NULL */
} command_def_t;

extern const option_def_t* const warden_global_options[];
extern const command_def_t* const warden_commands[];
extern const char* const warden_invariants[];
/* catalog-orch.c */
extern const command_def_t warden_cmd_verify, warden_cmd_agent;
/* catalog-ops.c */
extern const command_def_t warden_cmd_ps, warden_cmd_stop, warden_cmd_receipts;
extern const option_def_t warden_o_state_dir;

const command_def_t* catalog_command_by_id(const char* id);
const command_def_t* catalog_command_by_word(const char* word);
/* A command's own option or a global option of that name, or NULL. */
const option_def_t* catalog_option(const command_def_t* cmd, const char* name);
bool catalog_is_global(const option_def_t* opt);
/* suggest.c: the option of `cmd` (or global) or the command word `typed`
 * was most likely meant to be, or NULL when none is close. */
const char* cli_suggest_option(const command_def_t* cmd, const char* typed);
const char* cli_suggest_command(const char* typed);
const char* catalog_kind_name(value_kind_t kind);

/* Options that choose or shape what goes to stdout: refused by a stream
 * command (§9). */
bool catalog_is_rendering_option(const char* name);

#endif
