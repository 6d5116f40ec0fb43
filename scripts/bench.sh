#!/usr/bin/env bash
# The figures in docs/performance.md, from nothing:
#   1. bench_acquire with its own masters (9, pinned to CPU 1; client on CPU 0):
#      latency vs N, throughput, a paused master, memory, allocations;
#   2. instructions per try_lock+unlock cycle at N = 5 (callgrind: stable on
#      noisy machines), from the difference of two run lengths;
#   3. scripts/bench-peers.sh: node-redlock and ours on the same masters, N = 1..9;
#   4. the plot bench/results/latency-vs-n.png.
# Results go to bench/results/*-DATE.jsonl. Takes about 10 minutes.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
day=$(date +%F)
results=bench/results
mkdir -p "$results"

bash scripts/setup.sh
for tool in valgrind gnuplot; do
  if ! command -v "$tool" >/dev/null; then
    package=$tool
    [[ $tool == gnuplot ]] && package=gnuplot-nox
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null
  fi
done
ninja -C "$BUILD_DIR" -j2 bench/bench_acquire

echo "=== 1. bench_acquire (own masters)"
timeout 1800 "$BUILD_DIR/bench/bench_acquire" | tee "$results/acquire-$day.jsonl"

echo "=== 2. instructions per cycle (callgrind), ours and the floor's"
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BUILD_DIR/bench/bench_acquire" "$1" "$2" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
# One pair of runs varies by about 500 instructions a cycle (how many turns
# of the loop the replies take): the median of three pairs is reported.
per_cycle() {
  local short long
  for _ in 1 2 3; do
    short=$(count "$1" 1000)
    long=$(count "$1" 3000)
    echo $(((long - short) / 2000))
  done | sort -n | sed -n 2p
}
: >"$results/instructions-$day.jsonl"
for impl in redlock-async floor; do
  flag=--cycles
  [[ $impl == floor ]] && flag=--floor-cycles
  echo "{\"bench\":\"instructions\",\"impl\":\"$impl\",\"masters\":5,\"per_cycle\":$(per_cycle "$flag"),\"cycle\":\"try_lock+unlock\"}" |
    tee -a "$results/instructions-$day.jsonl"
done

echo "=== 3. peers"
NS="1 3 5 7 9" OUT="$results/peers-$day.jsonl" bash scripts/bench-peers.sh

echo "=== 4. plot"
python3 bench/plot.py "$results/peers-$day.jsonl" "$results/latency-vs-n.png"
