/*
 * The parser: every rule it enforces comes from the catalog. Errors are
 * reported in the causal order of agent-cli/v2 §8, and nothing runs before
 * the whole line has been judged.
 */
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

int cli_fail(cli_error_t* err, const char* code, const char* hint,
             const char* fmt, ...) {
  err->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  snprintf(err->hint, sizeof err->hint, "%s", hint ? hint : "");
  return -1;
}

/* One or more number+unit groups, largest unit first and each at most once:
 * "90s", "1m30s", "1h2m3s500ms", "2d". */
int64_t cli_duration_ms(const char* text) {
  static const struct {
    const char* unit;
    unsigned long long ms;
  } units[] = {
      {"d", 86400000}, {"h", 3600000}, {"ms", 1}, {"m", 60000}, {"s", 1000}};
  /* The order a combination must follow (ms after s, m after h...). */
  static const int rank[] = {0, 1, 4, 2, 3};
  unsigned long long total = 0;
  int last = -1;
  const char* p = text;
  if (*p == '\0')
    return -1;
  while (*p != '\0') {
    if (*p < '0' || *p > '9')
      return -1;
    char* end;
    errno = 0;
    unsigned long long v = strtoull(p, &end, 10);
    if (errno != 0)
      return -1;
    size_t u = 0;
    while (u < sizeof units / sizeof units[0] &&
           strncmp(end, units[u].unit, strlen(units[u].unit)) != 0)
      u++;
    if (u == sizeof units / sizeof units[0] || rank[u] <= last)
      return -1;
    last = rank[u];
    if (v > (unsigned long long)INT64_MAX / units[u].ms ||
        total > (unsigned long long)INT64_MAX - v * units[u].ms)
      return -1;
    total += v * units[u].ms;
    p = end + strlen(units[u].unit);
  }
  return (int64_t)total;
}

static bool matches(const char* pattern, const char* value) {
  regex_t re;
  if (regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB) != 0)
    return false;
  bool ok = regexec(&re, value, 0, NULL, 0) == 0;
  regfree(&re);
  return ok;
}

int64_t cli_size_bytes(const char* v) {
  size_t n = strlen(v);
  size_t digits = strspn(v, "0123456789");
  if (n == 0 || digits == 0 ||
      !(digits == n || (digits + 1 == n && strchr("KMGT", v[n - 1]) != NULL)))
    return -1;
  errno = 0;
  unsigned long long x = strtoull(v, NULL, 10);
  if (errno != 0)
    return -1;
  unsigned shift = digits == n       ? 0
                   : v[n - 1] == 'K' ? 10
                   : v[n - 1] == 'M' ? 20
                   : v[n - 1] == 'G' ? 30
                                     : 40;
  if (x > ((unsigned long long)INT64_MAX >> shift))
    return -1;
  return (int64_t)(x << shift);
}

static bool valid_size(const char* v) {
  return cli_size_bytes(v) >= 0;
}

/* What one value says alone: its kind, choice or pattern. */
static int check_value(const char* owner, value_kind_t kind,
                       const char* const* choices, const char* pattern,
                       const char* value, const char* command,
                       cli_error_t* err) {
  err->command = command;
  switch (kind) {
  case KIND_PATH:
    if (value[0] == '\0')
      return cli_fail(err, "VALIDATION_FAILED", "Give a non-empty path.",
                      "%s: the path is empty", owner);
    break;
  case KIND_ABSOLUTE_PATH:
    if (value[0] != '/')
      return cli_fail(err, "VALIDATION_FAILED", "Give an absolute path.",
                      "%s: '%s' is not an absolute path", owner, value);
    break;
  case KIND_CHOICE: {
    for (size_t i = 0; choices != NULL && choices[i] != NULL; i++)
      if (strcmp(choices[i], value) == 0)
        return 0;
    char list[256] = "";
    for (size_t i = 0; choices != NULL && choices[i] != NULL; i++) {
      strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
      strncat(list, choices[i], sizeof list - strlen(list) - 1);
    }
    return cli_fail(err, "VALIDATION_FAILED", "Use one of the listed values.",
                    "%s: '%s' is not one of %s", owner, value, list);
  }
  case KIND_DURATION:
    if (cli_duration_ms(value) < 0)
      return cli_fail(err, "VALIDATION_FAILED",
                      "Write a number with a unit (ms, s, m, h or d), or "
                      "several, largest first: 2s, 1m30s, 1h5m.",
                      "%s: '%s' is not a duration", owner, value);
    break;
  case KIND_SIZE:
    if (!valid_size(value))
      return cli_fail(err, "VALIDATION_FAILED",
                      "Write a number with an optional K, M, G or T suffix.",
                      "%s: '%s' is not a size", owner, value);
    break;
  case KIND_UNSIGNED:
    if (value[0] == '\0' || strspn(value, "0123456789") != strlen(value))
      return cli_fail(err, "VALIDATION_FAILED", "Write a whole number.",
                      "%s: '%s' is not an unsigned integer", owner, value);
    break;
  case KIND_STRING:
  case KIND_NONE:
    break;
  }
  if (pattern != NULL && !matches(pattern, value))
    return cli_fail(err, "VALIDATION_FAILED", NULL,
                    "%s: '%s' does not match %s", owner, value, pattern);
  return 0;
}

