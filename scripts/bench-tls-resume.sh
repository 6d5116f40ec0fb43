#!/usr/bin/env bash
# What TLS session resumption saves a reconnect (bench/tls_resume.py): one
# redis-server with a fresh self-signed certificate (RSA 2048) on a free
# loopback port, pinned to CPU 1, the client to CPU 0.
#
#   scripts/bench-tls-resume.sh [ROUNDS] [REPS]
#
# Prints the script's JSON lines (default 200 handshakes of each kind, 3
# repetitions).
set -euo pipefail

[[ ${1:-} == -* ]] && { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0" >&2; exit 2; }
rounds=${1:-200} reps=${2:-3}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=$(mktemp -d /tmp/redlock-tls-resume.XXXXXX)
pid=
cleanup() {
  if [[ -n $pid ]]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=
for _ in $(seq 1 50); do
  candidate=$((20000 + RANDOM % 12000))  # below the ephemeral ports (32768-)
  if port_free "$candidate"; then port=$candidate && break; fi
done
[[ -n $port ]] || { echo "bench-tls-resume.sh: no free port" >&2; exit 1; }

taskset -c 1 redis-server --port 0 --bind 127.0.0.1 --tls-port "$port" --tls-cert-file "$dir/cert.pem" \
  --tls-key-file "$dir/key.pem" --tls-ca-cert-file "$dir/cert.pem" --tls-auth-clients no \
  --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  port_free "$port" || break
  sleep 0.05
done
port_free "$port" && { echo "bench-tls-resume.sh: redis-server did not start:" >&2; cat "$dir/redis.log" >&2; exit 1; }

taskset -c 0 python3 "$repo/bench/tls_resume.py" --port "$port" --ca "$dir/cert.pem" --rounds "$rounds" --rep "$reps"
