#!/usr/bin/env python3
"""Plots `cargo bench --bench vectors`'s sweep: recall@10 against the median latency per
query, natal vs Lance, without a refine and with refine_factor 10 (nprobes 1 to 64 along
each line).

    python benches/plot_vectors.py target/vectors-bench/results.json benches/vectors.png

Needs matplotlib (in the benchmark virtual environment, see BENCHMARKS.md).
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    source = sys.argv[1] if len(sys.argv) > 1 else "target/vectors-bench/results.json"
    target = sys.argv[2] if len(sys.argv) > 2 else "benches/vectors.png"
    with open(source) as f:
        results = json.load(f)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = {"natal": "-o", "lance": "--s"}
    for system in ["natal", "lance"]:
        for refine in [None, 10]:
            points = [
                (p[system]["ms"], p[system]["recall"], p["nprobes"])
                for p in results["sweep"]
                if p["refine"] == refine and p[system]["ms"] is not None
            ]
            if not points:
                continue
            label = f"{'Lance 14' if system == 'lance' else 'natal'}, " + (
                f"refine {refine}" if refine else "no refine"
            )
            ax.plot([p[0] for p in points], [p[1] for p in points], styles[system], label=label)
            for ms, recall, nprobes in points:
                if nprobes in (1, 8, 64):
                    ax.annotate(str(nprobes), (ms, recall), fontsize=7, xytext=(3, -8),
                                textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("median latency per query (ms, log scale)")
    ax.set_ylabel("recall@10")
    ax.set_title(
        f"IVF_PQ (256 partitions, 16 sub-vectors), {results['rows']:,} vectors of 128, "
        f"{results['queries']} queries\n(labels: nprobes)",
        fontsize=9,
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(target, dpi=120)


if __name__ == "__main__":
    main()