static given_option_t* find_given(invocation_t* inv, const option_def_t* def) {
  for (size_t i = 0; i < inv->given_count; i++)
    if (inv->given[i].def == def)
      return &inv->given[i];
  return NULL;
}

const given_option_t* cli_option(const invocation_t* inv, const char* name) {
  for (size_t i = 0; i < inv->given_count; i++)
    if (strcmp(inv->given[i].def->name, name) == 0)
      return &inv->given[i];
  return NULL;
}

const char* cli_value(const invocation_t* inv, const char* name) {
  const given_option_t* g = cli_option(inv, name);
  return g && g->count > 0 ? g->values[g->count - 1] : NULL;
}

bool cli_flag(const invocation_t* inv, const char* name) {
  const given_option_t* g = cli_option(inv, name);
  return g != NULL && g->flag;
}

/* An option counts as present when given, and for a flag when true. */
static bool present(const invocation_t* inv, const char* name) {
  const given_option_t* g = cli_option(inv, name);
  if (g == NULL)
    return false;
  return g->def->arg_name != NULL || g->flag;
}

static bool operand_present(const invocation_t* inv, const char* name) {
  const command_def_t* c = inv->cmd;
  for (size_t i = 0; i < c->operand_count; i++)
    if (strcmp(c->operands[i].name, name) == 0)
      return inv->operand_count > i;
  return false;
}

static int add_value(given_option_t* g, const char* value) {
  char** v = realloc(g->values, (g->count + 1) * sizeof *v);
  if (v == NULL)
    return -1;
  g->values = v;
  g->values[g->count] = strdup(value);
  if (g->values[g->count] == NULL)
    return -1;
  g->count++;
  return 0;
}

void cli_invocation_free(invocation_t* inv) {
  for (size_t i = 0; i < inv->given_count; i++) {
    for (size_t k = 0; k < inv->given[i].count; k++)
      free(inv->given[i].values[k]);
    free(inv->given[i].values);
  }
  for (size_t i = 0; i < inv->operand_count; i++)
    free(inv->operands[i]);
  free(inv->operands);
  memset(inv, 0, sizeof *inv);
}

/* Is this word an option of some kind (rather than an operand)? A lone "-"
 * is an operand. */
static bool is_option_word(const char* w) {
  return w[0] == '-' && w[1] == '-' && w[2] != '\0';
}

/* Finds the command: the first word that is not a global option (or a
 * global option's value). */
