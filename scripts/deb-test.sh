#!/usr/bin/env bash
# Installs the packages scripts/deb.sh built (libredlock0, libredlock-dev and
# redlock-tools from DEB_DIR, default "debs") with apt-get, checks them as a
# user would, and purges them again, with whatever apt-get installed for them:
#   - `redlock --version`, the manual page (man -w, rendered without
#     warnings), the bash completion, and that both name every flag
#     `redlock COMMAND --help` lists;
#   - test/consumers/consumer.cpp built with pkg-config and with CMake's
#     find_package(redlock), against the installed files only;
#   - with redis-server installed: test/consumers/lock_consumer.cpp and the
#     redlock command take a real lock on a redis-server of our own (127.0.0.1,
#     a free port), stopped by its PID at the end.
# Needs root (or sudo). Refuses to run when one of the packages is already
# installed, since it would purge it. Prints "deb-test NAME: ok" or
# "deb-test NAME: FAIL (why)" per check and ends with "deb-test: PASS (...)"
# or "deb-test: FAIL (...)"; the exit status is non-zero on failure.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
DEB_DIR=${DEB_DIR:-debs}
STEP_TIMEOUT=${STEP_TIMEOUT:-900}
packages=(libredlock0 libredlock-dev redlock-tools)

sudo=()
if ((EUID != 0)); then
  command -v sudo >/dev/null || {
    echo "deb-test: FAIL (need root or sudo to install packages)"
    exit 1
  }
  sudo=(sudo)
fi

