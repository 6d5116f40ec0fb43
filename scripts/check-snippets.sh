#!/usr/bin/env bash
# Compiles every C++ snippet (```cpp or ```c++ fenced blocks) of the Markdown
# documentation, so that the docs cannot drift from the API:
#
#   check-snippets.sh [FILE.md...]   default: README.md and docs/*.md
#   check-snippets.sh --self-test    shows that a broken snippet fails the check
#
# Each snippet is compiled on its own with
#   $CXX -std=c++17 -Wall -Wextra -Wshadow -Werror -fsyntax-only
#        -I include -I $BUILD_DIR/include
# (CXX default g++; BUILD_DIR default "build", a configured build directory:
# it holds the generated redlock/version.hpp). Diagnostics name the Markdown
# file and line.
#
# What a snippet is, by the HTML comment on the line before its fence:
#   (none)                                   a whole translation unit, compiled as is
#   <!-- snippet: fragment -->               the body of a function; lines starting with
#                                            #include move above that function, and
#                                            scripts/snippet-prelude.hpp comes first (the
#                                            library, 10s-style literals, and stand-ins for
#                                            "your own code" such as log())
#   <!-- snippet: fragment; given: PARAMS -->   the same, PARAMS being that function's
#                                            parameter list: the names earlier text
#                                            introduced, e.g. "uv_loop_t* loop"
#   <!-- snippet: skip (REASON) -->          not compiled (a synopsis, say); REASON is required
#
# Prints FILE:LINE: ok, FAILED (with the compiler's output) or skipped (why),
# one line per snippet, then a count; exits 1 when one failed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
CXX=${CXX:-g++}

# A snippet for each outcome; the check must report exactly these.
self_test() {
  local dir status=0 got expected="ok FAILED FAILED FAILED skipped FAILED"
  dir=$(mktemp -d /tmp/check-snippets.XXXXXX)
  cat >"$dir/broken.md" <<'EOF'
A whole program:

```cpp
#include <redlock/redlock.hpp>
int main() { return redlock::Options{}.masters.empty() ? 0 : 1; }
```

A fragment with a warning only -Wshadow reports:

<!-- snippet: fragment; given: std::error_code ec -->
```cpp
if (ec) {
  std::error_code ec = redlock::errc::timeout;
  log(ec.message());
}
```

A fragment calling what the API does not have:

<!-- snippet: fragment; given: redlock::Redlock& redlock -->
```cpp
redlock.lock_everything();
```

A fragment without its marker:

```cpp
log("not a translation unit");
```

<!-- snippet: skip (a listing, not code) -->
```cpp
class Client { ... };
```

<!-- snippet: skip -->
```cpp
int a_skip_needs_a_reason;
```
EOF
  bash scripts/check-snippets.sh "$dir/broken.md" >"$dir/out" 2>&1 || status=$?
  got=$(sed -nE 's/^[^ ].*:[0-9]+: (ok|FAILED|skipped).*/\1/p' "$dir/out" | xargs)
  if [[ $got == "$expected" ]] && ((status == 1)); then
    echo "check-snippets self-test: ok (each planted mistake was reported)"
    rm -rf "$dir"
    return 0
  fi
  cat "$dir/out"
  echo "check-snippets self-test: FAILED: expected \"$expected\" and status 1," \
    "got \"$got\" and status $status (files in $dir)"
  return 1
}

if [[ ! -f $BUILD_DIR/include/redlock/version.hpp ]]; then
  echo "check-snippets.sh: $BUILD_DIR/include/redlock/version.hpp is missing:" \
    "configure $BUILD_DIR first (meson setup $BUILD_DIR) or set BUILD_DIR" >&2
  exit 1
fi
if [[ ${1:-} == --self-test ]]; then
  self_test
  exit
fi
if (($# == 0)); then
  set -- README.md docs/*.md
fi

export BUILD_DIR CXX
exec python3 - "$@" <<'EOF'
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^ {0,3}(```+|~~~+)\s*([^\s`]*)")
MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(.*?)\s*-->\s*$")
FRAGMENT = re.compile(r"^fragment(?:;\s*given:\s*(.*))?$")
SKIP = re.compile(r"^skip\s*\((.+)\)$")
INCLUDE = re.compile(r"^\s*#\s*include\b")
PRELUDE = os.path.abspath("scripts/snippet-prelude.hpp")
FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Wshadow", "-Werror", "-fsyntax-only",
         "-I", "include", "-I", os.path.join(os.environ["BUILD_DIR"], "include")]


def snippets(path):
    """(line of the fence, marker text or None, code lines) of each C++ block."""
    fence, marker = None, None
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if fence is not None:
                if line.strip().startswith(fence[0]):
                    if fence[1] is not None:
                        yield fence[1], fence[2], fence[3]
                    fence = None
                elif fence[1] is not None:
                    fence[3].append(line)
                continue
            m = FENCE.match(line)
            if m:
                cpp = m.group(2).lower() in ("cpp", "c++")
                fence = (m.group(1), number if cpp else None, marker, [])
                marker = None
                continue
            if line.strip():
                m = MARKER.match(line)
                marker = m.group(1) if m else None


def line_directive(path, number):
    return f'#line {number} "{path}"'


def translation_unit(path, start, given, code):
    """A fragment as a function body after the prelude, its #includes above it."""
    out = [f'#line 1 "(the wrapper around {path}:{start})"', f'#include "{PRELUDE}"']
    for i, line in enumerate(code):
        if INCLUDE.match(line):
            out += [line_directive(path, start + 1 + i), line]
    out.append(f"void snippet({given or ''}) {{")
    out.append(line_directive(path, start + 1))
    out += ["" if INCLUDE.match(line) else line for line in code]
    out.append("}")
    return out


def compile_unit(lines):
    with tempfile.NamedTemporaryFile("w", suffix=".cpp") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        run = subprocess.run([os.environ["CXX"], *FLAGS, f.name], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return run.returncode == 0, run.stdout


counts = {"ok": 0, "FAILED": 0, "skipped": 0}
for path in sys.argv[1:]:
    if not os.path.isfile(path):
        print(f"{path}: no such file")
        counts["FAILED"] += 1
        continue
    for start, marker, code in snippets(path):
        where = f"{path}:{start}"
        if marker is None:
            ok, output = compile_unit([line_directive(path, start + 1)] + code)
        elif FRAGMENT.match(marker):
            ok, output = compile_unit(translation_unit(path, start, FRAGMENT.match(marker).group(1), code))
        elif SKIP.match(marker):
            print(f"{where}: skipped ({SKIP.match(marker).group(1)})")
            counts["skipped"] += 1
            continue
        else:
            ok, output = False, (f'unknown marker "snippet: {marker}": use "fragment", '
                                 '"fragment; given: PARAMS" or "skip (REASON)"\n')
        if ok:
            print(f"{where}: ok")
            counts["ok"] += 1
        else:
            print(f"{where}: FAILED")
            print("".join("    " + l + "\n" for l in output.rstrip("\n").split("\n")), end="")
            counts["FAILED"] += 1

total = sum(counts.values())
print(f"check-snippets: {total} snippets, {counts['ok']} ok, {counts['FAILED']} failed, "
      f"{counts['skipped']} skipped")
sys.exit(1 if counts["FAILED"] else 0)
EOF
