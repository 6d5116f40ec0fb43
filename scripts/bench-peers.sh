#!/usr/bin/env bash
# Peer comparison: node-redlock vs our bench_acquire on the same 5 local masters.
#
#   scripts/bench-peers.sh
#   scripts/bench-peers.sh --install-only   only install node-redlock (for bench-contended.sh)
#
# Environment (all optional):
#   REDLOCK_PEERS_DIR  scratch folder for the npm install (default /tmp/redlock-peers;
#                      must lie outside the repository)
#   BUILD_DIR          build folder holding bench/bench_acquire (default build)
#   OUT                JSONL written here (default bench/results/peers-DATE.jsonl)
#   REPS               repetitions, node and ours interleaved (default 3)
#   ITERATIONS WARMUP INFLIGHT DURATION_MS   workload sizes (2000 200 256 3000)
#   NS                 the numbers of masters to measure (default "5"; e.g. "1 3 5 7 9")
#   BASE_PORT          first master port (default: a free run of ports in 20000-32709, below the
#                      ephemeral ports clients get)
#
# Masters are pinned to CPU 1 and the client to CPU 0 (when there are 2+ CPUs).
# Every master started here is stopped by pid on exit, failure included.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$repo"

peers_dir=${REDLOCK_PEERS_DIR:-/tmp/redlock-peers}
build_dir=${BUILD_DIR:-build}
out=${OUT:-bench/results/peers-$(date +%F).jsonl}
reps=${REPS:-3}
iterations=${ITERATIONS:-2000}
warmup=${WARMUP:-200}
inflight=${INFLIGHT:-256}
duration_ms=${DURATION_MS:-3000}
ns=${NS:-5}   # the N values to measure, e.g. NS="1 3 5 7 9"
n_masters=$(tr ' ' '\n' <<<"$ns" | sort -n | tail -1)
redlock_version=5.0.0-beta.2
ioredis_major=5
node_bench=$repo/bench/peers/node_redlock_bench.js
our_bench=$build_dir/bench/bench_acquire

note() { echo "bench-peers: $*" >&2; }
die() {
  note "$*"
  exit 1
}

