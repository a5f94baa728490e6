#!/usr/bin/env python3
"""Plots a paced-load sweep: CPU per item and start latency against the pace.

Usage:
    swift run -c release spindle-paced --rounds 3 sweep > sweep.txt     # every peer with all its threads
    python3 Benchmarks/plot_paced.py sweep.txt [Benchmarks/paced.png]    # needs matplotlib

or, from the benchmark suite (where libdispatch's peer runs one thread short, see Paced.swift):
    swift package benchmark --target SpindleBenchmarks --no-progress --filter "sweep.*" > sweep.txt

Reads either output: spindle-paced's "median <peer>: ..." lines under each "== one item every <pace>" header, or the
suite's text output (the same parser as report.py) of the "sweep, queue add 1 per <pace> ×<N>: <peer>" benchmarks of
Paced.swift. Either way one thread adds one empty item per pace, from 10 µs to 10 ms, and per peer and pace the figures
are the medians over the runs of the CPU per item (the process's CPU clock over the run ÷ items) and of the p50/p99
start latency (submit → first instruction of the item). Draws three panels, one line per peer: CPU per item against the
pace achieved (wall clock ÷ items: on a VM the pacing thread cannot keep a 10 µs pace), p50 start latency against
the pace achieved, and CPU per item against p50 latency (each point a pace). Also prints the figures as a markdown
table.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import fmt_time, parse, per_item  # noqa: E402

PACE = re.compile(r"^sweep, .*1 per (?P<value>[0-9]+) (?P<unit>µs|ms)$")


HEADER = re.compile(r"^== one item every (?P<value>[0-9]+) (?P<unit>µs|ms),")
MEDIAN = re.compile(r"^median (?P<peer>.+?): CPU per item (?P<cpu>[0-9.]+) µs, p50 (?P<p50>[0-9.]+) µs, "
                    r"p99 (?P<p99>[0-9.]+) µs, pace (?P<pace>[0-9.]+) µs$")


def spindle_paced_points(path):
    """spindle-paced's output: {peer: [(pace µs, cpu µs/item, p50 µs, p99 µs, achieved pace µs)]}, sorted by pace."""
    peers, pace = {}, None
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("== "):
            m = HEADER.match(line)
            pace = int(m.group("value")) * (1000 if m.group("unit") == "ms" else 1) if m else None
            continue
        m = MEDIAN.match(line)
        if m and pace is not None:
            peers.setdefault(m.group("peer"), []).append(
                (pace, float(m.group("cpu")), float(m.group("p50")), float(m.group("p99")), float(m.group("pace"))))
    return {impl: sorted(points) for impl, points in peers.items()}


def sweep_points(path):
    """{peer: [(pace µs, cpu µs/item, p50 µs, p99 µs, achieved pace µs)]}, each sorted by pace."""
    if any(line.startswith("== one item every ") for line in open(path, encoding="utf-8")):
        return spindle_paced_points(path)
    peers = {}
    for scenario, impls in per_item(parse(path)).items():
        m = PACE.match(scenario)
        if not m:
            continue
        pace = int(m.group("value")) * (1000 if m.group("unit") == "ms" else 1)
        for impl, e in impls.items():
            peers.setdefault(impl, []).append(
                (pace, e["cpu_per_op_us"], e["start_p50_us"], e["start_p99_us"], e["us"]))
    return {impl: sorted(points) for impl, points in peers.items()}


def table(peers):
    lines = ["| Peer | pace | pace achieved | CPU/item | start p50 | start p99 |", "|---|---|---|---|---|---|"]
    for impl, points in peers.items():
        for pace, cpu, p50, p99, achieved in points:
            lines.append(f"| {impl} | {fmt_time(pace)} | {fmt_time(achieved)} | {fmt_time(cpu)} | "
                         f"{fmt_time(p50)} | {fmt_time(p99)} |")
    return "\n".join(lines)


def short(us):
    """10 µs -> "10µs", 2000 µs -> "2ms"."""
    return f"{us / 1000:g}ms" if us >= 1000 else f"{us:g}µs"


def plot(peers, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter
    plain = FuncFormatter(lambda value, _: f"{value:g}")
    fig, (by_pace_cpu, by_pace_latency, tradeoff) = plt.subplots(1, 3, figsize=(17, 5.5))
    # Spindle first, so it keeps the first colour; the floor (no hand-off) dashed, and left out of the trade-off
    # panel, where its latency of tens of nanoseconds would squash the peers.
    for impl in sorted(peers, key=lambda name: not name.startswith("Spindle")):
        points = peers[impl]
        achieved = [p[4] for p in points]
        cpu = [p[1] for p in points]
        p50 = [p[2] for p in points]
        floor = "inline" in impl
        style = dict(marker="o", label=impl, linestyle="--" if floor else "-")
        by_pace_cpu.plot(achieved, cpu, **style)
        by_pace_latency.plot(achieved, p50, **style)
        if floor:
            continue
        line, = tradeoff.plot(p50, cpu, **style, linewidth=0.8, alpha=0.8)
        for (pace, *_), x, y in zip(points, p50, cpu):
            tradeoff.annotate(short(pace), (x, y), fontsize=7, color=line.get_color(),
                              textcoords="offset points", xytext=(4, 2))
    for ax in (by_pace_cpu, by_pace_latency, tradeoff):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain if ax is not by_pace_latency else NullFormatter())
        ax.tick_params(which="minor", labelsize=7)
        ax.grid(True, which="both", alpha=0.3)
    by_pace_cpu.set_xlabel("pace achieved: one item every … (µs)")
    by_pace_cpu.set_ylabel("process CPU per item (µs)")
    by_pace_cpu.set_title("CPU per item (dashed: the pacing thread alone)")
    by_pace_latency.set_xlabel("pace achieved: one item every … (µs)")
    by_pace_latency.set_ylabel("p50 submit→start latency (µs)")
    by_pace_latency.set_title("Start latency, p50")
    tradeoff.set_xlabel("p50 submit→start latency (µs)")
    tradeoff.set_ylabel("process CPU per item (µs)")
    tradeoff.set_title("CPU per item vs p50 latency (labels: nominal pace)")
    by_pace_cpu.legend(fontsize=8)
    fig.suptitle("One thread adding one empty item per pace: process CPU clock per item and start latency, "
                 "median of the runs")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "paced.png")
    points = sweep_points(sys.argv[1])
    if not points:
        sys.exit(f"no sweep in {sys.argv[1]} (spindle-paced's medians or the suite's 'sweep, ...' benchmarks)")
    print(table(points))
    plot(points, out)
    print(f"\nwrote {out}")
