#!/usr/bin/env bash
# ci/lint.sh [BUILD_DIR]: the checks that are not tests.
#   1. clang-format: every tracked C file is formatted (.clang-format);
#   2. clang-tidy (.clang-tidy): the bug-prone checks over the library, the
#      backends, the CLI and the adapters, and the function-size budget,
#      which ci/function-size-baseline.txt lets the functions still above it
#      keep but never grow;
#   3. exported symbols: libmaelys-executor.so exports only maelys_*
#      (internal maelys__* stay hidden), and every global symbol of the
#      static libraries is maelys_* (sibling libraries are linked into the
#      same programs: STYLE.md).
# BUILD_DIR is a configured and built tree (its compile_commands.json and
# libraries are read); without one, build-lint/ is configured and built.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
cd "$here"
build="${1:-$here/build-lint}"
if [ ! -f "$build/compile_commands.json" ]; then
  bash ci/build.sh "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
build="$(cd "$build" && pwd)"
jobs="$(nproc)"
failed=0

echo "== clang-format"
unformatted="$(git ls-files '*.c' '*.h' | xargs -r -P "$jobs" -n 8 \
  clang-format --dry-run -Werror 2>&1 | grep -o '^[^:]*\.[ch]' | sort -u || true)"
if [ -n "$unformatted" ]; then
  echo "not formatted (run clang-format -i on them):"
  echo "$unformatted" | sed 's/^/  /'
  failed=1
fi

echo "== clang-tidy"
tidy_out="$(mktemp)"
trap 'rm -f "$tidy_out"' EXIT
python3 - "$build/compile_commands.json" "$here" <<'PY' |
import json, sys
root = sys.argv[2] + "/"
seen = set()
for e in json.load(open(sys.argv[1])):
    f = e["file"]
    rel = f[len(root):] if f.startswith(root) else None
    if rel is None or "/tests/" in "/" + rel or "/examples/" in rel:
        continue
    if rel.split("/")[0] in ("src", "backends", "bindings", "adapters") \
            and f not in seen:
        seen.add(f)
        print(f)
PY
  xargs -r -P "$jobs" -n 4 clang-tidy -p "$build" --quiet >"$tidy_out" 2>/dev/null || true
python3 - "$tidy_out" "$here" ci/function-size-baseline.txt <<'PY' || failed=1
import re, sys
out, root, baseline_path = sys.argv[1], sys.argv[2] + "/", sys.argv[3]
baseline = {}
for line in open(baseline_path):
    line = line.split("#", 1)[0].split()
    if len(line) == 3:
        baseline[(line[0], line[1])] = int(line[2])
text = open(out).read().splitlines()
bad, sizes = [], {}
warn = re.compile(r"^(.*?):(\d+):(\d+): warning: (.*) \[([\w.-]+)\]$")
for i, line in enumerate(text):
    m = warn.match(line)
    if not m:
        continue
    path = m.group(1)[len(root):] if m.group(1).startswith(root) else m.group(1)
    if m.group(5) == "readability-function-size":
        name = re.search(r"function '([^']*)'", m.group(4)).group(1)
        lines = next((int(n.group(1)) for n in (re.search(
            r"note: (\d+) lines including", t) for t in text[i + 1:i + 4]) if n), 0)
        sizes[(path, name)] = lines
        continue
    bad.append("%s:%s: %s [%s]" % (path, m.group(2), m.group(4), m.group(5)))
for key, lines in sorted(sizes.items()):
    allowed = baseline.get(key)
    if allowed is None:
        bad.append("%s: %s() is %d lines, over the budget of 150: split it "
                   "along its phases" % (key[0], key[1], lines))
    elif lines > allowed:
        bad.append("%s: %s() grew to %d lines (baseline %d, budget 150)" %
                   (key[0], key[1], lines, allowed))
    elif lines < allowed:
        print("note: %s: %s() shrank to %d lines: lower its baseline" %
              (key[0], key[1], lines))
for key in sorted(set(baseline) - set(sizes)):
    print("note: %s: %s() is within the budget now: remove it from the "
          "baseline" % key)
for b in sorted(set(bad)):
    print(b)
sys.exit(1 if bad else 0)
PY

echo "== exported symbols"
shared="$build/libmaelys-executor.so"
if [ ! -f "$shared" ]; then
  echo "no $shared: build first"
  failed=1
else
  stray="$(nm -D --defined-only "$shared" | awk 'NF == 3 {print $3}' |
    grep -v '^maelys_[a-z0-9]' || true)"
  if [ -n "$stray" ]; then
    echo "libmaelys-executor.so exports names outside maelys_*:"
    echo "$stray" | sed 's/^/  /'
    failed=1
  fi
fi
while IFS= read -r lib; do
  stray="$(nm -g --defined-only "$lib" 2>/dev/null | awk 'NF == 3 {print $3}' |
    grep -v '^maelys_' | sort -u || true)"
  if [ -n "$stray" ]; then
    echo "${lib#"$build"/} defines global names outside maelys_*:"
    echo "$stray" | sed 's/^/  /'
    failed=1
  fi
done < <(find "$build" -name 'libmaelys-*.a' -not -path '*/tests/*' \
           -not -path '*/CMakeFiles/*')

if [ "$failed" -ne 0 ]; then
  echo "== lint failed"
  exit 1
fi
echo "== lint passed"