static int resolve(int argc, char** argv, invocation_t* inv, int* cmd_index,
                   cli_error_t* err) {
  err->command = "unknown";
  *cmd_index = -1;
  if (argc >= 2 && strcmp(argv[1], "--help") == 0) {
    inv->cmd = catalog_command_by_id("help");
    inv->help = false;
    *cmd_index = 1;
    return 0;
  }
  if (argc >= 2 && strcmp(argv[1], "--version") == 0) {
    inv->cmd = catalog_command_by_id("version");
    *cmd_index = 1;
    return 0;
  }
  for (int i = 1; i < argc; i++) {
    const char* w = argv[i];
    if (strcmp(w, "--") == 0)
      break;
    if (is_option_word(w)) {
      char name[128];
      snprintf(name, sizeof name, "%s", w);
      char* eq = strchr(name, '=');
      if (eq)
        *eq = '\0';
      const option_def_t* o = catalog_option(NULL, name);
      if (o != NULL && o->arg_name != NULL && eq == NULL)
        i++; /* its value */
      continue;
    }
    inv->cmd = catalog_command_by_word(w);
    if (inv->cmd == NULL) {
      const char* near = cli_suggest_command(w);
      char hint[256];
      snprintf(hint, sizeof hint,
               "%s%s%sRun 'maelys-warden help' to list the commands.",
               near ? "Did you mean '" : "", near ? near : "",
               near ? "'? " : "");
      return cli_fail(err, "INVALID_COMMAND", hint, "unknown command '%s'", w);
    }
    *cmd_index = i;
    return 0;
  }
  /* No command word at all: the help. */
  inv->cmd = catalog_command_by_id("help");
  return 0;
}

static int take_option(invocation_t* inv, int argc, char** argv, int* i,
                       cli_error_t* err) {
  const command_def_t* cmd = inv->cmd;
  const char* word = argv[*i];
  char name[128];
  snprintf(name, sizeof name, "%s", word);
  char* eq = strchr(name, '=');
  const char* inline_value = NULL;
  if (eq != NULL) {
    *eq = '\0';
    inline_value = word + (eq - name) + 1;
  }
  err->command = cmd->id;
  const option_def_t* def = catalog_option(cmd, name);
  if (def == NULL) {
    if (strcmp(name, "--version") == 0)
      return cli_fail(err, "VALIDATION_FAILED",
                      "Use 'maelys-warden --version' or 'maelys-warden "
                      "version' on its own.",
                      "--version is not an option of command %s", cmd->id);
    const char* near = cli_suggest_option(cmd, name);
    char hint[256];
    snprintf(hint, sizeof hint,
             "%s%s%sRun 'maelys-warden help %s' for its options.",
             near ? "Did you mean " : "", near ? near : "", near ? "? " : "",
             cmd->id);
    return cli_fail(err, "VALIDATION_FAILED", hint,
                    "%s is not an option of command %s", name, cmd->id);
  }
  given_option_t* g = find_given(inv, def);
  if (g != NULL && !def->repeatable)
    return cli_fail(err, "VALIDATION_FAILED", "Give each option at most once.",
                    "%s is given more than once", name);
  if (g == NULL) {
    if (inv->given_count >= sizeof inv->given / sizeof inv->given[0])
      return cli_fail(err, "VALIDATION_FAILED", NULL, "too many options");
    g = &inv->given[inv->given_count++];
    memset(g, 0, sizeof *g);
    g->def = def;
  }
  if (def->arg_name == NULL) {
    if (inline_value == NULL || strcmp(inline_value, "true") == 0)
      g->flag = true;
    else if (strcmp(inline_value, "false") == 0)
      g->flag = false;
    else
      return cli_fail(err, "VALIDATION_FAILED",
                      "A flag takes no value, or =true or =false.",
                      "%s is a flag; '%s' is not true or false", name,
                      inline_value);
    return 0;
  }
  const char* value = inline_value;
  if (value == NULL) {
    /* A value that starts with -- is still a value (§3). */
    if (*i + 1 >= argc)
      return cli_fail(err, "VALIDATION_FAILED", NULL, "%s needs a %s", name,
                      def->arg_name);
    value = argv[++*i];
  }
  if (check_value(name, def->kind, def->choices, def->pattern, value, cmd->id,
                  err) != 0)
    return -1;
  if (add_value(g, value) != 0)
    return cli_fail(err, "UNEXPECTED", NULL, "out of memory");
  return 0;
}