debs=()
shopt -s nullglob
for package in "${packages[@]}"; do
  found=("$DEB_DIR"/"${package}"_*.deb)
  if ((${#found[@]} != 1)); then
    echo "deb-test: FAIL (want one ${package}_*.deb in $DEB_DIR, found ${#found[@]}: run scripts/deb.sh)"
    exit 1
  fi
  debs+=("$(cd "$(dirname "${found[0]}")" && pwd)/$(basename "${found[0]}")")
  if [[ $(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null) == installed ]]; then
    echo "deb-test: FAIL ($package is already installed; this test would purge it: apt-get purge it first)"
    exit 1
  fi
done
version=$(dpkg-deb -f "${debs[2]}" Version)
version=${version%%[-+~]*}
want=${version%.*}

tmp=$(mktemp -d /tmp/redlock-deb-test.XXXXXX)
installed_list() { dpkg-query -W -f='${Package}:${Architecture} ${db:Status-Status}\n' | awk '$2 == "installed" { print $1 }' | sort; }
installed_list >"$tmp/before"
redis_pid=''

# Stops our redis-server and purges our packages with whatever our apt-get
# install added along with them; returns non-zero when something stays behind.
# Run by finish(), and by the EXIT trap should the script end another way.
# shellcheck disable=SC2317 # also run by the EXIT trap
cleanup() {
  local status=0 package
  if [[ -n $redis_pid ]]; then
    kill "$redis_pid" 2>/dev/null
    wait "$redis_pid" 2>/dev/null
    redis_pid=''
  fi
  # What our apt-get install added (not what others installed meanwhile).
  mapfile -t added < <(cat "$tmp/added" 2>/dev/null)
  if ((${#added[@]} > 0)); then
    echo "deb-test: purging ${added[*]}"
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get purge -y "${added[@]}" >"$tmp/purge.log" 2>&1; then
      sed 's/^/    /' "$tmp/purge.log" | tail -n 20
      status=1
    fi
  fi
  for package in "${packages[@]}"; do
    if [[ $(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null) =~ ^(installed|config-files|half-.*|unpacked)$ ]]; then
      echo "deb-test: $package is still on the machine"
      status=1
    fi
  done
  rm -rf "$tmp"
  return "$status"
}
trap cleanup EXIT

passed=0
failed=0
pass() {
  echo "deb-test $1: ok"
  passed=$((passed + 1))
}
fail() {
  echo "deb-test $1: FAIL ($2)"
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
finish() {
  trap - EXIT
  cleanup || fail purge "the packages could not all be purged"
  if ((failed == 0)); then
    echo "deb-test: PASS ($passed checks of redlock $version's packages)"
    exit 0
  fi
  echo "deb-test: FAIL ($failed of $((passed + failed)) checks failed)"
  exit 1
}

echo "deb-test: installing ${debs[*]##*/}"
install_status=0
step "$tmp/install.log" "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${debs[@]}" || install_status=$?
installed_list | comm -13 "$tmp/before" - >"$tmp/added"
if ((install_status != 0)); then
  fail install "apt-get install failed"
  finish
fi
pass install

# The command, its manual page and its completion.
if [[ $(command -v redlock) != /usr/bin/redlock ]]; then
  fail command "redlock on PATH is '$(command -v redlock)', not /usr/bin/redlock"
elif [[ $(redlock --version 2>&1) != "redlock $version" ]]; then
  fail command "redlock --version printed '$(redlock --version 2>&1)'"
else
  pass command
fi

man_page=$(man -w redlock 2>&1)
if [[ $man_page != /usr/share/man/man1/redlock.1.gz ]]; then
  hint=''
  if grep -qs '^path-exclude=/usr/share/man' /etc/dpkg/dpkg.cfg.d/*; then
    hint=" (dpkg is told not to install manual pages: /etc/dpkg/dpkg.cfg.d/)"
  fi
  fail man-page "man -w redlock: $man_page$hint"
elif warnings=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l "$man_page" 2>&1 >/dev/null) && [[ -n $warnings ]]; then
  fail man-page "groff warns: $warnings"
else
  pass man-page
fi

completion=/usr/share/bash-completion/completions/redlock
# complete WORDS...: what the completion offers for the last word.
complete_words() {
  bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _redlock; printf "%s\\n" "${COMPREPLY[*]}"' \
    _ "$completion" "$@"
}
if [[ ! -f $completion ]]; then
  fail bash-completion "no $completion"
elif [[ $(complete_words redlock st) != status || $(complete_words redlock -m redis://x status --j) != --json ]]; then
  fail bash-completion "'redlock st' gave '$(complete_words redlock st)', 'redlock status --j' '$(complete_words redlock -m redis://x status --j)'"
else
  pass bash-completion
fi

# Every flag the help lists is in the manual page and the completion.
missing=()
zcat "$man_page" | sed 's/\\-/-/g' >"$tmp/man.txt"
for command in run acquire extend release status; do
  # The option lines: "  -m, --master URI   text".
  for flag in $(redlock "$command" --help | sed -nE 's/^  (-[^ ].*)/\1/p' | sed -E 's/  .*//' |
    grep -oE -- '--?[a-zA-Z][a-z-]*' | sort -u); do
    grep -qE "(^|[^a-z-])$flag([^a-z-]|$)" "$tmp/man.txt" || missing+=("$flag (manual page)")
    words=$(complete_words redlock "$command" "${flag:0:2}")
    [[ " $words " == *" $flag "* ]] || missing+=("$flag of $command (completion)")
  done
done
if ((${#missing[@]} > 0)); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  fail flags-documented "missing: ${missing[*]}"
else
  pass flags-documented
fi

# A consumer found with pkg-config, against the installed files only.
check_output() { # NAME PROGRAM: runs it and compares what it prints
  local out
  if ! out=$(timeout 60 "$2" 2>&1); then
    fail "$1" "the consumer failed: $out"
  elif [[ $out != "redlock $version $version" ]]; then
    fail "$1" "it printed '$out', not 'redlock $version $version'"
  else
    pass "$1"
  fi
}
# shellcheck disable=SC2086 # pkg-config's output is a list of words
if ! flags=$(pkg-config --cflags --libs "redlock >= $want" 2>&1); then
  fail pkg-config "pkg-config: $flags"
elif [[ $(pkg-config --variable=libdir redlock) != /usr/lib/* ]]; then
  fail pkg-config "redlock.pc's libdir is $(pkg-config --variable=libdir redlock)"
elif step "$tmp/pc.log" g++ -std=c++17 test/consumers/consumer.cpp $flags -o "$tmp/pc-consumer"; then
  check_output pkg-config "$tmp/pc-consumer"
else
  fail pkg-config "the consumer did not build"
fi

# The same with CMake's find_package(redlock MAJOR.MINOR), no prefix given.
if ! command -v cmake >/dev/null; then
  fail cmake "cmake is not installed (scripts/setup.sh installs it)"
else
  project=$tmp/cmake
  mkdir -p "$project"
  cp test/consumers/CMakeLists.txt test/consumers/consumer.cpp "$project/"
  if step "$tmp/cmake.log" cmake -S "$project" -B "$project/build" -DREDLOCK_WANT="$want" &&
    step "$tmp/cmake-build.log" cmake --build "$project/build"; then
    if ! grep -q "redlock_DIR:PATH=/usr/lib/" "$project/build/CMakeCache.txt"; then
      fail cmake "found redlock in $(grep redlock_DIR "$project/build/CMakeCache.txt"), not the package"
    else
      check_output cmake "$project/build/consumer"
    fi
  else
    fail cmake "find_package(redlock $want) or the build failed"
  fi
fi

# A real lock, with the library and with the command, on a redis-server of our own.
if ! command -v redis-server >/dev/null; then
  echo "deb-test lock: skipped (no redis-server; scripts/setup.sh installs it)"
else
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
  mkdir -p "$tmp/redis"
  redis-server --bind 127.0.0.1 --port "$port" --dir "$tmp/redis" --save '' --appendonly no \
    --daemonize no --logfile "$tmp/redis/log" &
  redis_pid=$!
  master=redis://127.0.0.1:$port
  for _ in $(seq 100); do
    redlock status -m "$master" >/dev/null 2>&1 && break
    sleep 0.1
  done
  # shellcheck disable=SC2046 # pkg-config's output is a list of words
  if ! step "$tmp/lock-build.log" g++ -std=c++17 test/consumers/lock_consumer.cpp \
    $(pkg-config --cflags --libs redlock) -o "$tmp/lock-consumer"; then
    fail lock-library "the lock consumer did not build"
  elif ! out=$(timeout 60 "$tmp/lock-consumer" "$master" 2>&1) || [[ $out != "locked, refused, unlocked" ]]; then
    fail lock-library "lock_consumer $master: $out"
  else
    pass lock-library
  fi
  # The command: run holds it; a second run -n meanwhile exits 1.
  # shellcheck disable=SC2016 # expanded by the inner sh
  out=$(timeout 60 redlock run -m "$master" --ttl 5s deb-test -- \
    sh -c 'redlock run -n -m "$1" deb-test -- true; echo "inner $?"; echo "outer holds $REDLOCK_RESOURCE"' _ "$master" 2>&1)
  status=$?
  if ((status != 0)) || [[ $out != $'inner 1\nouter holds deb-test' ]]; then
    fail lock-command "redlock run exited $status, printed: $out"
  else
    pass lock-command
  fi
  kill "$redis_pid" 2>/dev/null
  wait "$redis_pid" 2>/dev/null
  redis_pid=''
fi

finish
