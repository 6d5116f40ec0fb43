"""Latency percentiles vs N for ours, the floor and node-redlock, from the
JSON lines of scripts/bench-peers.sh; medians over repetitions; drawn with
gnuplot (Debian's gnuplot-nox). Usage: plot.py PEERS.jsonl OUT.png"""

import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile

IMPLS = [("redlock-async", "redlock (async Client)"), ("redlock-blocking", "redlock (blocking Redlock)"),
         ("floor", "floor (raw parallel SET NX PX)"), ("node-redlock", "node-redlock 5.0.0-beta.2")]


def main(source, target):
    samples = collections.defaultdict(list)  # (impl, n, field) -> values
    with open(source) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("bench") != "try_lock" or r.get("rep") == "median":
                continue
            for field in ("p50_us", "p99_us"):
                samples[(r["impl"], int(r["masters"]), field)].append(float(r[field]))
    ns = sorted({n for (_, n, _) in samples})
    with tempfile.TemporaryDirectory() as tmp:
        plots = []
        for impl, title in IMPLS:
            rows = [(n, statistics.median(samples[(impl, n, "p50_us")]), statistics.median(samples[(impl, n, "p99_us")]))
                    for n in ns if samples.get((impl, n, "p50_us"))]
            if not rows:
                continue
            path = os.path.join(tmp, impl + ".dat")
            with open(path, "w") as out:
                for n, p50, p99 in rows:
                    out.write("%d %.2f %.2f\n" % (n, p50, p99))
            plots.append("'%s' using 1:2 with linespoints title '%s p50'" % (path, title))
            plots.append("'%s' using 1:3 with linespoints dashtype 2 title '%s p99'" % (path, title))
        script = "\n".join([
            "set terminal pngcairo size 1000,620 font ',10'" if has_cairo() else "set terminal png size 1000,620",
            "set output '%s'" % target,
            "set title 'uncontended try_lock latency vs number of masters (medians of repetitions; masters on CPU 1, client on CPU 0)'",
            "set xlabel 'masters (N)'",
            "set ylabel 'microseconds'",
            "set logscale y",
            "set key outside right",
            "set grid",
            "set termoption noenhanced",
            "set xtics (%s)" % ", ".join(str(n) for n in ns),
            "plot " + ", \\\n  ".join(plots),
        ])
        subprocess.run(["gnuplot"], input=script, text=True, check=True)


def has_cairo():
    out = subprocess.run(["gnuplot", "-e", "set terminal"], capture_output=True, text=True)
    return "pngcairo" in out.stdout + out.stderr


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
