#!/usr/bin/env python3
"""Turns one run of the benchmark suite into the ratio table of BENCHMARKS.md.

Usage:
    swift package benchmark --target SpindleBenchmarks --no-progress > run.txt
    python3 Benchmarks/report.py run.txt            # prints the markdown tables
    python3 Benchmarks/report.py run.txt --plot ratios.png   # also draws the headline ratios (needs matplotlib)

Benchmark names read "<scenario> ×<N>: <implementation>". For each, the p50 of the wall clock (and the other
metrics) is divided by N to get a per-item figure; every peer of a scenario is compared with Spindle's figure of
the same scenario, from the same run. Spindle's figure is its main row (the one that waits with the peers'
waiter); a "Spindle end to end" row (Spindle's own semaphore) is listed like a peer of it.

The paced and bursty scenarios (Paced.swift) get a table of their own: CPU per item and p50/p99 start latency
(custom metrics, the median of the runs), and the pace achieved (wall clock ÷ N). Their sweep ("sweep, ...") is
left to plot_paced.py.
"""
import re
import sys

NAME = re.compile(r"^(?P<scenario>.+?) ×(?P<n>[0-9]+): (?P<impl>.+)$")
ROW = re.compile(r"^│ (?P<metric>[^│]+?)\s*│\s*(?P<p0>[^│]+?)\s*│\s*(?P<p25>[^│]+?)\s*│\s*(?P<p50>[^│]+?)\s*│")
UNIT_SCALE = {"(ns)": 1e-3, "(μs)": 1.0, "(ms)": 1e3, "(s)": 1e6}
COUNT_SCALE = {"(K)": 1e3, "(M)": 1e6, "(G)": 1e9, "(#)": 1.0}


def parse(path):
    """Returns {name: {metric: p50 value in μs (times) or plain units (counts)}}."""
    results, current = {}, None
    for raw in open(path, encoding="utf-8", errors="replace"):
        line = raw.rstrip("\n")
        if NAME.match(line.strip()) and not line.startswith("│"):
            current = line.strip()
            results[current] = {}
            continue
        m = ROW.match(line)
        if not (m and current):
            continue
        metric, value = m.group("metric"), m.group("p50").replace(",", "")
        try:
            number = float(value)
        except ValueError:
            continue
        # A time unit and a count multiplier may both be there ("Idle worker CPU (ns) (K)"): apply each.
        for units in (UNIT_SCALE, COUNT_SCALE):
            for unit, scale in units.items():
                if unit in metric:
                    number *= scale
                    break
        key = metric.replace(" *", "").strip()
        while re.search(r"\s*\((ns|μs|ms|s|K|M|G|#)\)$", key):
            key = re.sub(r"\s*\((ns|μs|ms|s|K|M|G|#)\)$", "", key)
        results[current][key] = number
    return results


def per_item(results):
    """Groups by scenario: {scenario: {impl: {"n": N, "us": μs per item, "mallocs": per item, "peak": MB, ...}}}."""
    scenarios = {}
    for name, metrics in results.items():
        m = NAME.match(name)
        if not m or "Time (wall clock)" not in metrics:
            continue
        n = int(m.group("n"))
        entry = {
            "n": n,
            "us": metrics["Time (wall clock)"] / n,
            "mallocs": metrics.get("Malloc (total)", float("nan")) / n,
            "peak_mb": metrics.get("Memory (resident peak)", float("nan")) / 1e6,
            "cpu_us": metrics.get("Time (total CPU)", float("nan")),
            "threads": metrics.get("Threads (peak)", float("nan")),
            "idle_process_us": metrics.get("Idle process CPU", float("nan")),
            "idle_workers_us": metrics.get("Idle worker CPU", float("nan")),
            "paced": "CPU per op" in metrics,
            "cpu_per_op_us": metrics.get("CPU per op", float("nan")),
            "start_p50_us": metrics.get("Start latency p50", float("nan")),
            "start_p99_us": metrics.get("Start latency p99", float("nan")),
        }
        scenarios.setdefault(m.group("scenario"), {})[m.group("impl")] = entry
    return scenarios


