#!/usr/bin/env python3
"""Where a chaos run's stalls fall: the share of the run with 5, 4, 3 ...
healthy masters, and the stalls that began in each.

    scripts/chaos-stalls.py LOG

LOG is a redlock-chaos log written with --list-faults (scripts/chaos.sh
does), which lists every fault and every stall. A master counts as unhealthy
as the checker counts it (test/chaos/schedule.cpp): from its fault's start
until the library's reconnect cap (1 s) has passed after its end, plus, for
a kill or a restart, the quarantine rounded up to whole seconds after one
more second; a latency fault only once its round trip nears the command
timeout (50 ms).
"""
import math
import re
import sys

RECONNECT_CAP_S = 1.0
COMMAND_TIMEOUT_S = 0.05
STEP_S = 0.01


def read(log):
    header = re.search(r"mode \S+, (\d+) s, (\d+) masters, .*quarantine (\d+) ms", log)
    if not header:
        sys.exit("not a redlock-chaos log")
    seconds, masters, quarantine_ms = (int(g) for g in header.groups())
    faults = []
    for kind, targets, begin, end, delay in re.findall(
        r"  fault (\S+?)\{([\d,]+)\} \+([\d.]+)\.\.\+([\d.]+) s(?: \((\d+) ms\))?", log
    ):
        if kind == "latency" and 2 * int(delay) / 1000 + 0.01 < COMMAND_TIMEOUT_S:
            continue
        if kind in ("pause-client", "clock"):
            continue
        recovery = RECONNECT_CAP_S
        if kind in ("kill", "restart") and quarantine_ms > 0:
            recovery += math.ceil(quarantine_ms / 1000 + 1)
        faults.append(({int(t) for t in targets.split(",")}, float(begin), float(end) + recovery))
    stalls = [float(start) for start in re.findall(r"  stall resource \d+ \+([\d.]+)\.\.\+[\d.]+ s", log)]
    return seconds, masters, faults, stalls


def healthy_at(t, masters, faults):
    down = set()
    for targets, begin, until in faults:
        if begin <= t <= until:
            down |= targets
    return masters - len(down)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        seconds, masters, faults, stalls = read(f.read())
    steps = int(seconds / STEP_S)
    time_with = {}
    for i in range(steps):
        h = healthy_at(i * STEP_S, masters, faults)
        time_with[h] = time_with.get(h, 0) + STEP_S
    stalls_with = {}
    for start in stalls:
        h = healthy_at(start, masters, faults)
        stalls_with[h] = stalls_with.get(h, 0) + 1
    print("| healthy masters | share of the run | stalls | stalls per second |")
    print("|---:|---:|---:|---:|")
    for h in sorted(set(time_with) | set(stalls_with), reverse=True):
        t = time_with.get(h, 0)
        n = stalls_with.get(h, 0)
        rate = f"{n / t:.2f}" if t > 0 else "-"
        print(f"| {h} | {100 * t / seconds:.1f} % | {n} | {rate} |")


if __name__ == "__main__":
    main()
