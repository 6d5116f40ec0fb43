"""What happens on the masters during a contended run, from MONITOR captures:
acquire attempts won, split (some yes votes, no quorum) or refused
everywhere; the release messages published by holders' unlocks and by the
clean-ups of failed attempts; and how many acquire attempts follow each
release message on the same master within 2 ms (the herd a message wakes).

  for p in P1 P2 P3; do timeout 5 redis-cli -p $p monitor > mon-$p.txt & done
  build/bench/bench_contended --ports P1,P2,P3 --masters 3 --processes 8 --impls redlock --duration-ms 1500
  python3 bench/contended_monitor.py mon-P1.txt mon-P2.txt mon-P3.txt

MONITOR slows the masters down: read the counts, not the timings. Only for
redlock's scripts (a waiter's acquire and the unlocks, by their SHA-1s in
lib/scripts.cpp)."""

import bisect
import collections
import os
import re
import sys



def script_shas(names):
    """The SHA-1s of the named scripts, as lib/scripts.cpp records them."""
    source = open(os.path.join(os.path.dirname(__file__), "..", "lib", "scripts.cpp")).read()
    shas = {}
    for name in names:
        m = re.search(r'const Script %s\{\s*"%s",.*?"([0-9a-f]{40})"' % (name, name), source, re.S)
        if not m:
            sys.exit("contended_monitor: no SHA-1 for %s in lib/scripts.cpp" % name)
        shas[m.group(1)] = name
    return shas


# The scripts of a waiter's attempts and of unlocks (an uncontended attempt
# is a plain SET NX, which MONITOR shows without its answer: not counted).
SCRIPTS = script_shas(["acquire", "acquire_or_queue", "unlock", "unlock_and_wake"])
LINE = re.compile(r'([\d.]+) \[\d+ ([^\]]+)\] (.*)')
ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')


def read(paths):
    events = []  # [time, master, kind, client, value, granted]
    for master, path in enumerate(paths):
        last = None
        with open(path) as f:
            for line in f:
                m = LINE.match(line.strip())
                if not m or "warm" in line:
                    continue
                t, who, args = float(m.group(1)), m.group(2), ARG.findall(m.group(3))
                if not args:
                    continue
                cmd = args[0].lower()
                if cmd == "evalsha" and args[1] in SCRIPTS:
                    kind = "acquire" if SCRIPTS[args[1]].startswith("acquire") else "unlock"
                    value = args[3 + int(args[2])]  # ARGV[1], after the keys
                    last = [t, master, kind, who, value, True]
                    events.append(last)
                elif who == "lua" and cmd == "pttl" and last:
                    last[5] = False  # the acquire script asks PTTL only when SET NX was refused
                elif who == "lua" and cmd == "publish" and last:
                    events.append([t, master, "publish", last[3], args[2], None])
    events.sort()
    return events


def main(paths):
    events = read(paths)
    majority = len(paths) // 2 + 1
    # One attempt = one acquire per master with the same value; a master seen
    # again with that value starts the next attempt (a lock() keeps its value).
    attempts, current = [], {}
    for e in events:
        if e[2] != "acquire":
            continue
        a = current.get(e[4])
        if a is None or e[1] in a["votes"]:
            a = {"t": e[0], "value": e[4], "votes": {}}
            current[e[4]] = a
            attempts.append(a)
        a["votes"][e[1]] = e[5]
    outcome = collections.Counter()
    won = collections.defaultdict(list)
    for a in attempts:
        yes = sum(a["votes"].values())
        if yes >= majority:
            outcome["won"] += 1
            won[a["value"]].append(a["t"])
        else:
            outcome["split (some yes, no quorum)" if yes else "refused everywhere"] += 1
    acquires = [e for e in events if e[2] == "acquire"]
    times = [e[0] for e in acquires]
    kinds, herd = collections.Counter(), collections.defaultdict(list)
    for p in (e for e in events if e[2] == "publish"):
        kind = "holder unlock" if any(t < p[0] for t in won[p[4]]) else "clean-up of a failed attempt"
        kinds[kind] += 1
        i, j = bisect.bisect_left(times, p[0]), bisect.bisect_left(times, p[0] + 0.002)
        herd[kind].append(sum(1 for a in acquires[i:j] if a[1] == p[1]))
    print("masters: %d; attempts: %d (%s); attempts per acquisition: %.1f"
          % (len(paths), len(attempts), ", ".join("%s %d" % kv for kv in outcome.items()),
             len(attempts) / max(outcome["won"], 1)))
    for kind, n in kinds.items():
        print("release messages from a %s: %d (all masters); acquire attempts on that master in the next 2 ms: "
              "%.2f on average" % (kind, n, sum(herd[kind]) / n))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
