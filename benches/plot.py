#!/usr/bin/env python3
"""Plots `cargo bench --bench compare`'s results.json: relocation-view (Lance: row-id index)
memory and cold take latency against U, natal vs Lance, one column per table size.

    python benches/plot.py target/compare-bench/results.json benches/compare.png

Needs matplotlib (in the benchmark virtual environment, see README.md).
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def series(levels, key):
    points = [
        (max(level["u"], 100), level["figures"].get(key))
        for level in levels
        if level["figures"].get(key) is not None
    ]
    return [u for u, _ in points], [v for _, v in points]


def main():
    source = sys.argv[1] if len(sys.argv) > 1 else "target/compare-bench/results.json"
    target = sys.argv[2] if len(sys.argv) > 2 else "benches/compare.png"
    with open(source) as f:
        scales = json.load(f)
    fig, axes = plt.subplots(2, len(scales), figsize=(6 * len(scales), 8), squeeze=False)
    for column, scale in enumerate(scales):
        title = f"{scale['rows']:,} rows"
        memory, latency = axes[0][column], axes[1][column]
        for name, levels, index_key, style in [
            ("natal relocation view", scale["natal"], "take_cold.index_bytes", "o-"),
            ("Lance row-id index + metadata cache", scale["lance"], "take_cold.index_cache_bytes", "s--"),
        ]:
            u, v = series(levels, index_key)
            if u:
                # An empty view (U = 0) is drawn at 1 kB so the log scale can show it.
                memory.plot(u, [max(b, 1e3) / 1e6 for b in v], style, label=name)
        for name, levels, style in [
            ("natal", scale["natal"], "o-"),
            ("Lance", scale["lance"], "s--"),
        ]:
            u, v = series(levels, "take_cold.take_cold_ms")
            if u:
                latency.plot(u, v, style, label=f"{name}: cold take of 1,000 ids")
            u, v = series(levels, "take_warm.take_warm_ms")
            if u:
                latency.plot(u, v, style, alpha=0.4, label=f"{name}: warm take")
        memory.set(xscale="log", yscale="log", title=f"{title}: index memory",
                   xlabel="U (rows updated; U = 0 drawn at 100)",
                   ylabel="MB (empty drawn at 0.001)")
        latency.set(xscale="log", yscale="log", title=f"{title}: take latency",
                    xlabel="U (rows updated; U = 0 drawn at 100)", ylabel="ms")
        for ax in (memory, latency):
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(target, dpi=110)
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
