#!/usr/bin/env bash
# Builds test/consumers/consumer.cpp the three ways a user would take redlock
# and runs it: against a copy of BUILD_DIR (default "build") installed under a
# temporary directory, found with pkg-config and with CMake's find_package; and
# from source, as a Meson subproject of a host project that has no wrap file.
# The subproject check also requires that the host's build has none of our
# tests, benches, examples or tools, compiles nothing of ours with -Werror and
# installs nothing unless -Dredlock:install=true.
#
# Prints "consumer NAME: ok" or "consumer NAME: FAIL (why)" per check and ends
# with "consumers: N passed, N failed"; exits non-zero when any failed. Every
# step is bounded by STEP_TIMEOUT seconds (default 900); JOBS (default 2) is
# ninja's job count. Everything it makes is removed on exit.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
source_dir=$PWD
BUILD_DIR=${BUILD_DIR:-build}
STEP_TIMEOUT=${STEP_TIMEOUT:-900}
JOBS=${JOBS:-2}

tmp=$(mktemp -d /tmp/redlock-consumers.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
pass() {
  echo "consumer $1: ok"
  passed=$((passed + 1))
}
fail() {
  echo "consumer $1: FAIL ($2)"
  failed=$((failed + 1))
}
# step LOG COMMAND...: runs COMMAND bounded, its output into LOG (shown when it fails).
step() {
  local log=$1
  shift
  if ! timeout "$STEP_TIMEOUT" "$@" >"$log" 2>&1; then
    sed 's/^/    /' "$log" | tail -n 40
    return 1
  fi
}

version=$(meson introspect --projectinfo "$BUILD_DIR" | python3 -c 'import json, sys; print(json.load(sys.stdin)["version"])')
want=${version%.*}  # MAJOR.MINOR, as a user writes it

check_output() {  # NAME PROGRAM [ENV...]: runs it and compares what it prints
  local name=$1 program=$2 out
  shift 2
  if ! out=$(env "$@" timeout 60 "$program" 2>&1); then
    fail "$name" "the consumer failed: $out"
  elif [[ $out != "redlock $version $version" ]]; then
    fail "$name" "it printed '$out', not 'redlock $version $version'"
  else
    pass "$name"
  fi
}

# 1. Installed: pkg-config and CMake.
root=$tmp/root
if step "$tmp/install.log" meson install -C "$BUILD_DIR" --no-rebuild --destdir "$root"; then
  pc=$(find "$root" -name redlock.pc | head -n 1)
  config=$(find "$root" -name redlockConfig.cmake | head -n 1)
  libdir=$(dirname "$(find "$root" -name 'libredlock.so*' -o -name libredlock.a | head -n 1)")
  prefix=$root$(meson introspect --buildoptions "$BUILD_DIR" |
    python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')

  if [[ -z $pc ]]; then
    fail pkg-config "no redlock.pc installed"
  else
    # The .pc names the configured prefix; the sysroot puts it under $root.
    export PKG_CONFIG_PATH=$(dirname "$pc") PKG_CONFIG_SYSROOT_DIR=$root
    if ! flags=$(pkg-config --cflags --libs "redlock >= $want" 2>&1); then
      fail pkg-config "pkg-config: $flags"
    elif step "$tmp/pc.log" g++ -std=c++17 test/consumers/consumer.cpp $flags -o "$tmp/pc-consumer"; then
      check_output pkg-config "$tmp/pc-consumer" LD_LIBRARY_PATH="$libdir"
    else
      fail pkg-config "the consumer did not build"
    fi
    if [[ -f $libdir/libredlock.a ]]; then
      static_flags=$(pkg-config --static --cflags --libs redlock)
      if step "$tmp/pc-static.log" g++ -std=c++17 test/consumers/consumer.cpp \
        ${static_flags/-lredlock/-l:libredlock.a} -o "$tmp/pc-static-consumer"; then
        check_output pkg-config-static "$tmp/pc-static-consumer"
      else
        fail pkg-config-static "the consumer did not build"
      fi
    fi
    unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
  fi

  if [[ -z $config ]]; then
    fail cmake "no redlockConfig.cmake installed"
  elif ! command -v cmake >/dev/null; then
    fail cmake "cmake is not installed (scripts/setup.sh installs it)"
  else
    project=$tmp/cmake
    mkdir -p "$project"
    cp test/consumers/CMakeLists.txt test/consumers/consumer.cpp "$project/"
    if step "$tmp/cmake.log" cmake -S "$project" -B "$project/build" -DCMAKE_PREFIX_PATH="$prefix" \
      -DREDLOCK_WANT="$want" && step "$tmp/cmake-build.log" cmake --build "$project/build" -j "$JOBS"; then
      check_output cmake "$project/build/consumer" LD_LIBRARY_PATH="$libdir"
      if [[ -x $project/build/consumer_static ]]; then
        check_output cmake-static "$project/build/consumer_static"
      fi
    else
      fail cmake "find_package(redlock $want) or the build failed"
    fi
    # The version file must refuse what this version is not: the next minor
    # (before 1.0) or major, and a later patch.
    major=${version%%.*} minor=${want#*.} patch=${version##*.}
    for other in "$major.$((minor + 1))" "$((major + 1)).0" "$want.$((patch + 1))"; do
      if timeout "$STEP_TIMEOUT" cmake -S "$project" -B "$project/build-$other" -DCMAKE_PREFIX_PATH="$prefix" \
        -DREDLOCK_WANT="$other" >"$tmp/cmake-$other.log" 2>&1; then
        fail "cmake-refuses-$other" "find_package(redlock $other) accepted $version"
      elif ! grep -q "compatible with requested version \"$other\"" "$tmp/cmake-$other.log"; then
        fail "cmake-refuses-$other" "find_package(redlock $other) failed for another reason: $(tail -n 5 "$tmp/cmake-$other.log")"
      else
        pass "cmake-refuses-$other"
      fi
    done
  fi
else
  fail install "meson install --destdir failed"
fi

# 2. From source, as a Meson subproject found by dependency('redlock').
host=$tmp/host
mkdir -p "$host/subprojects"
cp test/consumers/meson.build test/consumers/consumer.cpp "$host/"
ln -s "$source_dir" "$host/subprojects/redlock"
if step "$tmp/host-setup.log" meson setup "$host/build" "$host" --force-fallback-for=redlock &&
  step "$tmp/host-build.log" ninja -C "$host/build" -j "$JOBS"; then
  check_output meson-subproject "$host/build/consumer"
  problems=$(python3 - "$host/build" 2>&1 <<'PY'
import json, subprocess, sys
build = sys.argv[1]
def introspect(what):
    return json.loads(subprocess.run(["meson", "introspect", what, build], check=True,
                                     capture_output=True, text=True).stdout)
problems = []
tests = introspect("--tests")
if tests:
    problems.append("the host has our tests: " + ", ".join(t["name"] for t in tests))
ours = [t for t in introspect("--targets") if "subprojects/redlock/" in t["defined_in"]]
if not any(t["name"] == "redlock" for t in ours):
    problems.append("redlock's library is not among the host's targets: the checks would prove nothing")
extra = [t["name"] for t in ours if not t["defined_in"].endswith("subprojects/redlock/lib/meson.build")]
if extra:
    problems.append("targets beyond the library: " + ", ".join(extra))
installed = introspect("--installed")
if installed:
    problems.append("installs " + ", ".join(installed.values()))
with open(build + "/compile_commands.json") as f:
    compiled = [c for c in json.load(f) if "subprojects/redlock" in c["file"]]
if not compiled:
    problems.append("no source of redlock's in compile_commands.json: the -Werror check would prove nothing")
werror = [c["file"] for c in compiled if "-Werror" in c["command"]]
if werror:
    problems.append("-Werror on " + werror[0])
print("; ".join(problems))
PY
  ) || problems="the check itself failed: $problems"
  if [[ -n $problems ]]; then
    fail meson-subproject-quiet "$problems"
  else
    pass meson-subproject-quiet
  fi
  # Asked to, the subproject installs its library, headers and package files.
  if step "$tmp/host-install.log" meson setup --reconfigure "$host/build" "$host" -Dredlock:install=true &&
    installed=$(meson introspect --installed "$host/build" 2>&1) &&
    [[ $installed == *libredlock.so* && $installed == *version.hpp* && $installed == *redlockConfig.cmake* ]]; then
    pass meson-subproject-install-when-asked
  else
    fail meson-subproject-install-when-asked "-Dredlock:install=true installs: ${installed:-nothing}"
  fi
else
  fail meson-subproject "the host project did not configure or build"
fi

echo "consumers: $passed passed, $failed failed"
((failed == 0))
