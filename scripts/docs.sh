#!/usr/bin/env bash
# Generates the API reference (Doxygen, from the public headers' comments)
# into DOCS_DIR (default BUILD_DIR/docs, BUILD_DIR default "build"; open
# html/index.html). Any Doxygen warning fails it: the warnings are printed and
# the exit status is non-zero. So does a name of docs/reference-names.txt
# missing from the reference (checked in Doxygen's tag file). Needs a configured BUILD_DIR (for the
# generated version header) and doxygen (scripts/setup.sh installs both).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
export REDLOCK_DOCS_DIR=${DOCS_DIR:-$BUILD_DIR/docs}
export REDLOCK_BUILD_INCLUDE=$BUILD_DIR/include
export REDLOCK_VERSION_HEADER=$BUILD_DIR/include/redlock/version.hpp

if ! command -v doxygen >/dev/null; then
  echo "docs.sh: doxygen is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
if [[ ! -f $REDLOCK_VERSION_HEADER ]]; then
  echo "docs.sh: $REDLOCK_VERSION_HEADER is missing: configure $BUILD_DIR first (meson setup $BUILD_DIR)" >&2
  exit 1
fi
REDLOCK_VERSION=$(sed -n 's/^#define REDLOCK_VERSION_STRING "\(.*\)"$/\1/p' "$REDLOCK_VERSION_HEADER")
export REDLOCK_VERSION

rm -rf "$REDLOCK_DOCS_DIR"
mkdir -p "$REDLOCK_DOCS_DIR"
status=0
doxygen docs/Doxyfile || status=$?
if [[ -s $REDLOCK_DOCS_DIR/warnings.log ]] || ((status != 0)); then
  echo "docs.sh: doxygen warned (exit status $status):" >&2
  cat "$REDLOCK_DOCS_DIR/warnings.log" >&2
  exit 1
fi
# Every public name of docs/reference-names.txt has an entry: a class,
# member, function or macro by name, an enumerator as an enum's value.
missing=()
while read -r name; do
  [[ -z $name || $name == \#* ]] && continue
  grep -qF -e "<name>$name</name>" -e ">$name</enumvalue>" "$REDLOCK_DOCS_DIR/redlock.tag" || missing+=("$name")
done <docs/reference-names.txt
if ((${#missing[@]} > 0)); then
  echo "docs.sh: the reference lacks ${missing[*]} (docs/reference-names.txt)" >&2
  exit 1
fi
echo "docs.sh: $REDLOCK_DOCS_DIR/html/index.html (redlock $REDLOCK_VERSION), no warnings, all $(grep -cv -e '^#' -e '^$' docs/reference-names.txt) listed names present"
