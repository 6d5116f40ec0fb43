#!/usr/bin/env bash
# Local independent redis masters on 127.0.0.1 (no replication between them),
# for demos and manual fault injection.
#
#   masters.sh start [N] [BASE_PORT]   N masters (default 5) on BASE_PORT.. (default 7001)
#   masters.sh stop                    SIGTERM every recorded master, SIGKILL if it lingers
#   masters.sh kill I...               kill -9 masters by index (1-based)
#   masters.sh restart I...            start them again on the same port, empty
#   masters.sh pause I... | resume I...  SIGSTOP / SIGCONT
#   masters.sh status                  index, port, pid, alive
#   masters.sh uris                    redis://127.0.0.1:PORT, one per line
#
# State lives in ${REDLOCK_MASTERS_DIR:-/tmp/redlock-masters}/<index>/ (port,
# pid, log). A recorded pid is acted on only while that process runs in that
# directory (redis-server chdirs to its --dir), so a reused pid is never killed.
set -euo pipefail

MASTERS_DIR=${REDLOCK_MASTERS_DIR:-/tmp/redlock-masters}
wait_seconds=10

die() {
  echo "masters.sh: $*" >&2
  exit 1
}

usage() {
  sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0" >&2
  exit 2
}

is_number() { [[ $1 =~ ^[0-9]+$ ]]; }

master_dir() { echo "$MASTERS_DIR/$1"; }

recorded_indexes() {
  local d
  [[ -d $MASTERS_DIR ]] || return 0
  for d in "$MASTERS_DIR"/*/; do
    d=${d%/}
    d=${d##*/}
    if is_number "$d" && [[ -f $MASTERS_DIR/$d/port ]]; then
      echo "$d"
    fi
  done | sort -n
}

recorded_pid() {
  local file
  file="$(master_dir "$1")/pid"
  if [[ -f $file ]]; then cat "$file"; fi
}

recorded_port() { cat "$(master_dir "$1")/port"; }

# True when the recorded pid of master $1 is alive and is our redis-server.
alive() {
  local pid cwd
  pid=$(recorded_pid "$1")
  [[ -n $pid ]] || return 1
  cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) || return 1
  [[ $cwd == "$(master_dir "$1")" ]]
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Starts master $1 on port $2 in its directory (wiped first) and waits for PONG.
launch() {
  local index=$1 port=$2 dir pid deadline
  dir=$(master_dir "$index")
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "$port" >"$dir/port"
  if port_in_use "$port"; then
    die "port $port is already in use"
  fi
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
    --maxmemory-policy noeviction --daemonize no --protected-mode no \
    --dir "$dir" --logfile "$dir/redis.log" </dev/null >>"$dir/redis.out" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/pid"
  deadline=$((SECONDS + wait_seconds))
  until [[ $(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]]; do
    if ! kill -0 "$pid" 2>/dev/null || ((SECONDS >= deadline)); then
      tail -n 20 "$dir/redis.log" "$dir/redis.out" >&2 2>/dev/null || true
      die "master $index (port $port) did not answer PING"
    fi
    sleep 0.05
  done
  echo "master $index: 127.0.0.1:$port pid $pid"
}

# SIGKILL master $1 if alive and wait (bounded) until it is gone.
kill9() {
  local index=$1 pid deadline
  if alive "$index"; then
    pid=$(recorded_pid "$index")
    kill -9 "$pid" 2>/dev/null || true
    deadline=$((SECONDS + wait_seconds))
    while alive "$index" && ((SECONDS < deadline)); do sleep 0.05; done
    if alive "$index"; then
      die "master $index (pid $pid) survived SIGKILL"
    fi
  fi
  rm -f "$(master_dir "$index")/pid" "$(master_dir "$index")/paused"
}

check_indexes() {
  (($# > 0)) || die "which master? give 1-based indexes"
  local index
  for index in "$@"; do
    if ! is_number "$index" || [[ ! -f $(master_dir "$index")/port ]]; then
      die "no master $index"
    fi
  done
}

cmd_start() {
  local n=${1:-5} base=${2:-7001} index
  if ! is_number "$n" || ((n < 1)); then
    die "N must be a positive number: $n"
  fi
  if ! is_number "$base" || ((base < 1 || base + n - 1 > 65535)); then
    die "bad BASE_PORT: $base"
  fi
  for index in $(recorded_indexes); do
    if alive "$index"; then
      die "master $index is still running; run: $0 stop"
    fi
  done
  rm -rf "$MASTERS_DIR"
  mkdir -p "$MASTERS_DIR"
  MASTERS_DIR=$(cd "$MASTERS_DIR" && pwd -P)
  for ((index = 1; index <= n; index++)); do
    launch "$index" $((base + index - 1))
  done
}

cmd_stop() {
  local index pid deadline
  for index in $(recorded_indexes); do
    if alive "$index"; then
      pid=$(recorded_pid "$index")
      # A stopped process would hold SIGTERM pending; continue it first.
      kill -CONT "$pid" 2>/dev/null || true
      kill -TERM "$pid" 2>/dev/null || true
    fi
  done
  deadline=$((SECONDS + wait_seconds))
  for index in $(recorded_indexes); do
    while alive "$index" && ((SECONDS < deadline)); do sleep 0.05; done
    if alive "$index"; then
      echo "masters.sh: master $index ignored SIGTERM; sending SIGKILL" >&2
    fi
    kill9 "$index"
  done
  echo "stopped"
}

cmd_kill() {
  check_indexes "$@"
  local index
  for index in "$@"; do
    kill9 "$index"
    echo "master $index: killed"
  done
}

cmd_restart() {
  check_indexes "$@"
  local index
  for index in "$@"; do
    kill9 "$index"
    launch "$index" "$(recorded_port "$index")"
  done
}

cmd_signal() {
  local signal=$1 word=$2 index
  shift 2
  check_indexes "$@"
  for index in "$@"; do
    alive "$index" || die "master $index is not running"
    kill "-$signal" "$(recorded_pid "$index")"
    if [[ $signal == STOP ]]; then
      touch "$(master_dir "$index")/paused"
    else
      rm -f "$(master_dir "$index")/paused"
    fi
    echo "master $index: $word"
  done
}

cmd_status() {
  local index state
  printf '%-6s %-6s %-8s %s\n' index port pid alive
  for index in $(recorded_indexes); do
    if ! alive "$index"; then
      state=no
    elif [[ -f $(master_dir "$index")/paused ]]; then
      state=paused
    else
      state=yes
    fi
    printf '%-6s %-6s %-8s %s\n' "$index" "$(recorded_port "$index")" \
      "$(recorded_pid "$index" || true)" "$state"
  done
}

cmd_uris() {
  local index
  for index in $(recorded_indexes); do
    echo "redis://127.0.0.1:$(recorded_port "$index")"
  done
}

(($# > 0)) || usage
if [[ -d $MASTERS_DIR ]]; then
  MASTERS_DIR=$(cd "$MASTERS_DIR" && pwd -P)
fi
command=$1
shift
case $command in
  start) cmd_start "$@" ;;
  stop) cmd_stop ;;
  kill) cmd_kill "$@" ;;
  restart) cmd_restart "$@" ;;
  pause) cmd_signal STOP paused "$@" ;;
  resume) cmd_signal CONT resumed "$@" ;;
  status) cmd_status ;;
  uris) cmd_uris ;;
  *) usage ;;
esac
