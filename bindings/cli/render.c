/*
 * Renderings derived from the catalog: envelopes, the text and pipe forms,
 * describe, help, completion, candidates and the man page.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#include "maelys/executor.h"

const char* cli_version(void) {
  return maelys_executor_version();
}

/* ----------------------------------------------------------- text growth */

typedef struct text {
  char* data;
  size_t len, cap;
} text_t;

static void addf(text_t* t, const char* fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void addf(text_t* t, const char* fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) {
    va_end(ap2);
    return;
  }
  if (t->len + (size_t)n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 1024;
    while (t->len + (size_t)n + 1 > cap)
      cap *= 2;
    char* d = realloc(t->data, cap);
    if (d == NULL) {
      va_end(ap2);
      return;
    }
    t->data = d;
    t->cap = cap;
  }
  vsnprintf(t->data + t->len, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  t->len += (size_t)n;
}

/* ------------------------------------------------------------ envelopes */

static size_t dump_flags(const invocation_t* inv) {
  return inv->compact ? JSON_COMPACT | JSON_PRESERVE_ORDER
                      : JSON_INDENT(2) | JSON_PRESERVE_ORDER;
}

static const char* command_id(const invocation_t* inv) {
  return inv->help ? "help" : inv->cmd ? inv->cmd->id : "unknown";
}

static void put_json(FILE* out, json_t* v, size_t flags) {
  char* s = json_dumps(v, flags | JSON_ENCODE_ANY);
  if (s != NULL) {
    fputs(s, out);
    fputc('\n', out);
    free(s);
  }
}

/* A value in the pipe rendering (§7): strings escaped without quotes, other
 * values compact JSON. */
static void pipe_value(text_t* t, json_t* v) {
  if (v == NULL)
    return;
  if (!json_is_string(v)) {
    char* s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    addf(t, "%s", s ? s : "");
    free(s);
    return;
  }
  for (const unsigned char* p = (const unsigned char*)json_string_value(v); *p;
       p++) {
    if (*p == '\\')
      addf(t, "\\\\");
    else if (*p == '\t')
      addf(t, "\\t");
    else if (*p == '\r')
      addf(t, "\\r");
    else if (*p == '\n')
      addf(t, "\\n");
    else if (*p < 0x20 || *p == 0x7f)
      addf(t, "\\u%04x", *p);
    else
      addf(t, "%c", *p);
  }
}

static int compare_strings(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

/* Rows of objects: the sorted union of their member names as columns. */
static void pipe_rows(text_t* t, json_t* array) {
  const char* cols[128];
  size_t ncols = 0;
  size_t i;
  json_t* row;
  json_array_foreach(array, i, row) {
    const char* key;
    json_t* v;
    json_object_foreach(row, key, v) {
      bool seen = false;
      for (size_t c = 0; c < ncols; c++)
        seen = seen || strcmp(cols[c], key) == 0;
      if (!seen && ncols < 128)
        cols[ncols++] = key;
    }
  }
  qsort(cols, ncols, sizeof cols[0], compare_strings);
  json_array_foreach(array, i, row) {
    for (size_t c = 0; c < ncols; c++) {
      if (c)
        addf(t, "\t");
      pipe_value(t, json_object_get(row, cols[c]));
    }
    addf(t, "\n");
  }
}

static void pipe_member(text_t* t, json_t* v) {
  if (json_is_array(v)) {
    bool objects = json_array_size(v) > 0;
    size_t i;
    json_t* e;
    json_array_foreach(v, i, e) objects = objects && json_is_object(e);
    if (objects) {
      pipe_rows(t, v);
      return;
    }
    json_array_foreach(v, i, e) {
      pipe_value(t, e);
      addf(t, "\n");
    }
    return;
  }
  if (json_is_object(v)) {
    json_t* one = json_array();
    json_array_append(one, v);
    pipe_rows(t, one);
    json_decref(one);
    return;
  }
  pipe_value(t, v);
  addf(t, "\n");
}

int cli_emit_success(const invocation_t* inv, json_t* data, const char* text) {
  if (inv->field != NULL) {
    json_t* member = json_object_get(data, inv->field);
    if (member == NULL) {
      cli_error_t err = {0};
      err.command = command_id(inv);
      cli_fail(&err, "VALIDATION_FAILED",
               "Name a top-level member of the command's data.",
               "--field %s: the data has no member '%s'", inv->field,
               inv->field);
      json_decref(data);
      return cli_emit_failure(inv, &err);
    }
    if (inv->format == FORMAT_JSONL) {
      if (json_is_array(member)) {
        size_t i;
        json_t* e;
        json_array_foreach(member, i, e) put_json(stdout, e, JSON_COMPACT);
      } else {
        put_json(stdout, member, JSON_COMPACT);
      }
    } else {
      text_t t = {0};
      pipe_member(&t, member);
      if (t.data)
        fputs(t.data, stdout);
      free(t.data);
    }
    json_decref(data);
    return 0;
  }
  if (inv->format == FORMAT_JSONL) {
    /* Records, one compact line each. */
    json_t* records = json_object_get(data, "records");
    size_t i;
    json_t* e;
    json_array_foreach(records, i, e) put_json(stdout, e, JSON_COMPACT);
    json_decref(data);
    return 0;
  }
  if (inv->format == FORMAT_JSON) {
    json_t* env =
        json_pack("{s:i, s:s, s:s, s:b, s:i, s:o}", "schemaVersion", 2,
                  "contract", WARDEN_CONTRACT, "command", command_id(inv), "ok",
                  1, "exitCode", 0, "data", data);
    put_json(stdout, env, dump_flags(inv));
    json_decref(env);
    return 0;
  }
  if (text != NULL) {
    fputs(text, stdout);
    if (text[0] != '\0' && text[strlen(text) - 1] != '\n')
      fputc('\n', stdout);
  } else {
    put_json(stdout, data, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  }
  json_decref(data);
  return 0;
}

int cli_emit_failure(const invocation_t* inv, const cli_error_t* err) {
  fflush(stdout);
  const char* cmd = err->command ? err->command : "unknown";
  bool json = inv != NULL &&
              (inv->format == FORMAT_JSON || inv->format == FORMAT_JSONL);
  if (json) {
    json_t* e = json_pack("{s:s, s:s}", "code", err->code, "message",
                          err->message[0] ? err->message : "failed");
    if (err->hint[0])
      json_object_set_new(e, "hint", json_string(err->hint));
    json_t* env = json_pack("{s:i, s:s, s:s, s:b, s:i, s:o}", "schemaVersion",
                            2, "contract", WARDEN_CONTRACT, "command", cmd,
                            "ok", 0, "exitCode", 1, "error", e);
    put_json(stderr, env,
             inv && !inv->compact ? JSON_INDENT(2) | JSON_PRESERVE_ORDER
                                  : JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(env);
  } else {
    fprintf(stderr, WARDEN_PROGRAM ": [%s] %s\n", err->code, err->message);
    if (err->hint[0])
      fprintf(stderr, "Hint: %s\n", err->hint);
  }
  return 1;
}

/* -------------------------------------------------------------- describe */

static json_t* strings(const char* const* list) {
  json_t* a = json_array();
  for (size_t i = 0; list != NULL && list[i] != NULL; i++)
    json_array_append_new(a, json_string(list[i]));
  return a;
}

static json_t* option_json(const option_def_t* o) {
  json_t* j = json_pack("{s:s, s:b, s:b, s:s, s:o, s:o}", "long", o->name,
                        "required", 0, "repeatable", o->repeatable, "summary",
                        o->summary, "requires", strings(o->requires),
                        "conflictsWith", strings(o->conflicts));
  if (o->arg_name != NULL) {
    json_t* arg = json_pack("{s:s, s:s}", "name", o->arg_name, "type",
                            catalog_kind_name(o->kind));
    if (o->choices)
      json_object_set_new(arg, "choices", strings(o->choices));
    if (o->pattern)
      json_object_set_new(arg, "pattern", json_string(o->pattern));
    json_object_set_new(j, "argument", arg);
  }
  if (o->default_text)
    json_object_set_new(j, "default", json_string(o->default_text));
  if (o->hidden)
    json_object_set_new(j, "hidden", json_true());
  return j;
}

static json_t* descriptor(const command_def_t* c, bool full) {
  json_t* operands = json_array();
  for (size_t i = 0; i < c->operand_count; i++) {
    const operand_def_t* o = &c->operands[i];
    json_t* j =
        json_pack("{s:s, s:b, s:b, s:s}", "name", o->name, "required",
                  o->required, "variadic", o->variadic, "summary", o->summary);
    json_object_set_new(j, "type", json_string(catalog_kind_name(o->kind)));
    if (o->choices)
      json_object_set_new(j, "choices", strings(o->choices));
    json_array_append_new(operands, j);
  }
  json_t* options = json_array();
  for (size_t i = 0; c->options[i] != NULL; i++)
    json_array_append_new(options, option_json(c->options[i]));
  json_t* constraints = json_array();
  for (size_t i = 0; i < c->constraint_count; i++)
    json_array_append_new(
        constraints, json_pack("{s:s, s:o}", "kind", c->constraints[i].kind,
                               "options", strings(c->constraints[i].options)));
  json_t* input = json_pack("{s:s, s:o, s:o, s:o, s:b}", "synopsis", c->usage,
                            "operands", operands, "options", options,
                            "constraints", constraints, "passthrough", 0);
  json_t* d = json_pack("{s:s, s:[s], s:s, s:s, s:s, s:s, s:b, s:b, s:b, s:o}",
                        "id", c->id, "pattern", c->word, "usage", c->usage,
                        "purpose", c->purpose, "effect", c->effect,
                        "outputMode", c->output_mode, "external", 0, "hidden",
                        c->hidden, "available", 1, "input", input);
  if (full) {
    if (c->example_count > 0) {
      json_t* ex = json_array();
      for (size_t i = 0; i < c->example_count; i++)
        json_array_append_new(ex, json_pack("{s:o, s:s}", "words",
                                            strings(c->examples[i].words),
                                            "summary", c->examples[i].summary));
      json_object_set_new(d, "examples", ex);
    }
    json_object_set_new(d, "outputSchema",
                        json_loads(c->output_schema, 0, NULL));
    json_object_set_new(d, "exitCodes",
                        json_pack("{s:s, s:s, s:s}", "0", "command completed",
                                  "1", "execution failed", "2",
                                  "valid report with violations"));
  }
  return d;
}

json_t* cli_describe(const char* kind, const char* arg, cli_error_t* err) {
  json_t* doc =
      json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:i, s:s}", "schemaVersion", 1,
                "kind", kind, "program", WARDEN_PROGRAM, "product",
                WARDEN_PRODUCT, "version", cli_version(), "contract",
                WARDEN_CONTRACT, "cliApi", 1, "framework", WARDEN_FRAMEWORK);
  json_t* commands = json_array();
  bool catalog = strcmp(kind, "catalog") == 0;
  bool summary = strcmp(kind, "summary") == 0;
  for (size_t i = 0; warden_commands[i] != NULL; i++) {
    const command_def_t* c = warden_commands[i];
    if (strcmp(kind, "command") == 0 && strcmp(c->id, arg) != 0)
      continue;
    if (summary && arg != NULL) {
      size_t n = strlen(arg);
      if (!(strcmp(c->id, arg) == 0 ||
            (strncmp(c->id, arg, n) == 0 && c->id[n] == '.')))
        continue;
    }
    json_array_append_new(commands, descriptor(c, !summary));
  }
  if (json_array_size(commands) == 0) {
    json_decref(doc);
    json_decref(commands);
    cli_fail(err, "INVALID_COMMAND", "Run 'maelys-warden describe --summary'.",
             summary ? "no command matches the prefix '%s'"
                     : "unknown command '%s'",
             arg ? arg : "");
    return NULL;
  }
  json_object_set_new(doc, "commands", commands);
  if (summary && arg != NULL)
    json_object_set_new(
        doc, "filter",
        json_pack("{s:s, s:s}", "kind", "command-prefix", "value", arg));
  if (catalog) {
    json_t* globals = json_array();
    for (size_t i = 0; warden_global_options[i] != NULL; i++)
      json_array_append_new(globals, option_json(warden_global_options[i]));
    json_object_set_new(doc, "globalOptions", globals);
    json_object_set_new(doc, "invariants", strings(warden_invariants));
    json_object_set_new(
        doc, "output",
        json_pack("{s:s, s:i, s:s, s:s}", "contract", WARDEN_CONTRACT,
                  "schemaVersion", 2, "stdout",
                  "success envelopes; run: only the payload's bytes", "stderr",
                  "diagnostics and failure envelopes; run: also the payload's "
                  "stderr"));
  }
  return doc;
}

/* ------------------------------------------------------------------ help */

static void help_option(text_t* t, const option_def_t* o) {
  char left[96];
  if (o->arg_name)
    snprintf(left, sizeof left, "%s %s", o->name, o->arg_name);
  else
    snprintf(left, sizeof left, "%s", o->name);
  addf(t, "  %-28s %s", left, o->summary);
  if (o->choices) {
    addf(t, " (");
    for (size_t i = 0; o->choices[i]; i++)
      addf(t, "%s%s", i ? "|" : "", o->choices[i]);
    addf(t, ")");
  }
  if (o->default_text)
    addf(t, " [default: %s]", o->default_text);
  addf(t, "\n");
}

char* cli_help_text(const command_def_t* cmd) {
  text_t t = {0};
  if (cmd == NULL) {
    addf(&t, "%s %s: run untrusted programs in operating-system sandboxes.\n\n",
         WARDEN_PROGRAM, cli_version());
    addf(&t, "Usage: %s COMMAND [OPTIONS]\n\nCommands:\n", WARDEN_PROGRAM);
    for (size_t i = 0; warden_commands[i]; i++)
      if (!warden_commands[i]->hidden)
        addf(&t, "  %-12s %s\n", warden_commands[i]->word,
             warden_commands[i]->purpose);
    addf(&t, "\nGlobal options:\n");
    for (size_t i = 0; warden_global_options[i]; i++)
      help_option(&t, warden_global_options[i]);
    addf(&t, "\nRun '%s help COMMAND_ID' for a command's options.\n",
         WARDEN_PROGRAM);
    return t.data;
  }
  addf(&t, "Usage: %s %s\n\n%s\n", WARDEN_PROGRAM, cmd->usage, cmd->purpose);
  if (cmd->details)
    addf(&t, "\n%s\n", cmd->details);
  if (cmd->operand_count > 0) {
    addf(&t, "\nOperands:\n");
    for (size_t i = 0; i < cmd->operand_count; i++)
      addf(&t, "  %-28s %s\n", cmd->operands[i].name, cmd->operands[i].summary);
  }
  if (cmd->options[0] != NULL) {
    addf(&t, "\nOptions:\n");
    for (size_t i = 0; cmd->options[i]; i++)
      if (!cmd->options[i]->hidden)
        help_option(&t, cmd->options[i]);
  }
  if (cmd->example_count > 0) {
    addf(&t, "\nExamples:\n");
    for (size_t i = 0; i < cmd->example_count; i++) {
      addf(&t, "  %s", WARDEN_PROGRAM);
      for (size_t k = 0; cmd->examples[i].words[k]; k++)
        addf(&t, " %s", cmd->examples[i].words[k]);
      addf(&t, "\n      %s\n", cmd->examples[i].summary);
    }
  }
  return t.data;
}

/* ------------------------------------------------------------ completion */

char* cli_completion_script(const char* shell) {
  text_t t = {0};
  if (strcmp(shell, "bash") == 0) {
    addf(&t,
         "# bash completion for %s %s; load with: source <(%s completion "
         "bash)\n"
         "_maelys_warden() {\n"
         "  local IFS=$'\\n'\n"
         "  local words=(\"${COMP_WORDS[@]:1:COMP_CWORD}\")\n"
         "  COMPREPLY=($(%s __complete -- \"${words[@]}\" 2>/dev/null))\n"
         "  if [ ${#COMPREPLY[@]} -eq 0 ]; then compopt -o default; fi\n"
         "}\n"
         "complete -F _maelys_warden %s\n",
         WARDEN_PROGRAM, cli_version(), WARDEN_PROGRAM, WARDEN_PROGRAM,
         WARDEN_PROGRAM);
  } else if (strcmp(shell, "zsh") == 0) {
    addf(&t,
         "#compdef %s\n"
         "# zsh completion for %s %s\n"
         "_maelys_warden() {\n"
         "  local -a candidates\n"
         "  candidates=(${(f)\"$(%s __complete -- ${words[2,CURRENT]} "
         "2>/dev/null)\"})\n"
         "  if (( ${#candidates} )); then compadd -a candidates; else "
         "_files; fi\n"
         "}\n"
         "compdef _maelys_warden %s\n",
         WARDEN_PROGRAM, WARDEN_PROGRAM, cli_version(), WARDEN_PROGRAM,
         WARDEN_PROGRAM);
  } else {
    addf(&t,
         "# fish completion for %s %s\n"
         "complete -c %s -f -a '(%s __complete -- (commandline -opc)[2..-1] "
         "(commandline -ct))'\n",
         WARDEN_PROGRAM, cli_version(), WARDEN_PROGRAM, WARDEN_PROGRAM);
  }
  return t.data;
}

json_t* cli_complete(char** words, size_t count) {
  json_t* records = json_array();
  const char* last = count > 0 ? words[count - 1] : "";
  size_t n = strlen(last);
#define OFFER(w)                                                               \
  do {                                                                         \
    if (strncmp((w), last, n) == 0)                                            \
      json_array_append_new(records, json_pack("{s:s}", "word", (w)));         \
  } while (0)
  const command_def_t* cmd = NULL;
  size_t first = 0;
  for (; first + 1 < count; first++)
    if (strncmp(words[first], "--", 2) != 0 &&
        (cmd = catalog_command_by_word(words[first])) != NULL)
      break;
  if (cmd == NULL) {
    for (size_t i = 0; warden_commands[i]; i++)
      if (!warden_commands[i]->hidden)
        OFFER(warden_commands[i]->word);
  } else {
    const char* prev = count >= 2 ? words[count - 2] : "";
    const option_def_t* takes = catalog_option(cmd, prev);
    bool after_dashes = false;
    for (size_t i = first + 1; i + 1 < count; i++)
      after_dashes = after_dashes || strcmp(words[i], "--") == 0;
    if (after_dashes) {
      /* The program's own words: nothing of ours. */
    } else if (takes != NULL && takes->arg_name != NULL) {
      for (size_t i = 0; takes->choices && takes->choices[i]; i++)
        OFFER(takes->choices[i]);
    } else if ((strcmp(cmd->id, "help") == 0 ||
                strcmp(cmd->id, "describe") == 0) &&
               strncmp(last, "-", 1) != 0) {
      for (size_t i = 0; warden_commands[i]; i++)
        if (!warden_commands[i]->hidden)
          OFFER(warden_commands[i]->id);
    } else if (cmd->operand_count > 0 && cmd->operands[0].choices != NULL &&
               strncmp(last, "-", 1) != 0) {
      for (size_t i = 0; cmd->operands[0].choices[i]; i++)
        OFFER(cmd->operands[0].choices[i]);
    } else {
      for (size_t i = 0; cmd->options[i]; i++) {
        bool given = false;
        for (size_t k = first + 1; k + 1 < count; k++)
          given = given || strcmp(words[k], cmd->options[i]->name) == 0;
        if (!cmd->options[i]->hidden && (!given || cmd->options[i]->repeatable))
          OFFER(cmd->options[i]->name);
      }
      for (size_t i = 0; warden_global_options[i]; i++)
        OFFER(warden_global_options[i]->name);
    }
  }
#undef OFFER
  return json_pack("{s:I, s:o}", "count", (json_int_t)json_array_size(records),
                   "records", records);
}

/* -------------------------------------------------------------- man page */

static void roff(FILE* out, const char* s) {
  for (; *s; s++) {
    if (*s == '\\')
      fputs("\\e", out);
    else if (*s == '-')
      fputs("\\-", out);
    else
      fputc(*s, out);
  }
}

static void man_option(FILE* out, const option_def_t* o) {
  fputs(".TP\n.B ", out);
  roff(out, o->name);
  if (o->arg_name) {
    fputs(" \\fI", out);
    roff(out, o->arg_name);
    fputs("\\fR", out);
  }
  fputc('\n', out);
  roff(out, o->summary);
  if (o->choices) {
    fputs(" One of: ", out);
    for (size_t i = 0; o->choices[i]; i++) {
      roff(out, o->choices[i]);
      fputs(o->choices[i + 1] ? ", " : ".", out);
    }
  }
  if (o->default_text) {
    fputs(" Default: ", out);
    roff(out, o->default_text);
    fputc('.', out);
  }
  fputc('\n', out);
}

void cli_man_page(FILE* out, const char* version) {
  fprintf(out,
          ".TH MAELYS-WARDEN 1 \"\" \"Maelys Executor %s\" \"User "
          "Commands\"\n",
          version);
  fputs(".SH NAME\nmaelys\\-warden \\- run untrusted programs in "
        "operating\\-system sandboxes\n.SH SYNOPSIS\n",
        out);
  for (size_t i = 0; warden_commands[i]; i++) {
    if (warden_commands[i]->hidden)
      continue;
    fputs(".B maelys\\-warden\n", out);
    roff(out, warden_commands[i]->usage);
    fputs("\n.br\n", out);
  }
  fputs(".SH DESCRIPTION\n"
        "maelys\\-warden puts an AI agent CLI, an MCP tool server or a code "
        "runner in a sandbox and relays its stdio unchanged. It follows the "
        "agent\\-cli/v2 contract: \\fBdescribe \\-\\-format json\\fR lists "
        "every command for agents, non\\-stream commands print one JSON "
        "envelope, failures are envelopes on stderr.\n",
        out);
  fputs(".SH COMMANDS\n", out);
  for (size_t i = 0; warden_commands[i]; i++) {
    const command_def_t* c = warden_commands[i];
    if (c->hidden)
      continue;
    fputs(".SS ", out);
    roff(out, c->word);
    fputc('\n', out);
    roff(out, c->purpose);
    fputc('\n', out);
    if (c->details) {
      fputs(".PP\n", out);
      roff(out, c->details);
      fputc('\n', out);
    }
    for (size_t k = 0; c->options[k]; k++)
      if (!c->options[k]->hidden)
        man_option(out, c->options[k]);
  }
  fputs(".SH GLOBAL OPTIONS\n", out);
  for (size_t i = 0; warden_global_options[i]; i++)
    man_option(out, warden_global_options[i]);
  fputs(".SH VALUES\n"
        ".TP\n.I DURATION\n"
        "A number with a unit: ms, s, m, h or d (2s, 10m); several combine, "
        "largest first (1m30s, 1h5m, 2s500ms).\n"
        ".TP\n.I SIZE\n"
        "A number of bytes with an optional K, M, G or T suffix (powers of "
        "1024: 256M).\n",
        out);
  fputs(".SH PROFILES\n"
        "The built\\-in profiles need no configuration file.\n"
        ".TP\n.B \\-\\-ro\n"
        "The workspace read\\-only.\n"
        ".TP\n.B \\-\\-rw\n"
        "The workspace read\\-write.\n"
        ".PP\n"
        "Both bind the minimal runtime read\\-only (/usr, /bin, /sbin, /lib, "
        "/lib32, /lib64 and, from /etc: ld.so.cache, ld.so.conf, ld.so.conf.d, "
        "alternatives, ssl, ca\\-certificates, passwd, group, nsswitch.conf, "
        "localtime, hosts), mount /proc, a minimal /dev and a private 256 MiB "
        "/tmp, and give no network unless \\-\\-network inherit. The "
        "environment is empty but for the caller's \\-\\-env and "
        "\\-\\-pass\\-env entries and a base the profile adds where the caller "
        "gave none: PATH=/usr/local/bin:/usr/bin:/bin, HOME=/tmp/home, "
        "TMPDIR=/tmp, LANG=C.UTF\\-8. As root, the payload runs under a host "
        "uid and gid of its own, never root's.\n",
        out);
  /* Named profiles, --allow-write, --home and the inherited network
   * (profiles.c, netfiles.c; docs/profiles.md). */
  fputs(".SS Named profiles\n"
        "\\fB\\-\\-profile\\fR \\fINAME\\fR reads \\fINAME\\fR.json "
        "(maelys\\-warden\\-profile/1) from $XDG_CONFIG_HOME/maelys/profiles "
        "(default ~/.config/maelys/profiles), else from the system profile "
        "directory, where the examples claude\\-code, codex, node\\-mcp and "
        "python\\-mcp are installed. NAME is a plain name (no slash, no "
        "dot). The file is a JSON object: \\fBextends\\fR (ro or rw, "
        "required), \\fBnetwork\\fR (none or inherit), \\fBallow\\-read\\fR, "
        "\\fBallow\\-write\\fR, \\fBdeny\\fR, \\fBprotect\\fR (paths no "
        "writable rule may cover), \\fBenv\\fR (an object), "
        "\\fBpass\\-env\\fR, \\fBlimits\\fR (tasks, memory, cpu\\-time, "
        "open\\-files, file\\-size), \\fBhome\\fR, \\fBformat\\fR and "
        "\\fBdescription\\fR; paths are absolute or start with ~/. An "
        "unknown member is an error naming it. Options on the command line "
        "add to the profile's lists (\\-\\-allow\\-read, "
        "\\-\\-allow\\-write, \\-\\-deny, \\-\\-pass\\-env) and "
        "override its single values (\\-\\-network, \\-\\-home, the "
        "limits, an \\-\\-env of the same name). A profile is refused when "
        "a symbolic link is on its path, when anyone but you or root owns it "
        "or could write it or a directory above it, or when it lies in the "
        "workspace, in a path the run makes writable or in the staging "
        "directory (invariant 18); and no run, with a profile or not, may "
        "make either profile directory writable.\n"
        ".SS Writable paths and a persistent home\n"
        "\\fB\\-\\-allow\\-write\\fR \\fIPATH\\fR makes an existing path "
        "writable; it is refused as a writable workspace is (the root, /tmp, "
        "/var/tmp, /dev/shm, your home itself and its dot\\-entries, the "
        "system trees, "
        "maelys\\-warden's own files, a path through a symbolic link). "
        "\\fB\\-\\-home\\fR \\fIDIR\\fR binds a persistent private "
        "directory writable at its own path and sets HOME to it; run creates "
        "it with mode 0700 when missing, just before the payload starts, and "
        "says so (a refused run creates nothing). It must be yours and "
        "writable by nobody else, and is refused when it is your real home, "
        "the workspace, inside it or around it.\n"
        ".SS Network inherit\n"
        "With \\fB\\-\\-network inherit\\fR the sandbox also gets "
        "/etc/resolv.conf (a link is bound from its root\\-owned target), "
        "host.conf, gai.conf, services, protocols and the CA stores /etc/ssl, "
        "/etc/ca\\-certificates, /etc/pki and /etc/crypto\\-policies, "
        "read\\-only; SSL_CERT_FILE, SSL_CERT_DIR, NODE_EXTRA_CA_CERTS and "
        "REQUESTS_CA_BUNDLE are passed when set, with what they name bound "
        "read\\-only and held to the same rules as a profile.\n",
        out);
  fputs(
      ".SH PROTECTED PATHS\n"
      "In a writable workspace, git's directory is bound over itself (a "
      "mount point the payload cannot rename, remove or replace), "
      ".git/hooks and .git/config are read\\-only, and an absent .git or "
      ".maelys is held by an empty read\\-only placeholder for the run: git "
      "runs hooks and the programs its configuration names on the host, at "
      "the user's next commit. A .git file keeps the directory it names "
      "protected when that lies in the workspace. With \\-\\-network inherit, "
      ".env*, .npmrc, .netrc, .git\\-credentials, .aws and .ssh in the "
      "workspace are denied. \\-\\-unprotect PATH drops a protection; "
      "\\fBplan \\-\\-explain\\fR lists them, and the receipt records them.\n",
      out);
  fputs(".SH EXIT STATUS\n"
        ".TP\n.B 0\ncommand completed\n"
        ".TP\n.B 1\nexecution failed (a failure envelope is on stderr)\n"
        ".TP\n.B 2\nvalid report with violations\n"
        ".PP\n"
        "\\fBrun\\fR exits with the program's own status, or 128+N when it "
        "died of signal N; a failure before the program started exits 1 "
        "with an envelope on stderr.\n",
        out);
  fputs(".SH ENVIRONMENT\n.TP\n.B MAELYS_CLI_FORMAT\n"
        "The default rendering (text, json or jsonl); json gives failure "
        "envelopes of \\fBrun\\fR in JSON.\n"
        ".TP\n.B XDG_STATE_HOME\nReceipts go to "
        "$XDG_STATE_HOME/maelys/receipts (default ~/.local/state).\n"
        ".TP\n.B XDG_CONFIG_HOME\nThe user's named profiles are in "
        "$XDG_CONFIG_HOME/maelys/profiles (default ~/.config).\n"
        ".TP\n.B MAELYS_WARDEN_SYSTEM_PROFILES\nAn absolute directory that "
        "replaces the system profile directory.\n"
        ".TP\n.B SSL_CERT_FILE, SSL_CERT_DIR, NODE_EXTRA_CA_CERTS, "
        "REQUESTS_CA_BUNDLE\nPassed, with the files they name, when the "
        "network is inherited.\n",
        out);
  fputs(".SH FILES\n.TP\n.B " MAELYS_WARDEN_SYSTEM_PROFILE_DIR "\n"
        "The system's named profiles.\n"
        ".TP\n.B ~/.config/maelys/profiles\nThe user's named profiles.\n",
        out);
  fputs(".SH EXAMPLES\n"
        "An MCP client configuration that confines a stock stdio MCP "
        "server installed in /opt/mcp to reading one project (an MCP client "
        "starts its servers from a directory of its own choosing, so the "
        "workspace is named):\n"
        ".PP\n.nf\n"
        "{\n"
        "  \"mcpServers\": {\n"
        "    \"files\": {\n"
        "      \"command\": \"maelys\\-warden\",\n"
        "      \"args\": [\"run\", \"\\-\\-ro\", \"\\-\\-io\", \"stdio\",\n"
        "               \"\\-\\-workspace\", \"/srv/project\",\n"
        "               \"\\-\\-allow\\-read\", \"/opt/mcp\",\n"
        "               \"\\-\\-\", \"/usr/bin/python3\", "
        "\"/opt/mcp/files_server.py\"]\n"
        "    }\n"
        "  }\n"
        "}\n"
        ".fi\n",
        out);
  for (size_t i = 0; warden_commands[i]; i++) {
    const command_def_t* c = warden_commands[i];
    for (size_t k = 0; k < c->example_count; k++) {
      fputs(".PP\n.nf\nmaelys\\-warden", out);
      for (size_t w = 0; c->examples[k].words[w]; w++) {
        fputc(' ', out);
        roff(out, c->examples[k].words[w]);
      }
      fputs("\n.fi\n", out);
      roff(out, c->examples[k].summary);
      fputc('\n', out);
    }
  }
  fputs(".SH SEE ALSO\n.BR bwrap (1)\n", out);
}