def fmt_time(us):
    if us < 1:
        return f"{us * 1000:.0f} ns"
    if us < 1000:
        return f"{us:.2f} µs"
    return f"{us / 1000:.2f} ms"


def is_paced(impls):
    return any(v["paced"] for v in impls.values())


def spindle_main(impls):
    """The name of Spindle's main row of a scenario (not an "end to end" row), or None."""
    return next((k for k in impls if k.startswith("Spindle") and "end to end" not in k), None)


def table(scenarios):
    lines = ["| Scenario | Spindle | Peer | Peer figure | Spindle is | mallocs/item (Spindle · peer) |",
             "|---|---|---|---|---|---|"]
    for scenario, impls in scenarios.items():
        main = spindle_main(impls)
        if main is None or is_paced(impls):
            continue
        spindle = impls[main]
        memory = scenario.startswith("1M ops waiting")
        idle = scenario.startswith("idle CPU")
        for impl, peer in impls.items():
            if impl == main:
                continue
            if memory:
                ratio = spindle["peak_mb"] / peer["peak_mb"]
                s_fig, p_fig = f"{spindle['peak_mb']:.0f} MB peak", f"{peer['peak_mb']:.0f} MB peak"
                verdict = f"{ratio:.2f}× the memory"
            elif idle:
                s_fig = f"workers {spindle['idle_workers_us']:.0f} µs CPU (process {spindle['idle_process_us']:.0f} µs)"
                p_fig = f"process {peer['idle_process_us']:.0f} µs CPU"
                verdict = "—"
            else:
                ratio = peer["us"] / spindle["us"]
                s_fig, p_fig = fmt_time(spindle["us"]) + "/item", fmt_time(peer["us"]) + "/item"
                verdict = f"{ratio:.2f}× as fast" if ratio >= 1 else f"{1 / ratio:.2f}× slower"
                if "end to end" in impl:
                    verdict = f"own semaphore: {ratio:.2f}× the main row's time"
            mallocs = f"{spindle['mallocs']:.2f} · {peer['mallocs']:.2f}"
            lines.append(f"| {scenario} (×{spindle['n']:,} / ×{peer['n']:,}) | {s_fig} | {impl} | {p_fig} | "
                         f"{verdict} | {mallocs} |")
        if len(impls) == 1:
            lines.append(f"| {scenario} (×{spindle['n']:,}) | {fmt_time(spindle['us'])}/item | — | — | — | "
                         f"{spindle['mallocs']:.2f} |")
    return "\n".join(lines)


def paced_table(scenarios):
    lines = ["| Scenario | Implementation | CPU/item | start p50 | start p99 | pace achieved |",
             "|---|---|---|---|---|---|"]
    for scenario, impls in scenarios.items():
        if not is_paced(impls) or scenario.startswith("sweep"):
            continue
        # Spindle's rows first, then the peers in the order of the run.
        for impl, e in sorted(impls.items(), key=lambda kv: not kv[0].startswith("Spindle")):
            lines.append(f"| {scenario} (×{e['n']:,}) | {impl} | {fmt_time(e['cpu_per_op_us'])} | "
                         f"{fmt_time(e['start_p50_us'])} | {fmt_time(e['start_p99_us'])} | {fmt_time(e['us'])} |")
    return "\n".join(lines)


def plot(scenarios, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels, ratios = [], []
    for scenario, impls in scenarios.items():
        main = spindle_main(impls)
        if main is None or scenario.startswith(("idle", "1M")) or is_paced(impls):
            continue
        spindle = impls[main]
        for impl, peer in impls.items():
            if not impl.startswith("Spindle"):
                labels.append(f"{scenario} vs {impl}")
                ratios.append(peer["us"] / spindle["us"])
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(labels) + 1))
    ax.barh(labels, ratios, color=["tab:green" if r >= 1 else "tab:red" for r in ratios])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("peer ÷ Spindle, time per item (log scale; > 1: Spindle faster)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    grouped = per_item(parse(sys.argv[1]))
    print(table(grouped))
    if any(is_paced(impls) and not scenario.startswith("sweep") for scenario, impls in grouped.items()):
        print()
        print(paced_table(grouped))
    if "--plot" in sys.argv:
        plot(grouped, sys.argv[sys.argv.index("--plot") + 1])
