#!/usr/bin/env bash
# The examples' command-line rules (meson test, suite "examples"): --help prints
# the usage and exits 0; no master, a bad URI or an unknown option exit 64
# with the usage; lock work that fails (a master nobody listens on: loopback
# port 1) exits non-zero and names the master. Arguments: the example binaries.
set -uo pipefail

# shellcheck source=expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

for example in "$@"; do
  name=$(basename "$example")
  mode=()
  [[ $name == redlock-demo ]] && mode=(probe)
  expect 0 "usage: $name" "$example" --help
  expect 64 "usage: $name" "$example" "${mode[@]}"
  expect 64 "bad master URI 'http://x'" "$example" "${mode[@]}" http://x
  expect 64 "unknown option '--bogus'" "$example" "${mode[@]}" --bogus redis://127.0.0.1:1
  # One master that refuses: the lock fails, the example says why and which.
  want=1
  [[ $name == redlock-demo ]] && want=2  # probe: unavailable
  expect "$want" "127.0.0.1:1: cannot connect: connection refused" "$example" "${mode[@]}" redis://127.0.0.1:1
done
exit $failed
