/*
 * The hint of a failure the library reports. The library gives a result
 * code and one diagnostic; the hint says what the user can do about that
 * diagnostic, so it is chosen by what the diagnostic names, never by its code
 * alone (an ACCESS_DENIED can be a symbolic link, a home directory or the
 * receipt directory, and each has its own remedy). A diagnostic that matches
 * no row gets no hint rather than a wrong one. tests/cli/test_hints.py
 * provokes every row through the CLI; a diagnostic the CLI cannot provoke
 * (because the CLI refuses the same thing earlier, with its own hint) has
 * no row.
 */
#include <stddef.h>
#include <string.h>

#include "warden.h"

typedef struct hint_row {
  const char* phrase; /* a phrase of the library's diagnostic */
  const char* hint;
} hint_row_t;

static const hint_row_t rows[] = {
    {"system tree",
     "Use a project directory of your own as the workspace (--workspace "
     "DIR); system trees are never writable from a sandbox."},
    {"cannot take a receipt",
     "Make the receipt directory writable, or give another --receipt-dir."},
    {"the host's root is never bound",
     "Run it from a project directory, or give --workspace DIR: the host's "
     "/ is never bound."},
    {"shared temporary directory",
     "Make a directory of your own below it (mktemp -d) and use that as the "
     "workspace."},
    {"/run holds the host's service sockets",
     "Bind a directory outside /run: it holds the host's service sockets."},
    {"a home directory holds agent sockets",
     "Use a project directory below the home directory as the workspace, "
     "not the home directory itself."},
    {"holds the unix socket",
     "Bind a directory that holds no socket, or move the socket out of it."},
    {"passes through a symbolic link",
     "Name the resolved path (what the link points to) instead of the link."},
    {"neither a directory nor a regular file",
     "Bind directories and regular files only; a socket or a device never "
     "enters the sandbox."},
    {"create-protection",
     "Deny only paths that exist: create the path first, or drop the "
     "--deny."},
    {"scope is",
     "The path is not of the kind its rule says (file or directory): write "
     "the plan again for what the path is now."},
    {"missing-path mode: fail", "Create the path, or take it out of the plan."},
    {"no devpts instance",
     "Give the plan a dev mount at /dev, or run without a terminal session "
     "(--no-tty, or --io isolated or stdio)."},
};

const char* warden_hint_for(const char* message) {
  if (message == NULL)
    return NULL;
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
    if (strstr(message, rows[i].phrase) != NULL)
      return rows[i].hint;
  return NULL;
}
