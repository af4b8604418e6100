"""Scale of the selection engine, measured on this machine.

1. Embedding throughput (texts/s) of SepLab's cached embedder against calling sentence-transformers
   directly in the same run, on the same texts (first pass: all new; second pass: all cached).
2. Tree building + DiffUse selection time and peak memory (RSS) for 1k, 10k and 50k items of
   384-dimensional difference vectors: exact Ward up to 20k, the two-stage approximation above.
3. How often the two-stage approximation picks the same representatives as exact Ward (at 10k).

    python bench/selection_scale.py [--sizes 1000,10000,50000] [--texts 400] [--embedding-only]
Each size runs in its own process so that its peak memory is its own.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def synthetic(n: int, dim: int = 384, seed: int = 0) -> np.ndarray:
    """Difference-vector-like data: a mixture of 50 Gaussian blobs of unequal sizes."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=0.3, size=(50, dim))
    weights = rng.dirichlet(np.full(50, 0.5))
    labels = rng.choice(50, size=n, p=weights)
    return (centers[labels] + rng.normal(scale=0.1, size=(n, dim))).astype(np.float32)


def one_size(n: int) -> dict:
    from selection.core.diffuse import EXACT_WARD_LIMIT, static_selection, ward_tree

    x = synthetic(n)
    started = time.perf_counter()
    tree = ward_tree(x)
    built = time.perf_counter() - started
    started = time.perf_counter()
    chosen = static_selection(tree, 100)
    selected = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "n": n,
        "method": "exact Ward" if n <= EXACT_WARD_LIMIT else "two-stage (2000 centroids)",
        "tree_s": round(built, 2),
        "select_100_s": round(selected, 3),
        "peak_rss_mb": round(peak_mb),
        "chosen": len(chosen),
    }


def agreement(n: int = 10_000, k: int = 50) -> dict:
    from sklearn.metrics import adjusted_rand_score

    from selection.core.diffuse import static_selection, two_stage_tree, ward_tree

    x = synthetic(n, seed=1)
    exact = ward_tree(x)
    approx = two_stage_tree(x, seed=0)
    same = set(static_selection(exact, k)) & set(static_selection(approx, k))
    return {
        "n": n,
        "k": k,
        "same_representatives": len(same) / k,
        "adjusted_rand_index": round(float(adjusted_rand_score(exact.labels(k), approx.labels(k))), 3),
    }


def embedding_throughput(n_texts: int, repeats: int = 6) -> dict:
    """Texts per second of sentence-transformers called directly (one encode() call) and of SepLab's
    do_embed_texts (hashing, cache lookups, encoding, cache writes), on the same loaded model, in alternating
    order over ``repeats`` rounds of texts new to the cache; then all cached."""
    import statistics

    workdir = tempfile.mkdtemp()
    os.environ["DATABASE_URL"] = f"sqlite:///{workdir}/bench.sqlite3"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "1")  # a local measurement, in development mode
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from selection import embedding

    demo = [json.loads(line) for line in (ROOT / "annotation" / "demo" / "demo_study.jsonl").read_text().splitlines()]
    sentences = [s for item in demo for samples in item["outputs"].values() for s in samples]
    model = embedding.load_encoder()
    model.encode(sentences[:32])  # warm up both paths on the same loaded model
    direct: list[float] = []  # texts a second, per round
    ours: list[float] = []
    for r in range(repeats):
        # outputs of uneven length, as real ones are: one to four sentences, new to the cache every round
        texts = [
            " ".join(sentences[(i + j) % len(sentences)] for j in range(1 + i % 4)) + f" (round {r}, {i})"
            for i in range(n_texts)
        ]
        for path in ("direct", "ours") if r % 2 == 0 else ("ours", "direct"):
            started = time.perf_counter()
            if path == "direct":
                model.encode(texts, batch_size=embedding.BATCH_SIZE, convert_to_numpy=True, show_progress_bar=False)
            else:
                embedding.do_embed_texts(texts)
            (direct if path == "direct" else ours).append(n_texts / (time.perf_counter() - started))
    started = time.perf_counter()
    embedding.do_embed_texts(texts)
    cached = n_texts / (time.perf_counter() - started)
    ratios = [o / d for o, d in zip(ours, direct, strict=True)]
    return {
        "texts": n_texts,
        "rounds": repeats,
        "direct_per_s": round(statistics.median(direct), 1),
        "seplab_per_s": round(statistics.median(ours), 1),
        "ratio": round(statistics.median(ratios), 3),
        "ratio_min": round(min(ratios), 3),
        "ratio_max": round(max(ratios), 3),
        "cached_per_s": round(cached),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,50000")
    parser.add_argument("--texts", type=int, default=400, help="texts per embedding round")
    parser.add_argument("--embedding-only", action="store_true", help="measure the embedding throughput only")
    parser.add_argument("--one-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--agreement", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--embedding", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_size:
        print(json.dumps(one_size(args.one_size)))
        return
    if args.agreement:
        print(json.dumps(agreement()))
        return
    if args.embedding:
        print(json.dumps(embedding_throughput(args.texts)))
        return

    def child(*extra: str) -> dict:
        out = subprocess.run([sys.executable, __file__, *extra], capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    e = child("--embedding", "--texts", str(args.texts))
    print(
        f"Embedding {e['texts']} texts x {e['rounds']} rounds (all-MiniLM-L6-v2, CPU), medians: "
        f"sentence-transformers directly {e['direct_per_s']} texts/s, SepLab do_embed_texts (hashing + DB cache "
        f"writes) {e['seplab_per_s']} texts/s = {e['ratio']:.3f} x direct (rounds {e['ratio_min']:.3f}-"
        f"{e['ratio_max']:.3f}); again, all cached: {e['cached_per_s']} texts/s",
        flush=True,
    )
    if args.embedding_only:
        return
    print("\n| items | tree | build (s) | 100 representatives (s) | peak RSS (MB) |\n|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        r = child("--one-size", str(n))
        row = f"| {r['n']:,} | {r['method']} | {r['tree_s']} | {r['select_100_s']} | {r['peak_rss_mb']:,} |"
        print(row, flush=True)
    a = child("--agreement")
    print(
        f"\nTwo-stage vs exact Ward at {a['n']:,} items, {a['k']} clusters: {a['same_representatives']:.0%} of the "
        f"representatives identical, adjusted Rand index of the partitions {a['adjusted_rand_index']}"
    )


if __name__ == "__main__":
    main()
