#!/usr/bin/env python3
"""The results table of docs/analysis.md, from the output of scripts/chaos.sh.

  scripts/chaos.sh --seconds 120 > chaos.out
  scripts/chaos-table.py chaos.out

One Markdown row per run, in the order they ran: seconds, faults, lock()
calls, acquisitions, overlaps, grants over the permit count (permit runs),
tokens checked / inverted, overruns, stalls, register writes, writes refused,
stale writes accepted, and the verdict (a control's PASS means it found its
violation)."""

import re
import sys

FIELDS = {
    "seconds": r"redlock-chaos: mode \S+, (\d+) s,",
    "faults": r"faults: (\d+)",
    "calls": r"lock\(\) calls: (\d+)",
    "acquired": r"acquisitions: (\d+)",
    "overlaps": r"overlapping critical sections \(both within validity\): (\d+)",
    "over_permits": r"grants over the permit count: (\d+)",
    "tokens": r"fencing tokens checked in grant order: (\d+)",
    "inversions": r"fencing tokens checked in grant order: \d+, inversions: (\d+)",
    "overruns": r"overruns \(left the critical section after valid_until\): (\d+)",
    "stalls": r"stalls \([^)]*\): (\d+)",
    "writes": r"register writes: (\d+)",
    "refused": r"register writes: \d+, accepted \d+, refused (\d+)",
    "stale": r"stale writes accepted: (\d+)",
}


def runs(text):
    blocks = re.split(r"^== ", text, flags=re.M)[1:]
    for block in blocks:
        name = block.split(":", 1)[0]
        row = {"name": name}
        for field, pattern in FIELDS.items():
            m = re.search(pattern, block)
            row[field] = m.group(1) if m else "-"
        result = re.search(r"result: (\S+)", block)
        row["verdict"] = result.group(1).rstrip(":") if result else "no result"
        yield row


def main(path):
    print("| run | s | faults | lock() calls | acquired | overlaps | over permits | "
          "tokens checked / inverted | overruns | stalls | register writes | refused | "
          "stale accepted | verdict |")
    print("|" + "---|" * 14)
    for r in runs(open(path).read()):
        print(f"| `{r['name']}` | {r['seconds']} | {r['faults']} | {r['calls']} | {r['acquired']} | "
              f"{r['overlaps']} | {r['over_permits']} | {r['tokens']} / {r['inversions']} | "
              f"{r['overruns']} | {r['stalls']} | {r['writes']} | {r['refused']} | {r['stale']} | "
              f"{r['verdict']} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
