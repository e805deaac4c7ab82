"""Lance's side of `cargo bench --bench vectors`: the same vectors, queries and ground truth
(files the bench writes: float32 and int64, little-endian, row-major), in pylance 14.
Each command prints one JSON object.

    lance_vectors.py build  --dir D --data F --dim N --partitions P --sub-vectors S
    lance_vectors.py search --dir D --queries F --truth F --dim N --nprobes N [--refine R]
                            [--filter SQL] [--current F --live F]
    lance_vectors.py churn  --dir D --updated F --dim N

`build` writes fragments of 100,000 rows (`id`, `e` a fixed-size list of float32), then
`create_index("e", "IVF_PQ", ...)`. `search` runs `nearest` for every query (k = the truth's
width; `prefilter=True` with a filter) and gives recall@k and the median latency; with
`--current` (every row's current vector) and `--live` (the live ids), also the rows whose
id is not live or whose `_distance` is not their current vector's (stale; needs a refine,
whose distances are exact). `churn` gives rows `id % 10 == 3` the vectors of `--updated`
(in id order) by `merge_insert`, deletes `id % 20 == 7`, then times `compact_files()` and
the index bytes it wrote.
"""

import argparse
import json
import os
import time

import lance
import numpy as np
import pyarrow as pa


def vectors(path, dim):
    return np.fromfile(path, dtype="<f4").reshape(-1, dim)


def table(ids, values, dim):
    flat = pa.array(values.reshape(-1), type=pa.float32())
    return pa.table(
        {
            "id": pa.array(ids, type=pa.int64()),
            "e": pa.FixedSizeListArray.from_arrays(flat, dim),
        }
    )


def files_under(path):
    found = {}
    for root, _, names in os.walk(path):
        for name in names:
            full = os.path.join(root, name)
            found[full] = os.path.getsize(full)
    return found


def build(args):
    data = vectors(args.data, args.dim)
    started = time.perf_counter()
    step = 100_000
    for start in range(0, len(data), step):
        part = table(np.arange(start, start + len(data[start : start + step])), data[start : start + step], args.dim)
        lance.write_dataset(part, args.dir, mode="append" if start else "create")
    written = time.perf_counter() - started
    ds = lance.dataset(args.dir)
    started = time.perf_counter()
    ds.create_index(
        "e",
        index_type="IVF_PQ",
        num_partitions=args.partitions,
        num_sub_vectors=args.sub_vectors,
        metric="l2",
    )
    built = time.perf_counter() - started
    index_bytes = sum(files_under(os.path.join(args.dir, "_indices")).values())
    return {"write_s": written, "index_s": built, "index_bytes": index_bytes}


def search(args):
    ds = lance.dataset(args.dir)
    queries = vectors(args.queries, args.dim)
    truth = np.fromfile(args.truth, dtype="<i8").reshape(len(queries), -1)
    k = truth.shape[1]
    current = vectors(args.current, args.dim) if args.current else None
    live = set(np.fromfile(args.live, dtype="<i8").tolist()) if args.live else None
    nearest = {"column": "e", "k": k, "nprobes": args.nprobes}
    if args.refine:
        nearest["refine_factor"] = args.refine
    times, recalls, stale = [], [], 0
    for q, t in zip(queries, truth):
        started = time.perf_counter()
        found = ds.to_table(
            columns=["id", "_distance"],
            nearest=dict(nearest, q=q),
            filter=args.filter,
            prefilter=args.filter is not None,
        )
        times.append(time.perf_counter() - started)
        ids = found.column("id").to_numpy()
        recalls.append(len(set(ids.tolist()) & set(t.tolist())) / k)
        if current is not None:
            distances = found.column("_distance").to_numpy()
            for i, d in zip(ids.tolist(), distances.tolist()):
                exact = float(np.sum((current[i] - q) ** 2))
                # Lance's l2 `_distance` is the squared distance.
                if i not in live or abs(d - exact) > 1e-3 * max(1.0, exact):
                    stale += 1
    return {
        "recall": float(np.mean(recalls)),
        "median_ms": float(np.median(times) * 1000),
        "stale": stale,
    }


def churn(args):
    ds = lance.dataset(args.dir)
    rows = ds.count_rows()
    ids = np.array([i for i in range(rows) if i % 10 == 3], dtype=np.int64)
    fresh = vectors(args.updated, args.dim)
    started = time.perf_counter()
    ds.merge_insert("id").when_matched_update_all().execute(table(ids, fresh, args.dim))
    ds = lance.dataset(args.dir)
    ds.delete("id % 20 = 7")
    changed = time.perf_counter() - started
    ds = lance.dataset(args.dir)
    before = files_under(os.path.join(args.dir, "_indices"))
    started = time.perf_counter()
    ds.optimize.compact_files()
    compacted = time.perf_counter() - started
    after = files_under(os.path.join(args.dir, "_indices"))
    written = sum(size for path, size in after.items() if path not in before)
    return {"change_s": changed, "compact_s": compacted, "index_bytes_written": written}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("command", choices=["build", "search", "churn"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--dim", type=int, required=True)
    parser.add_argument("--data")
    parser.add_argument("--partitions", type=int, default=256)
    parser.add_argument("--sub-vectors", type=int, default=16)
    parser.add_argument("--queries")
    parser.add_argument("--truth")
    parser.add_argument("--nprobes", type=int, default=20)
    parser.add_argument("--refine", type=int)
    parser.add_argument("--filter")
    parser.add_argument("--current")
    parser.add_argument("--live")
    parser.add_argument("--updated")
    args = parser.parse_args()
    answer = {"build": build, "search": search, "churn": churn}[args.command](args)
    print(json.dumps(answer))


if __name__ == "__main__":
    main()
