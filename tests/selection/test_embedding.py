"""The real packaged encoder, loaded offline, and the embedding cache."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from selection import embedding
from selection.core.separability import cosine_matrix
from selection.models import Embedding

PACKAGED_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


def test_the_packaged_weights_are_the_expected_file():
    weights = embedding.encoder_path() / "model.safetensors"
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    assert digest == PACKAGED_SHA256


def test_a_sentence_is_closest_to_itself_and_a_paraphrase_beats_an_unrelated_one(db):
    texts = [
        "The council approved the new covered market.",
        "The town council voted to build a covered market.",
        "Peregrine falcons nested on the hospital roof.",
    ]
    vectors = embedding.do_embed_texts(texts)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    sims = cosine_matrix(vectors, vectors)
    np.testing.assert_allclose(np.diag(sims), 1.0, atol=1e-5)
    assert sims[0, 1] > sims[0, 2] + 0.2


def test_nothing_is_embedded_twice(db, monkeypatch):
    first = embedding.do_embed_texts(["alpha beta", "gamma delta", "alpha beta"])
    assert Embedding.objects.count() == 2
    np.testing.assert_array_equal(first[0], first[2])

    def no_model(name=None):
        raise AssertionError("the encoder must not be called for cached texts")

    monkeypatch.setattr(embedding, "load_encoder", no_model)
    np.testing.assert_array_equal(embedding.do_embed_texts(["gamma delta", "alpha beta"]), first[[1, 0]])


def test_progress_is_reported_per_encoder_call(db, monkeypatch):
    monkeypatch.setattr(embedding, "BATCH_SIZE", 2)
    monkeypatch.setattr(embedding, "BATCHES_PER_CALL", 1)
    seen = []
    embedding.do_embed_texts([f"sentence number {i}" for i in range(5)], progress=lambda d, t: seen.append((d, t)))
    assert seen == [(2, 5), (4, 5), (5, 5)]


def test_texts_encoded_longest_first_come_back_in_their_own_order(db, monkeypatch):
    monkeypatch.setattr(embedding, "BATCH_SIZE", 2)
    texts = [
        "short",
        "a much longer sentence about the covered market and its council vote",
        "mid length text",
        "tiny",
        "another fairly long sentence, about falcons nesting on a hospital roof",
    ]
    direct = embedding.load_encoder().encode(texts, convert_to_numpy=True)
    np.testing.assert_allclose(embedding.do_embed_texts(texts), direct, atol=1e-5)


def test_an_unknown_encoder_directory_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a local sentence-transformers model directory"):
        embedding.encoder_path(str(tmp_path))


@pytest.mark.parametrize(("environment", "expected"), [(None, "all-MiniLM-L6-v2"), ("", "all-MiniLM-L6-v2")])
def test_the_encoder_setting_defaults_to_the_packaged_encoder_in_one_place(environment, expected):
    """config/settings.py holds the default (also for SEPLAB_ENCODER set empty); the encoder reads the setting."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "SEPLAB_ENCODER"} | {"DEBUG": "1"}
    if environment is not None:
        env["SEPLAB_ENCODER"] = environment
    read = "import config.settings as s; print(s.SEPLAB_ENCODER)"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", read], cwd=root, env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == expected == embedding.PACKAGED_ENCODER


def test_the_encoder_is_the_setting(settings):
    settings.SEPLAB_ENCODER = "/models/another-encoder"
    assert embedding.encoder_name() == "/models/another-encoder"
