/* "Did you mean ...?" for a mistyped option or command word. */
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "cli.h"

/* The optimal string alignment distance of a and b (insertions, deletions,
 * substitutions and swaps of two neighbours each cost 1), or a large number
 * for words too long to be a typo of one another. */
static size_t distance(const char* a, const char* b) {
  enum { MAX = 64 };
  size_t n = strlen(a), m = strlen(b);
  if (n >= MAX || m >= MAX)
    return MAX;
  size_t d[MAX + 1][MAX + 1];
  for (size_t i = 0; i <= n; i++)
    d[i][0] = i;
  for (size_t j = 0; j <= m; j++)
    d[0][j] = j;
  for (size_t i = 1; i <= n; i++)
    for (size_t j = 1; j <= m; j++) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      size_t best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best)
        best = d[i][j - 1] + 1;
      if (d[i - 1][j - 1] + cost < best)
        best = d[i - 1][j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
          d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[n][m];
}

typedef struct best {
  const char* word;
  size_t distance;
} best_t;

static void consider(best_t* best, const char* typed, const char* candidate) {
  size_t d = distance(typed, candidate);
  if (d < best->distance) {
    best->distance = d;
    best->word = candidate;
  }
}

/* Close enough to be what was meant: at most a third of the word wrong, and
 * never more than three edits. */
static const char* pick(const best_t* best, const char* typed) {
  size_t limit = strlen(typed) / 3;
  if (limit < 1)
    limit = 1;
  if (limit > 3)
    limit = 3;
  return best->word != NULL && best->distance <= limit ? best->word : NULL;
}

const char* cli_suggest_option(const command_def_t* cmd, const char* typed) {
  best_t best = {NULL, (size_t)-1};
  if (cmd != NULL)
    for (size_t i = 0; cmd->options[i] != NULL; i++)
      if (!cmd->options[i]->hidden)
        consider(&best, typed, cmd->options[i]->name);
  for (size_t i = 0; warden_global_options[i] != NULL; i++)
    consider(&best, typed, warden_global_options[i]->name);
  return pick(&best, typed);
}

const char* cli_suggest_command(const char* typed) {
  best_t best = {NULL, (size_t)-1};
  for (size_t i = 0; warden_commands[i] != NULL; i++)
    if (warden_commands[i]->word != NULL)
      consider(&best, typed, warden_commands[i]->word);
  return pick(&best, typed);
}
