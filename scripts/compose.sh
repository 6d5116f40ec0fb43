#!/usr/bin/env bash
# docker-compose.yml's five masters (127.0.0.1:7001-7005, or the five ports
# from REDLOCK_BASE_PORT on) on a machine with Docker, even one from Debian's
# packages with no image registry.
#
#   scripts/compose.sh up [--start-dockerd]   start them, wait until healthy
#   scripts/compose.sh down     remove them; stop the dockerd this script started
#   scripts/compose.sh compose ARGS...   run docker compose / docker-compose on the file
#
# up: needs a Docker daemon that answers; it starts none of its own unless
# given --start-dockerd (as root; scripts/test.sh passes it), and then with
# --bridge=none --iptables=false (the masters use the host's network, so no
# container address exists and nothing leaves loopback). Uses
# REDLOCK_REDIS_IMAGE (default redis:7) when it is there or can be pulled,
# and otherwise builds redlock-redis:local FROM scratch out of the host's own
# redis-server, redis-cli and the libraries they link. Works with `docker
# compose` and with docker-compose 1.29 (which has no --wait: the health
# checks are polled). Last, each port must answer here: on Docker Desktop it
# does only with host networking enabled.
#
# Exit status 3 means the masters cannot run or be reached here (no Docker, no
# daemon, a port taken; the reason is printed); anything else non-zero is a
# failure.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
compose_file=$PWD/docker-compose.yml
state_dir=${REDLOCK_COMPOSE_STATE:-/tmp/redlock-compose}
local_image=redlock-redis:local
services=(master1 master2 master3 master4 master5)

# docker-compose.yml reads one port per master (compose cannot add).
base_port=${REDLOCK_BASE_PORT:-7001}
if [[ ! $base_port =~ ^[0-9]+$ ]] || ((base_port < 1 || base_port + 4 > 65535)); then
  echo "compose.sh: bad REDLOCK_BASE_PORT: $base_port" >&2
  exit 64
fi
ports=()
for i in 1 2 3 4 5; do
  ports+=($((base_port + i - 1)))
  export "REDLOCK_PORT$i=$((base_port + i - 1))"
done

say() { echo "compose.sh: $*" >&2; }
usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
  exit 64
}
cannot() {
  say "Docker cannot run here: $*"
  exit 3
}

# One project name wherever the checkout is (REDLOCK_COMPOSE_PROJECT).
project=${REDLOCK_COMPOSE_PROJECT:-redlock}

compose() {
  if docker compose version >/dev/null 2>&1; then
    docker compose -p "$project" -f "$compose_file" "$@"
  elif command -v docker-compose >/dev/null; then
    docker-compose -p "$project" -f "$compose_file" "$@"
  else
    cannot "neither 'docker compose' nor docker-compose is installed (Debian: docker-compose)"
  fi
}

daemon_answers() { timeout 10 docker info >/dev/null 2>&1; }

start_dockerd() {
  command -v dockerd >/dev/null || cannot "no dockerd (Debian: docker.io)"
  ((EUID == 0)) || cannot "dockerd is not running and starting it needs root"
  mkdir -p "$state_dir"
  say "starting dockerd (--bridge=none --iptables=false), log in $state_dir/dockerd.log"
  dockerd --bridge=none --iptables=false --ip6tables=false >"$state_dir/dockerd.log" 2>&1 &
  echo $! >"$state_dir/dockerd.pid"
  for _ in $(seq 1 60); do
    daemon_answers && return 0
    kill -0 "$(cat "$state_dir/dockerd.pid")" 2>/dev/null || break
    sleep 0.5
  done
  tail -n 20 "$state_dir/dockerd.log" >&2 || true
  stop_dockerd
  cannot "dockerd did not start"
}

