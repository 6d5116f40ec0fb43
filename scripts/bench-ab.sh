#!/usr/bin/env bash
# The cost of a change to the library, measured in one run: two bench_acquire
# binaries (built from the commit before the change and from the change)
# take turns against the same five masters, pinned to CPU 1, the client to
# CPU 0. Each turn is a whole `bench_acquire --ports ...` run (3,000
# iterations a series); the masters are flushed between turns, since the
# held-locks series leaves 10,000 locks behind.
#
#   scripts/bench-ab.sh BEFORE_BIN AFTER_BIN LABEL [REPS]
#
# Prints every line of both binaries, tagged "build":"before"/"after", then a
# summary: for the async client's try_lock and try_lock_unlock series at each
# number of masters the median over turns of each build's p50 and p99, for
# its throughput the median cycles per second, and after/before. REPS
# (default 5) turns each.
set -euo pipefail

[[ $# -ge 3 ]] || { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2; }
before=$1 after=$2 label=$3 reps=${4:-5}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
n_masters=5

export REDLOCK_MASTERS_DIR
REDLOCK_MASTERS_DIR=$(mktemp -d /tmp/redlock-bench-ab.XXXXXX)
out=$(mktemp /tmp/redlock-bench-ab-out.XXXXXX)
cleanup() {
  "$repo/scripts/masters.sh" stop >/dev/null 2>&1 || true
  rm -rf "$REDLOCK_MASTERS_DIR" "$out"
}
trap cleanup EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
base=
for _ in $(seq 1 50); do
  candidate=$((20000 + (RANDOM % 1270) * 10))  # below the ephemeral ports (32768-)
  ok=1
  for ((i = 0; i < n_masters; i++)); do port_free $((candidate + i)) || ok=0; done
  if ((ok)); then base=$candidate && break; fi
done
[[ -n $base ]] || { echo "bench-ab.sh: no free ports" >&2; exit 1; }
"$repo/scripts/masters.sh" start "$n_masters" "$base" >&2
ports=$(seq -s, "$base" $((base + n_masters - 1)))
cpu=()
if (($(nproc) >= 2)); then
  for ((i = 1; i <= n_masters; i++)); do taskset -a -cp 1 "$(<"$REDLOCK_MASTERS_DIR/$i/pid")" >/dev/null; done
  cpu=(taskset -c 0)
fi

for ((rep = 1; rep <= reps; rep++)); do
  for build in before after; do
    bin=$before
    [[ $build == after ]] && bin=$after
    for ((port = base; port < base + n_masters; port++)); do
      redis-cli -p "$port" flushall >/dev/null
    done
    timeout 600 "${cpu[@]}" "$bin" --ports "$ports" --repeat 1 --iterations 3000 |
      sed "s/^{/{\"build\":\"$build\",\"turn\":$rep,/" | tee -a "$out"
  done
done

python3 - "$out" "$label" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
turns = [r for r in rows if r.get("impl") == "redlock-async" and r.get("rep") != "median"]

def summarise(series, keys, **what):
    summary = {"bench": "ab", "change": sys.argv[2], **what,
               "turns": sum(r["build"] == "after" for r in series)}
    for key in keys:
        b = statistics.median(r[key] for r in series if r["build"] == "before")
        a = statistics.median(r[key] for r in series if r["build"] == "after")
        summary[key + "_before"], summary[key + "_after"] = round(b, 2), round(a, 2)
        summary[key + "_ratio"] = round(a / b, 3)
    print(json.dumps(summary))

for bench in ("try_lock", "try_lock_unlock"):
    for n in (1, 3, 5):
        series = [r for r in turns if r["bench"] == bench and r["masters"] == n]
        if series:
            summarise(series, ("p50_us", "p99_us"), of=bench, masters=n)
for in_flight in sorted({r["in_flight"] for r in turns if r["bench"] == "throughput"}):
    series = [r for r in turns if r["bench"] == "throughput" and r["in_flight"] == in_flight]
    summarise(series, ("cycles_per_s",), of="throughput", masters=5, in_flight=in_flight)
PY