/* What the line says as a whole (§8 step 4). */
static int check_line(invocation_t* inv, cli_error_t* err) {
  const command_def_t* cmd = inv->cmd;
  err->command = cmd->id;
  for (size_t i = 0; i < inv->given_count; i++) {
    const option_def_t* d = inv->given[i].def;
    if (!present(inv, d->name))
      continue;
    for (size_t k = 0; d->requires != NULL && d->requires[k] != NULL; k++)
      if (!present(inv, d->requires[k]))
        return cli_fail(err, "VALIDATION_FAILED", NULL, "%s requires %s",
                        d->name, d->requires[k]);
    for (size_t k = 0; d->conflicts != NULL && d->conflicts[k] != NULL; k++) {
      const char* c = d->conflicts[k];
      bool clash =
          strncmp(c, "--", 2) == 0 ? present(inv, c) : operand_present(inv, c);
      if (clash)
        return cli_fail(err, "VALIDATION_FAILED", NULL,
                        "%s cannot be combined with %s", d->name, c);
    }
  }
  for (size_t i = 0; i < cmd->constraint_count; i++) {
    const constraint_def_t* c = &cmd->constraints[i];
    size_t n = 0;
    char names[256] = "";
    for (size_t k = 0; c->options[k] != NULL; k++) {
      n += present(inv, c->options[k]);
      strncat(names, k ? ", " : "", sizeof names - strlen(names) - 1);
      strncat(names, c->options[k], sizeof names - strlen(names) - 1);
    }
    if (strcmp(c->kind, "exactly-one") == 0 && n != 1)
      return cli_fail(err, "VALIDATION_FAILED",
                      "Choose exactly one policy source.",
                      n == 0 ? "exactly one of %s is required"
                             : "only one of %s may be given",
                      names);
    if (strcmp(c->kind, "at-most-one") == 0 && n > 1)
      return cli_fail(err, "VALIDATION_FAILED", NULL,
                      "at most one of %s may be given", names);
    if (strcmp(c->kind, "requires") == 0 && present(inv, c->options[0])) {
      for (size_t k = 1; c->options[k] != NULL; k++)
        if (!present(inv, c->options[k]))
          return cli_fail(err, "VALIDATION_FAILED", NULL, "%s requires %s",
                          c->options[0], c->options[k]);
    }
  }
  size_t required = 0;
  bool variadic = false;
  for (size_t i = 0; i < cmd->operand_count; i++) {
    required += cmd->operands[i].required;
    variadic = variadic || cmd->operands[i].variadic;
  }
  if (inv->operand_count < required) {
    char hint[256];
    snprintf(hint, sizeof hint, "Run 'maelys-warden help %s' for its usage.",
             cmd->id);
    return cli_fail(err, "VALIDATION_FAILED", hint, "%s needs %s", cmd->id,
                    cmd->operands[inv->operand_count].name);
  }
  if (!variadic && inv->operand_count > cmd->operand_count)
    return cli_fail(err, "VALIDATION_FAILED", NULL,
                    "%s takes %zu operand(s), got %zu ('%s')", cmd->id,
                    cmd->operand_count, inv->operand_count,
                    inv->operands[cmd->operand_count]);
  for (size_t i = 0; i < inv->operand_count; i++) {
    size_t k = i < cmd->operand_count ? i : cmd->operand_count - 1;
    const operand_def_t* o = &cmd->operands[k];
    if (check_value(o->name, o->kind, o->choices, NULL, inv->operands[i],
                    cmd->id, err) != 0)
      return -1;
  }
  return 0;
}

