"""Medians over repetitions of bench_contended's JSON lines, the ratios the
issue 8 targets are stated in, and whether each target is met.

Usage: contended_report.py RESULTS.jsonl [--append]

Reads the per-repetition lines ("rep": 1, 2, ...), prints a table, and with
--append adds one "rep": "median" line per (bench, impl, masters, processes)
to RESULTS.jsonl, followed by one {"bench": "targets", ...} line per target.
"""

import collections
import json
import statistics
import sys

IMPLS = ["redlock", "floor", "redlock-polling", "node-redlock", "node-redlock-10ms"]
FIELDS = ["cycles_per_s", "least_served_ratio", "most_served_ratio", "handoff_p50_us", "handoff_p99_us",
          "other_handoff_p50_us", "other_handoff_p99_us", "waiter_handoff_p50_us", "waiter_handoff_p99_us",
          "from_unlock_call_p50_us", "from_unlock_call_p99_us",
          "retake_ratio", "wait_p50_us", "wait_p99_us",
          "errors", "votes_asked_per_acquisition", "votes_refused_per_acquisition", "deletes_per_acquisition",
          "publishes_per_acquisition", "attempts_per_acquisition", "foreign_cpu", "steal_cpu", "busy_cpu", "interrupt_cpu",
          "context_switches_per_s"]


def load(path):
    runs = collections.defaultdict(list)  # (impl, masters, processes) -> [line]
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("bench") not in ("contended", "serial_bound") or r.get("rep") == "median":
                continue
            runs[(r["impl"], int(r["masters"]), int(r["processes"]))].append(r)
    return runs


def medians(runs):
    out = {}
    for key, lines in runs.items():
        m = {"reps": len(lines)}
        for field in FIELDS:
            values = [float(l[field]) for l in lines if field in l]
            if values:
                m[field] = statistics.median(values)
        out[key] = m
    return out


def ratio(a, b):
    return a / b if a is not None and b else None


def paired_ratio(runs, a, b, field):
    """The median over repetitions of a's field over b's in the same
    repetition: repetitions are interleaved, so a slow moment of the machine
    weighs on both sides of each ratio rather than on one median."""
    by_rep = {r["rep"]: r[field] for r in runs.get(b, []) if field in r and r[field]}
    ratios = [r[field] / by_rep[r["rep"]] for r in runs.get(a, []) if field in r and r["rep"] in by_rep]
    return statistics.median(ratios) if ratios else None


