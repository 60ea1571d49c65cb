#!/usr/bin/env python3
"""Turns package-benchmark `--format histogramPercentiles --scale` exports into markdown tables.

Benchmarks come in pairs named "<operation> (API)" and "<operation> (<baseline>)"; each table row shows the
median (p50) and best (p0) wall-clock time per operation for both, the throughput from the medians, and the
ratio API / direct throughput (= direct time / API time). Byte counts for the throughput column come from the
size in the operation's name (64KiB, 1MiB, 32B).

Usage: benchmark-table.py <export directory> <target> [<target> ...]
"""
import glob
import os
import re
import sys

# Issue 2 "Done when": minimum API / direct throughput ratio (judged on the medians).
TARGETS = {
    "SecretBox seal 64KiB": 0.95, "SecretBox open 64KiB": 0.95,
    "SecretStream push 64KiB": 0.95, "SecretStream pull 64KiB": 0.95,
    "BLAKE2b 1MiB one-shot": 0.95, "BLAKE2b 1MiB streaming": 0.95,
    "Box seal 32B": 0.9, "Box open 32B": 0.9, "SecretBox seal 32B": 0.9, "SecretBox open 32B": 0.9,
    "Ed25519 sign 32B": 0.9,
    "SecretBox seal 32B into buffer": 0.9, "SecretBox open 32B into buffer": 0.9,
    # Issue 3: the canonical serializer at >= 2x JSONEncoder with .sortedKeys.
    "Canonical small record": 2.0, "Canonical 1MiB document": 2.0,
}
SIZE = re.compile(r"(\d+)(KiB|MiB|B)\b")
UNIT = {"B": 1, "KiB": 1024, "MiB": 1024 * 1024}


def percentiles(path):
    values = {}
    with open(path) as f:
        header = f.readline()
        for line in f:
            p, v = line.split("\t")
            values[int(p)] = float(v)
    return header.strip(), values


def per_op_ns(header, value):
    # Header: "Percentile\tTime (wall clock) (ns) *" -- convert to nanoseconds.
    for unit, factor in (("(ns)", 1.0), ("(μs)", 1e3), ("(us)", 1e3), ("(ms)", 1e6), ("(s)", 1e9)):
        if unit in header:
            return value * factor
    raise SystemExit(f"unknown time unit in header {header!r}")


def load(directory, target):
    results = {}
    for path in glob.glob(os.path.join(directory, f"*.{target}.*.wallClock.histogram.percentiles.tsv")):
        base = os.path.basename(path)
        name = base.split(f".{target}.", 1)[1].rsplit(".", 4)[0]
        header, values = percentiles(path)
        results[name.replace("_", " ")] = (per_op_ns(header, values[50]), per_op_ns(header, values[0]))
    return results


def throughput(ns, size):
    if size is None:
        return f"{1e9 / ns:,.0f} op/s"
    rate = size / ns * 1e9
    if size >= 4096:
        return f"{rate / 1e6:,.0f} MB/s"
    ops = 1e9 / ns
    return f"{ops / 1e6:.2f} Mop/s" if ops >= 1e5 else f"{ops / 1e3:,.1f} kop/s"


def fmt_time(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def verdict(op, median_ratio, best_ratio):
    """Passes only when the ratio from the medians and the ratio from the best samples both reach the target."""
    target = TARGETS.get(op)
    if target is None:
        return "—"
    misses = [label for label, r in (("p50", median_ratio), ("p0", best_ratio)) if r < target]
    return f"≥ {target:.2f}: " + ("pass" if not misses else "MISS (" + ", ".join(misses) + ")")


def table(results):
    rows = []
    ops = sorted({n.rsplit(" (", 1)[0] for n in results if n.endswith(" (API)")})
    lines = ["| Operation | API p50 | direct p50 | API throughput | direct throughput | ratio (p50) | ratio (p0) | target |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for op in ops:
        api = results.get(f"{op} (API)")
        others = [n for n in results if n.startswith(op + " (") and not n.endswith(" (API)")]
        if not api or not others:
            continue
        direct = results[others[0]]
        m = SIZE.search(op)
        size = int(m.group(1)) * UNIT[m.group(2)] if m else None
        lines.append(
            f"| {op} | {fmt_time(api[0])} | {fmt_time(direct[0])} | {throughput(api[0], size)} | "
            f"{throughput(direct[0], size)} | {direct[0] / api[0]:.3f}× | {direct[1] / api[1]:.3f}× | {verdict(op, direct[0] / api[0], direct[1] / api[1])} |")
        rows.append((op, direct[0] / api[0], direct[1] / api[1]))
    return "\n".join(lines), rows


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    directory = sys.argv[1]
    for target in sys.argv[2:]:
        results = load(directory, target)
        print(f"### {target}\n")
        if not results:
            print("(no benchmarks registered)\n")
            continue
        text, _ = table(results)
        print(text + "\n")


if __name__ == "__main__":
    main()
