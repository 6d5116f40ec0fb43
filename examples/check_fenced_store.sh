#!/usr/bin/env bash
# fenced-store's rules (meson test, suite "examples"): the store accepts a
# token at least the last it accepted (the holder's own second write carries
# the same one) and rejects a smaller one with exit 3; a bad TOKEN or HOLD_MS,
# no master or an unknown command exit 64 with the usage; --help exits 0.
# Argument: the fenced-store binary.
set -uo pipefail

fenced=$1
store=$(mktemp)
trap 'rm -f "$store"' EXIT
: >"$store"

# shellcheck source=expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/expect.sh"

expect 0 "usage: fenced-store" "$fenced" --help
expect 0 'accepted "first" with token 5' "$fenced" write "$store" 5 first
expect 0 'accepted "again" with token 5' "$fenced" write "$store" 5 again
expect 3 'REJECTED "stale": token 4 is below 5' "$fenced" write "$store" 4 stale
expect 0 'accepted "later" with token 9' "$fenced" write "$store" 9 later
expect 64 "TOKEN 'x' is not a number" "$fenced" write "$store" x text
expect 64 "TOKEN '-1' is not a number" "$fenced" write "$store" -1 text
expect 64 "TOKEN '0' is not a number" "$fenced" write "$store" 0 text
expect 64 "HOLD_MS '1.5s' is not a number" "$fenced" hold "$store" A 1.5s redis://127.0.0.1:1
expect 64 "bad master URI 'http://x'" "$fenced" hold "$store" A 100 http://x
expect 64 "usage: fenced-store" "$fenced" hold "$store" A 100
expect 64 "usage: fenced-store" "$fenced" frobnicate
[[ $(head -n 1 "$store") == 9 ]] || { echo "FAIL: the store's last token is $(head -n 1 "$store"), want 9"; failed=1; }
exit $failed