stop_dockerd() {
  [[ -f $state_dir/dockerd.pid ]] || return 0
  local pid
  pid=$(cat "$state_dir/dockerd.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 60); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
  fi
  rm -f "$state_dir/dockerd.pid"
}

# A redis image FROM scratch: the host's binaries and every library they
# load, at the same paths.
build_local_image() {
  local context program lib
  context=$(mktemp -d /tmp/redlock-redis-image.XXXXXX)
  mkdir -p "$context/root/usr/bin" "$context/root/tmp"
  for program in redis-server redis-cli; do
    command -v "$program" >/dev/null || cannot "no $program on the host to build $local_image from"
    # redis-server is a link to redis-check-rdb and acts by the name it runs under.
    cp -L "$(command -v "$program")" "$context/root/usr/bin/$program"
    for lib in $(ldd "$(command -v "$program")" | grep -o '/[^ ]*'); do
      mkdir -p "$context/root$(dirname "$lib")"
      cp -L "$lib" "$context/root$lib"
    done
  done
  printf 'FROM scratch\nCOPY root/ /\nENV PATH=/usr/bin\n' >"$context/Dockerfile"
  say "building $local_image FROM scratch from the host's $(redis-server --version | cut -d' ' -f3)"
  local status=0
  DOCKER_BUILDKIT=0 docker build -q -t "$local_image" "$context" >/dev/null || status=$?
  rm -rf "$context"
  return $status
}

choose_image() {
  local image=${REDLOCK_REDIS_IMAGE:-redis:7}
  if docker image inspect "$image" >/dev/null 2>&1 || timeout 60 docker pull -q "$image" >/dev/null 2>&1; then
    echo "$image"
    return
  fi
  say "$image is not here and cannot be pulled: using $local_image"
  docker image inspect "$local_image" >/dev/null 2>&1 || build_local_image
  echo "$local_image"
}

wait_healthy() {
  local deadline=$((SECONDS + ${REDLOCK_COMPOSE_WAIT:-60})) service id health healthy
  while ((SECONDS < deadline)); do
    healthy=0
    for service in "${services[@]}"; do
      id=$(compose ps -q "$service" 2>/dev/null || true)
      [[ -n $id ]] || continue
      health=$(docker inspect -f '{{.State.Health.Status}}' "$id" 2>/dev/null || true)
      [[ $health == healthy ]] && healthy=$((healthy + 1))
    done
    ((healthy == ${#services[@]})) && return 0
    sleep 0.5
  done
  say "the masters did not all become healthy:"
  compose ps >&2 || true
  return 1
}

port_answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Something other than our masters on these ports (scripts/demo.sh, a system
# redis) would keep them from starting.
check_ports_free() {
  local port
  compose ps --services --filter status=running 2>/dev/null | grep -qx master1 && return 0
  for port in "${ports[@]}"; do
    if port_answers "$port"; then
      cannot "127.0.0.1:$port is taken by another program"
    fi
  done
}

# Healthy inside Docker is not enough: Docker Desktop runs the containers in
# a virtual machine whose host network is not this machine's.
check_ports_reached() {
  local port
  for port in "${ports[@]}"; do
    port_answers "$port" && continue
    say "the masters are healthy, but 127.0.0.1:$port does not answer here. On Docker Desktop," \
      "enable host networking (Settings, Resources, Network; 4.34 or later) or use" \
      "scripts/masters.sh instead; see docs/fault-injection.md"
    exit 3
  done
}

case ${1:-} in
  up)
    case ${2:-} in
      '' | --start-dockerd) ;;
      *) usage ;;
    esac
    if ! daemon_answers; then
      [[ ${2:-} == --start-dockerd ]] ||
        cannot "no Docker daemon answers (start yours, or pass --start-dockerd to start one as root)"
      start_dockerd
    fi
    check_ports_free
    REDLOCK_REDIS_IMAGE=$(choose_image)
    export REDLOCK_REDIS_IMAGE
    compose up -d
    wait_healthy
    check_ports_reached
    say "5 masters up on 127.0.0.1:${ports[0]}-${ports[4]} (image $REDLOCK_REDIS_IMAGE)"
    ;;
  down)
    if daemon_answers; then compose down --timeout 2 || true; fi
    stop_dockerd
    ;;
  compose)
    shift
    compose "$@"
    ;;
  *) usage ;;
esac