# ---- tools -----------------------------------------------------------------
apt_updated=0
apt_install() {
  if ((apt_updated == 0)); then
    apt-get update -qq
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

if ! command -v node >/dev/null 2>&1; then
  note "node is missing; installing nodejs and npm from Debian"
  apt_install nodejs npm
fi
if [[ -x /usr/bin/python3 ]]; then
  python=/usr/bin/python3
elif command -v python3 >/dev/null 2>&1; then
  python=$(command -v python3)
else
  note "python3 is missing; installing it from Debian"
  apt_install python3
  python=/usr/bin/python3
fi
command -v redis-server >/dev/null 2>&1 || die "redis-server is missing (apt-get install redis-server)"
command -v taskset >/dev/null 2>&1 || die "taskset is missing (apt-get install util-linux)"

# ---- node-redlock in a scratch folder outside the repository ----------------
mkdir -p "$peers_dir"
peers_dir=$(cd "$peers_dir" && pwd -P)
case "$peers_dir/" in
  "$repo"/*) die "REDLOCK_PEERS_DIR must lie outside the repository: $peers_dir" ;;
esac

installed_version() { # package name -> version from its package.json, or nothing
  local file=$peers_dir/node_modules/$1/package.json
  [[ -f $file ]] || return 0
  node -e 'process.stdout.write(String(require(process.argv[1]).version).replace(/^v/, ""))' "$file"
}
have_redlock=$(installed_version redlock)
have_ioredis=$(installed_version ioredis)
if [[ $have_redlock == "$redlock_version" && ${have_ioredis%%.*} == "$ioredis_major" ]]; then
  note "node-redlock $have_redlock and ioredis $have_ioredis already in $peers_dir"
else
  command -v npm >/dev/null 2>&1 || apt_install npm
  note "installing redlock@$redlock_version ioredis@$ioredis_major into $peers_dir"
  [[ -f $peers_dir/package.json ]] || echo '{"name":"redlock-peers","private":true}' >"$peers_dir/package.json"
  (cd "$peers_dir" && timeout 600 npm install --no-audit --no-fund \
    "redlock@$redlock_version" "ioredis@$ioredis_major" >&2)
fi

if [[ ${1:-} == --install-only ]]; then
  exit 0
fi

# ---- masters ---------------------------------------------------------------
export REDLOCK_MASTERS_DIR
REDLOCK_MASTERS_DIR=$(mktemp -d /tmp/redlock-bench-peers-masters.XXXXXX)
tmp_out=$(mktemp /tmp/redlock-bench-peers-out.XXXXXX)
child=

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  if [[ -n $child ]]; then
    kill -TERM "$child" 2>/dev/null || true # timeout passes it on to the bench
    wait "$child" 2>/dev/null || true
  fi
  if [[ -d $REDLOCK_MASTERS_DIR ]]; then
    "$repo/scripts/masters.sh" stop >/dev/null 2>&1 || note "masters.sh stop failed; see $REDLOCK_MASTERS_DIR"
    # masters.sh acts only on pids it recorded that still run in their dirs.
    local f pid left=0
    for f in "$REDLOCK_MASTERS_DIR"/*/pid; do
      [[ -f $f ]] || continue
      pid=$(<"$f")
      if [[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == "$(dirname "$f")" ]]; then
        kill -9 "$pid" 2>/dev/null || true
        left=1
      fi
    done
    ((left)) && note "some master needed SIGKILL"
    rm -rf "$REDLOCK_MASTERS_DIR"
  fi
  rm -f "$tmp_out" "$tmp_out.run"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
pick_base_port() {
  local base i ok
  for _ in $(seq 1 50); do
    base=$((20000 + (RANDOM % 1270) * 10))  # below the ephemeral ports (32768-)
    ok=1
    for ((i = 0; i < n_masters; i++)); do
      port_free $((base + i)) || ok=0
    done
    if ((ok)); then
      echo "$base"
      return 0
    fi
  done
  return 1
}
base_port=${BASE_PORT:-$(pick_base_port)} || die "no free run of $n_masters ports found"
"$repo/scripts/masters.sh" start "$n_masters" "$base_port" >&2

ports=$(seq -s, "$base_port" $((base_port + n_masters - 1)))
cpus=$(nproc)
client_pin=()
if ((cpus >= 2)); then
  for ((i = 1; i <= n_masters; i++)); do
    # -a: every thread of the master (redis keeps bio threads beside the main one).
    taskset -a -cp 1 "$(<"$REDLOCK_MASTERS_DIR/$i/pid")" >/dev/null
  done
  client_pin=(taskset -c 0)
  note "masters on CPU 1 (ports $ports), clients on CPU 0"
else
  note "only $cpus CPU: no pinning"
fi

# ---- runs ------------------------------------------------------------------
have_ours=0
if [[ -x $our_bench ]]; then
  have_ours=1
else
  note "note: $our_bench not found; running node-redlock only"
fi

# Runs one benchmark; keeps its JSON lines (stdout lines starting with '{').
run_one() {
  local label=$1 limit=$2 status=0
  shift 2
  note "run: $label"
  # In the background and waited for, so that INT/TERM reach the trap at once.
  timeout -k 5 "$limit" "${client_pin[@]}" "$@" >"$tmp_out.run" &
  child=$!
  wait "$child" || status=$?
  child=
  grep '^{' "$tmp_out.run" >>"$tmp_out" || true
  rm -f "$tmp_out.run"
  ((status == 0)) || die "$label exited with status $status"
}

started=$SECONDS
for ((rep = 1; rep <= reps; rep++)); do
  for n in $ns; do
    run_one "node-redlock N=$n, repetition $rep/$reps" 150 \
      node "$node_bench" --ports "$(cut -d, -f1-"$n" <<<"$ports")" --iterations "$iterations" \
      --warmup "$warmup" --inflight "$inflight" --duration-ms "$duration_ms" --deadline-s 120 \
      --modules "$peers_dir"
  done
  if ((have_ours)); then
    run_one "bench_acquire, repetition $rep/$reps" 600 \
      "$our_bench" --ports "$ports" --masters "$(tr ' ' , <<<"$ns")" --iterations "$iterations" \
      --warmup "$warmup" --repeat 1
  fi
done
note "runs took $((SECONDS - started)) s"

mkdir -p "$(dirname "$out")"
cp "$tmp_out" "$out"
note "wrote $(wc -l <"$out") JSON lines to $out"

# ---- table -----------------------------------------------------------------
"$python" - "$out" "$inflight" <<'PY'
import json, statistics, sys

path, wanted_inflight = sys.argv[1], int(sys.argv[2])
rows = {}  # (bench, metric label, key) -> impl -> [values]
order = []
with open(path) as f:
    for line in f:
        line = line.strip()
        if not line:
            continue
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if r.get("rep") == "median":
            continue  # bench_acquire's own summary of a single repetition
        b, impl = r.get("bench"), r.get("impl")
        if b in ("try_lock", "try_lock_unlock"):
            metrics = [("p50_us", "p50 us"), ("p99_us", "p99 us")]
        elif b == "throughput":
            metrics = [("cycles_per_s", "cycles/s @%s" % r.get("in_flight"))]
        else:
            continue
        for field, label in metrics:
            if field not in r:
                continue
            label = "N=%s %s" % (r.get("masters"), label)
            key = (b, label)
            if key not in rows:
                rows[key] = {}
                order.append(key)
            rows[key].setdefault(impl, []).append(float(r[field]))

def bench_rank(key):
    b, label = key
    rank = {"try_lock": 0, "try_lock_unlock": 1, "throughput": 2}[b]
    masters = int(label.split()[0][2:])
    if b == "throughput":
        n = int(label.split("@")[1]) if label.split("@")[1].isdigit() else 0
        # the configured depth first, then the others ascending
        return (rank, masters, 0 if n == wanted_inflight else 1, n)
    return (rank, masters, 0, label)

order.sort(key=bench_rank)
ours = ["redlock-async", "redlock-blocking"]
impls = ["node-redlock"] + ours + ["floor"]
seen = {i for v in rows.values() for i in v}
impls += sorted(seen - set(impls))

def med(key, impl):
    v = rows[key].get(impl)
    return statistics.median(v) if v else None

def fmt(x, ratio=False):
    if x is None:
        return "-"
    if ratio:
        return "%.2fx" % x
    return "%.1f" % x if x < 1000 else "%.0f" % x

header = ["bench", "metric"] + ["%s (n)" % i for i in impls]
ratio_cols = []
for o in ours:
    ratio_cols += [("%s/node" % o.replace("redlock-", ""), o, "node-redlock"),
                   ("%s/floor" % o.replace("redlock-", ""), o, "floor")]
header += [c[0] for c in ratio_cols]
table = [header]
for key in order:
    b, label = key
    cells = [b, label]
    for impl in impls:
        m = med(key, impl)
        n = len(rows[key].get(impl, []))
        cells.append("-" if m is None else "%s (%d)" % (fmt(m), n))
    for _, a, ref in ratio_cols:
        x, y = med(key, a), med(key, ref)
        cells.append(fmt(x / y, True) if x is not None and y else "-")
    table.append(cells)

widths = [max(len(r[i]) for r in table) for i in range(len(header))]
print()
print("Median over repetitions (n = repetitions). Ratios are ours / reference:")
print("below 1x is better for latency (us), above 1x is better for throughput.")
for i, r in enumerate(table):
    print("  ".join(c.ljust(widths[j]) if j < 2 else c.rjust(widths[j]) for j, c in enumerate(r)))
    if i == 0:
        print("  ".join("-" * w for w in widths))
PY