/* Rendering constraints (§8 step 6). */
static int check_rendering(invocation_t* inv, cli_error_t* err) {
  const command_def_t* cmd = inv->cmd;
  err->command = cmd->id;
  const char* format = cli_value(inv, "--format");
  bool json_flag = cli_flag(inv, "--json");
  if (strcmp(cmd->effect, "stream") == 0) {
    /* A stream command keeps stdout for the payload: the options that
     * shape stdout are refused (§9). */
    for (size_t i = 0; i < inv->given_count; i++)
      if (catalog_is_rendering_option(inv->given[i].def->name))
        return cli_fail(err, "VALIDATION_FAILED",
                        "Set MAELYS_CLI_FORMAT=json to have failures as "
                        "JSON envelopes.",
                        "%s is a stream command: %s is refused", cmd->id,
                        inv->given[i].def->name);
  }
  if (json_flag && format != NULL && strcmp(format, "json") != 0)
    return cli_fail(err, "VALIDATION_FAILED", NULL,
                    "--json contradicts --format %s", format);
  const char* env = getenv("MAELYS_CLI_FORMAT");
  if (format == NULL && json_flag)
    format = "json";
  if (format == NULL && env != NULL && env[0] != '\0') {
    if (strcmp(env, "text") != 0 && strcmp(env, "json") != 0 &&
        strcmp(env, "jsonl") != 0)
      return cli_fail(err, "VALIDATION_FAILED",
                      "Set MAELYS_CLI_FORMAT to text, json or jsonl.",
                      "MAELYS_CLI_FORMAT='%s' is not a format", env);
    format = env;
  }
  inv->format = format == NULL                 ? FORMAT_TEXT
                : strcmp(format, "json") == 0  ? FORMAT_JSON
                : strcmp(format, "jsonl") == 0 ? FORMAT_JSONL
                                               : FORMAT_TEXT;
  const given_option_t* pretty = cli_option(inv, "--pretty");
  inv->compact = cli_flag(inv, "--compact") || (pretty && !pretty->flag) ||
                 inv->format == FORMAT_JSONL;
  inv->field = cli_value(inv, "--field");
  inv->verbose = cli_flag(inv, "--verbose");
  if (inv->field != NULL && inv->format == FORMAT_JSON)
    return cli_fail(err, "VALIDATION_FAILED",
                    "Use --field with --format text or jsonl.",
                    "--field cannot be combined with --format json: the "
                    "envelope's data follows the command's outputSchema");
  if (inv->format == FORMAT_JSONL && inv->field == NULL &&
      strcmp(cmd->output_mode, "json-records") != 0 &&
      strcmp(cmd->effect, "stream") != 0)
    return cli_fail(err, "VALIDATION_FAILED",
                    "Use --format json, or jsonl with --field.",
                    "%s does not produce records: --format jsonl needs "
                    "--field",
                    cmd->id);
  return 0;
}

void cli_guess_format(invocation_t* inv) {
  const char* f = cli_value(inv, "--format");
  if (f == NULL && cli_flag(inv, "--json"))
    f = "json";
  if (f == NULL || (strcmp(f, "json") != 0 && strcmp(f, "jsonl") != 0 &&
                    strcmp(f, "text") != 0))
    f = getenv("MAELYS_CLI_FORMAT");
  inv->format = f == NULL                 ? FORMAT_TEXT
                : strcmp(f, "json") == 0  ? FORMAT_JSON
                : strcmp(f, "jsonl") == 0 ? FORMAT_JSONL
                                          : FORMAT_TEXT;
  const given_option_t* pretty = cli_option(inv, "--pretty");
  inv->compact = cli_flag(inv, "--compact") || (pretty && !pretty->flag) ||
                 inv->format == FORMAT_JSONL;
}

int cli_parse(int argc, char** argv, invocation_t* inv, cli_error_t* err) {
  memset(inv, 0, sizeof *inv);
  memset(err, 0, sizeof *err);
  int cmd_index;
  if (resolve(argc, argv, inv, &cmd_index, err) != 0)
    return -1;
  const command_def_t* cmd = inv->cmd;
  bool operands_only = false;
  for (int i = 1; i < argc; i++) {
    if (i == cmd_index)
      continue;
    const char* w = argv[i];
    if (!operands_only && strcmp(w, "--") == 0) {
      operands_only = true;
      continue;
    }
    if (!operands_only && is_option_word(w)) {
      if (take_option(inv, argc, argv, &i, err) != 0)
        return -1;
      continue;
    }
    /* Kept NULL-terminated: run hands them over as the program's argv. */
    char** ops = realloc(inv->operands, (inv->operand_count + 2) * sizeof *ops);
    if (ops == NULL || (ops[inv->operand_count] = strdup(w)) == NULL) {
      if (ops != NULL)
        inv->operands = ops;
      err->command = cmd->id;
      return cli_fail(err, "UNEXPECTED", NULL, "out of memory");
    }
    inv->operands = ops;
    inv->operand_count++;
    inv->operands[inv->operand_count] = NULL;
    /* After the program, everything is the program's (run's operands). */
    if (strcmp(cmd->effect, "stream") == 0)
      operands_only = true;
  }
  if (cli_flag(inv, "--help")) {
    /* Asking how a command is used never performs it, and from here on the
     * line is rendered as help is (§6): help's rendering rules apply. */
    inv->help = true;
    inv->cmd = catalog_command_by_id("help");
    int r = check_rendering(inv, err);
    inv->cmd = cmd;
    if (r != 0)
      err->command = cmd->id;
    return r;
  }
  if (check_line(inv, err) != 0)
    return -1;
  return check_rendering(inv, err);
}
