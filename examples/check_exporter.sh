#!/usr/bin/env bash
# stats-exporter against a real master (meson test, suite "examples"): it
# prints the port it serves, /metrics answers in the Prometheus text format
# with the master up and the demo lock's acquisitions counted, any other path
# is a 404, and --seconds ends it with status 0. The master listens on a Unix
# socket in a temporary directory; both processes are stopped by PID.
# Arguments: the stats-exporter binary.
set -uo pipefail

exporter=$1
dir=$(mktemp -d)
redis_pid=
exporter_pid=
cleanup() {
  [[ -n $exporter_pid ]] && kill "$exporter_pid" 2>/dev/null
  [[ -n $redis_pid ]] && kill -9 "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

redis-server --port 0 --unixsocket "$dir/redis.sock" --save '' --appendonly no --dir "$dir" \
  >"$dir/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 100); do
  [[ -S $dir/redis.sock ]] && break
  sleep 0.05
done
[[ -S $dir/redis.sock ]] || fail "redis-server did not start: $(tail -3 "$dir/redis.log")"

"$exporter" --port 0 --seconds 20 "unix://$dir/redis.sock" >"$dir/out" 2>"$dir/err" &
exporter_pid=$!
port=
for _ in $(seq 100); do
  port=$(sed -n 's|^serving http://127.0.0.1:\([0-9]*\)/metrics$|\1|p' "$dir/out")
  [[ -n $port ]] && break
  sleep 0.05
done
[[ -n $port ]] || fail "no 'serving' line: $(cat "$dir/out" "$dir/err")"

get() {  # PATH: the whole HTTP response, over bash's /dev/tcp
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf 'GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n' "$1" >&3
  timeout 5 cat <&3
  exec 3<&-
}

metrics=
for _ in $(seq 50); do
  metrics=$(get /metrics)
  [[ $metrics =~ redlock_calls_total\{call=\"acquire\",outcome=\"ok\"\}\ [1-9] ]] && break
  sleep 0.1
done
master="master=\"unix://$dir/redis.sock\""
for want in "HTTP/1.1 200 OK" "Content-Type: text/plain; version=0.0.4" \
  "# TYPE redlock_master_votes_total counter" "redlock_master_up{$master} 1" \
  "redlock_master_state{$master,state=\"up\",role=\"master\"} 1" \
  "redlock_acquire_seconds_bucket{le=\"+Inf\"}"; do
  [[ $metrics == *"$want"* ]] || fail "/metrics without '$want':"$'\n'"$metrics"
done
[[ $metrics =~ redlock_calls_total\{call=\"acquire\",outcome=\"ok\"\}\ [1-9] ]] ||
  fail "no acquisition counted:"$'\n'"$metrics"
[[ $(get /other) == "HTTP/1.1 404"* ]] || fail "/other is not a 404"

kill -INT "$exporter_pid"
wait "$exporter_pid"
status=$?
exporter_pid=
[[ $status == 0 ]] || fail "exited $status after SIGINT: $(cat "$dir/err")"
echo "ok: stats-exporter served /metrics on port $port and stopped on SIGINT"