def main(path, append):
    runs = load(path)
    med = medians(runs)
    ns = sorted({n for (_, n, _) in med})
    ks = sorted({k for (_, _, k) in med if k > 1})
    lines = []
    for (impl, n, k), m in sorted(med.items(), key=lambda kv: (kv[0][1], kv[0][2], IMPLS.index(kv[0][0])
                                                               if kv[0][0] in IMPLS else 99)):
        line = {"bench": "serial_bound" if k == 1 else "contended", "impl": impl, "masters": n, "processes": k,
                "rep": "median"}
        line.update({f: round(v, 2) for f, v in m.items()})
        ours_serial = med.get(("redlock", n, 1), {}).get("cycles_per_s")
        own_serial = med.get((impl, n, 1), {}).get("cycles_per_s")
        if k > 1:
            if ours_serial:
                line["vs_redlock_serial_bound"] = round(m["cycles_per_s"] / ours_serial, 3)
            if own_serial:
                line["vs_own_serial_bound"] = round(m["cycles_per_s"] / own_serial, 3)
            ours = med.get(("redlock", n, k))
            if ours and impl != "redlock":
                for f in ("handoff_p50_us", "handoff_p99_us", "other_handoff_p50_us", "other_handoff_p99_us",
                          "waiter_handoff_p50_us", "waiter_handoff_p99_us"):
                    r = ratio(m.get(f), ours.get(f))
                    if r is not None:
                        line[f.replace("_us", "") + "_vs_redlock"] = round(r, 2)
        lines.append(line)

    targets = []

    def target(name, value, limit, met):
        targets.append({"bench": "targets", "target": name, "value": None if value is None else round(value, 3),
                        "limit": limit, "met": bool(met) if value is not None else None})

    for k in ks:
        ours = med.get(("redlock", 5, k))
        if not ours:
            continue
        node = med.get(("node-redlock", 5, k), {})
        node10 = med.get(("node-redlock-10ms", 5, k), {})
        for prefix, label in (("handoff", "handoff"), ("other_handoff", "handoff to another process"),
                              ("waiter_handoff", "handoff to a process already waiting"),
                              ("from_unlock_call", "unlock called -> next lock answered")):
            p50, p99 = ours.get(prefix + "_p50_us"), ours.get(prefix + "_p99_us")
            if p50 is None:
                continue  # a run from before the field existed
            target("N=5 K=%d %s p50 <= 1000 us" % (k, label), p50, 1000, p50 is not None and p50 <= 1000)
            target("N=5 K=%d %s p99 <= 5000 us" % (k, label), p99, 5000, p99 is not None and p99 <= 5000)
            r = ratio(node.get(prefix + "_p50_us"), p50)
            target("N=5 K=%d %s p50: node-redlock default / ours >= 100" % (k, label), r, 100, r is not None and r >= 100)
            r = ratio(node10.get(prefix + "_p50_us"), p50)
            target("N=5 K=%d %s p50: node-redlock retryDelay 10 / ours >= 10" % (k, label), r, 10,
                   r is not None and r >= 10)
    # The floor (raw commands, no gate, strict turns) in the same run: what
    # the machine allows a handoff; ours over it.
    for k in ks:
        ours, floor = med.get(("redlock", 5, k)), med.get(("floor", 5, k))
        if not ours or not floor:
            continue
        line = {"bench": "vs_floor", "masters": 5, "processes": k}
        for f in ("other_handoff_p50_us", "other_handoff_p99_us", "cycles_per_s"):
            if f in ours and f in floor:
                line[f.replace("_us", "") + "_floor"] = round(floor[f], 2)
                line[f.replace("_us", "") + "_ours"] = round(ours[f], 2)
                line[f.replace("_us", "") + "_ratio"] = round(ours[f] / floor[f], 3) if floor[f] else None
        targets.append(line)
    ours8, serial = med.get(("redlock", 5, 8)), med.get(("redlock", 5, 1))
    if ours8 and serial:
        r = paired_ratio(runs, ("redlock", 5, 8), ("redlock", 5, 1), "cycles_per_s")
        target("N=5 K=8 cycles/s >= 0.9x the one-process bound (ours, median of the repetitions' ratios)", r,
               0.9, r is not None and r >= 0.9)
        polling_serial = med.get(("redlock-polling", 5, 1))
        if polling_serial:
            r = ours8["cycles_per_s"] / polling_serial["cycles_per_s"]
            target("N=5 K=8 cycles/s >= 0.9x the one-process bound (try_lock loop)", r, 0.9, r >= 0.9)
        target("N=5 K=8 least-served >= 0.8x mean", ours8["least_served_ratio"], 0.8,
               ours8["least_served_ratio"] >= 0.8)

    if append:
        with open(path, "a") as f:
            for line in lines + targets:
                f.write(json.dumps(line) + "\n")

    # ---- table
    def fmt(x, digits=0):
        if x is None:
            return "-"
        return ("%%.%df" % digits) % x

    header = ["N", "K", "impl", "reps", "cycles/s", "x serial", "least", "retake", "handoff p50", "p99",
              "to-other p50", "p99", "to-waiter p50", "p99", "unlock call p50", "p99", "wait p50", "p99", "errors", "votes/acq", "refused/acq", "del/acq", "steal", "busy", "irq",
              "ctxt/s"]
    rows = [header]
    for line in lines:
        rows.append([str(line["masters"]), str(line["processes"]), line["impl"], str(line["reps"]),
                     fmt(line.get("cycles_per_s")),
                     fmt(line.get("vs_redlock_serial_bound"), 2),
                     fmt(line.get("least_served_ratio"), 2), fmt(line.get("retake_ratio"), 2),
                     fmt(line.get("handoff_p50_us")), fmt(line.get("handoff_p99_us")),
                     fmt(line.get("other_handoff_p50_us")), fmt(line.get("other_handoff_p99_us")),
                     fmt(line.get("waiter_handoff_p50_us")), fmt(line.get("waiter_handoff_p99_us")),
                     fmt(line.get("from_unlock_call_p50_us")), fmt(line.get("from_unlock_call_p99_us")),
                     fmt(line.get("wait_p50_us")), fmt(line.get("wait_p99_us")), fmt(line.get("errors")),
                     fmt(line.get("votes_asked_per_acquisition"), 2),
                     fmt(line.get("votes_refused_per_acquisition"), 2),
                     fmt(line.get("deletes_per_acquisition"), 2), fmt(line.get("steal_cpu"), 2),
                     fmt(line.get("busy_cpu"), 2), fmt(line.get("interrupt_cpu"), 2), fmt(line.get("context_switches_per_s"))])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    print("Medians over repetitions; times in us; 'x serial' = cycles/s over redlock's one-process run;")
    print("handoff = previous holder's unlock answered -> next lock answered; 'to-other' counts only")
    print("handoffs to another process; 'to-waiter' = a release answered -> the first process that was already")
    print("waiting at its unlock call answered; 'unlock call' = previous holder called unlock -> next lock answered;")
    print("retake = share of acquisitions by the previous holder;")
    print("votes/refused/del per acquisition per master, from the masters' commandstats;")
    print("steal = share of the vCPUs' time the hypervisor gave to other guests during the run;")
    print("busy = share of both vCPUs' time spent in processes, irq = in interrupts (loopback TCP's softirq);")
    print("ctxt/s = the machine's context switches a second.")
    for i, r in enumerate(rows):
        print("  ".join(c.rjust(widths[j]) if j != 2 else c.ljust(widths[j]) for j, c in enumerate(r)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print()
    for t in targets:
        if t["bench"] == "vs_floor":
            print("floor  N=5 K=%d: %s" % (t["processes"], ", ".join(
                "%s %s" % (k, v) for k, v in t.items() if k not in ("bench", "masters", "processes"))))
            continue
        state = "n/a" if t["met"] is None else ("met" if t["met"] else "MISSED")
        print("%-6s %s: %s" % (state, t["target"], "-" if t["value"] is None else t["value"]))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], "--append" in sys.argv[2:])
