#!/usr/bin/env bash
# Installs the Debian packages a job needs (only the missing ones) and
# configures the meson build directory (BUILD_DIR, default "build") unless it
# is already configured. Safe to run again.
#
#   scripts/setup.sh [--for demo|test]
#
#   --for demo   what building the library, the command and the examples and
#                running the demo take: the compiler, meson, the libraries'
#                headers and redis-server
#   --for test   (the default) that, and what the test suite's checks add:
#                catch2, cmake, doxygen, spin, docker, the Debian packaging tools
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
job=test
while (($# > 0)); do
  case $1 in
    --for)
      [[ ${2:-} == demo || ${2:-} == test ]] || { echo "setup.sh: --for wants demo or test" >&2; exit 2; }
      job=$2
      shift 2
      ;;
    *)
      echo "setup.sh: unknown argument '$1' (usage: scripts/setup.sh [--for demo|test])" >&2
      exit 2
      ;;
  esac
done

# The test job's extras: catch2: the tests; cmake: the CMake consumer check (scripts/consumers.sh); doxygen: the API reference (scripts/docs.sh);
# docker.io and docker-compose: the compose run (scripts/compose.sh); spin: the fencing-token model
# check (scripts/model-check.sh); libssl-dev: rediss:// (TLS); openssl: the test certificates;
# dpkg-dev, debhelper and lintian: the Debian packages (scripts/deb.sh), man-db: their check
# (scripts/deb-test.sh, man -w).
packages=(g++ meson ninja-build pkg-config libhiredis-dev libuv1-dev libssl-dev openssl redis-server redis-tools)
if [[ $job == test ]]; then
  packages+=(catch2 cmake doxygen docker.io docker-compose spin dpkg-dev debhelper lintian man-db)
fi

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)
  if [[ $status != installed ]]; then
    missing+=("$package")
  fi
done

if ((${#missing[@]} > 0)); then
  sudo=()
  if ((EUID != 0)); then
    if ! command -v sudo >/dev/null; then
      echo "setup.sh: need root or sudo to install: ${missing[*]}" >&2
      exit 1
    fi
    sudo=(sudo)
  fi

  # Installing redis-server would start a system redis on 6379. A policy-rc.d
  # that answers 101 ("action forbidden") stops invoke-rc.d and
  # deb-systemd-invoke from starting any service during the install. We only
  # add one if the machine has none, and remove it again.
  policy=/usr/sbin/policy-rc.d
  added_policy=false
  remove_policy() {
    if [[ $added_policy == true ]]; then
      "${sudo[@]}" rm -f "$policy"
    fi
  }
  trap remove_policy EXIT
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
    "${sudo[@]}" chmod 755 "$policy"
    added_policy=true
  fi

  echo "setup.sh: installing ${missing[*]}"
  "${sudo[@]}" apt-get update
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  remove_policy
  added_policy=false

  # If we installed redis-server and systemd started it anyway, stop it and
  # keep it from starting at boot. A redis the machine already had is left alone.
  if [[ " ${missing[*]} " == *" redis-server "* ]] && [[ -d /run/systemd/system ]] &&
    systemctl is-active --quiet redis-server 2>/dev/null; then
    "${sudo[@]}" systemctl disable --now redis-server
  fi
else
  echo "setup.sh: all packages already installed"
fi

if [[ ! -f $BUILD_DIR/build.ninja ]]; then
  meson setup "$BUILD_DIR"
elif [[ $job == test ]] && ! grep -q 'test/test_lock' "$BUILD_DIR/build.ninja"; then
  # Configured for the demo, before catch2 was here: the tests were left out.
  meson setup --reconfigure "$BUILD_DIR"
else
  echo "setup.sh: $BUILD_DIR is already configured"
fi
