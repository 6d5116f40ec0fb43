"""Handoff latency (previous holder's unlock answered -> next lock answered)
vs N for redlock, the floor, its try_lock-polling mode and node-redlock, one column per
number of contending processes; the top row counts every acquisition, the
middle row only handoffs to another process (not the releaser re-taking it),
the bottom row what the waiters see: from each release to the first process
that was already waiting when the holder called unlock (a releaser that takes
the lock again meanwhile lengthens it).
From bench_contended's JSON lines (medians of repetitions); drawn with gnuplot
like plot.py. Values below 1 us (a waiter can be answered before the releaser
runs its unlock callback) are drawn at 1 us.
Usage: plot_handoff.py RESULTS.jsonl OUT.png"""

import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile

from plot import has_cairo

IMPLS = [("redlock", "redlock lock(wait)", 1), ("floor", "floor: raw SET NX, woken by PUBLISH", 5),
         ("redlock-polling", "redlock try_lock polling 200+-100 ms", 2),
         ("node-redlock", "node-redlock defaults", 3), ("node-redlock-10ms", "node-redlock retryDelay 10", 4)]


def main(source, target):
    samples = collections.defaultdict(list)  # (impl, k, n, field) -> values
    with open(source) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("bench") != "contended" or r.get("rep") == "median":
                continue
            for field in ("handoff_p50_us", "handoff_p99_us", "other_handoff_p50_us", "other_handoff_p99_us",
                          "waiter_handoff_p50_us", "waiter_handoff_p99_us"):
                if field not in r:
                    continue  # a run from before the field existed
                if field.startswith("other") and r.get("other_handoffs") == 0:
                    continue  # no handoff to another process in this run
                if field.startswith("waiter") and r.get("waiter_handoffs") == 0:
                    continue
                samples[(r["impl"], int(r["processes"]), int(r["masters"]), field)].append(float(r[field]))
    ks = sorted({k for (_, k, _, _) in samples})
    ns = sorted({n for (_, _, n, _) in samples})
    with tempfile.TemporaryDirectory() as tmp:
        script = [
            "set terminal pngcairo size 1200,1400 font ',10'" if has_cairo() else "set terminal png size 1200,1400",
            "set output '%s'" % target,
            "set termoption noenhanced",
            "set multiplot layout 3,%d title 'handoff latency, unlock answered -> next lock answered "
            "(medians of repetitions; masters on CPU 1, processes on CPU 0; lock, 100 us work, unlock)'" % len(ks),
        ]
        for prefix, what in (("handoff", "every acquisition"), ("other_handoff", "to another process only"),
                             ("waiter_handoff", "to a process already waiting")):
            for k in ks:
                plots = []
                for impl, title, color in IMPLS:
                    rows = [(n, statistics.median(samples[(impl, k, n, prefix + "_p50_us")]),
                             statistics.median(samples[(impl, k, n, prefix + "_p99_us")]))
                            for n in ns if samples.get((impl, k, n, prefix + "_p50_us"))]
                    if not rows:
                        continue
                    path = os.path.join(tmp, "%s-%s-%d.dat" % (prefix, impl, k))
                    with open(path, "w") as out:
                        for n, p50, p99 in rows:
                            out.write("%d %.2f %.2f\n" % (n, max(p50, 1), max(p99, 1)))
                    plots.append("'%s' using 1:2 with linespoints linecolor %d pointtype 7 title '%s p50'"
                                 % (path, color, title))
                    plots.append("'%s' using 1:3 with linespoints linecolor %d dashtype 2 pointtype 6 title '%s p99'"
                                 % (path, color, title))
                if not plots:
                    continue  # no run measured it (results from before the field existed)
                script += [
                    "set title '%d contending processes, %s'" % (k, what),
                    "set xlabel 'masters (N)'",
                    "set ylabel 'microseconds'",
                    "set logscale y",
                    "set key top left font ',8'",
                    "set grid",
                    "set xtics (%s)" % ", ".join(str(n) for n in ns),
                    "set xrange [%g:%g]" % (min(ns) - 0.5, max(ns) + 0.5),
                    "plot " + ", \\\n  ".join(plots),
                ]
        script.append("unset multiplot")
        subprocess.run(["gnuplot"], input="\n".join(script), text=True, check=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
