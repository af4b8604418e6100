"""DiffUse core: the Ward tree, its split order, representatives, static and iterative selection."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.cluster.hierarchy import fcluster

from selection.core import diffuse
from selection.core.stopping import hypergeometric_risk


@pytest.fixture
def points():
    return np.random.default_rng(42).normal(size=(40, 6))


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Two labelings describe the same partition (labels may be numbered differently)."""
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def test_difference_vectors():
    np.testing.assert_array_equal(diffuse.difference_vectors(np.ones((2, 3)), np.zeros((2, 3))), np.ones((2, 3)))
    with pytest.raises(ValueError, match="differ in shape"):
        diffuse.difference_vectors(np.ones((2, 3)), np.ones((3, 3)))


def test_every_cut_matches_fcluster(points):
    z = diffuse.ward_linkage(points)
    tree = diffuse.Dendrogram(points, z)
    for k in range(1, len(points) + 1):
        assert same_partition(tree.labels(k), fcluster(z, k, criterion="maxclust")), k


def test_the_split_from_k_to_k_plus_one_undoes_the_kth_merge_from_the_top(points):
    tree = diffuse.Dendrogram(points, diffuse.ward_linkage(points))
    for k in range(1, len(points)):
        node = tree.split_node(k)
        before, after = set(tree.partition(k)), set(tree.partition(k + 1))
        assert before - after == {node}
        assert after - before == set(tree.children(node))


def test_members_are_the_leaves_below_a_node(points):
    tree = diffuse.Dendrogram(points, diffuse.ward_linkage(points))
    assert sorted(tree.members(tree.root).tolist()) == list(range(len(points)))
    for node in range(tree.n, 2 * tree.n - 1):
        left, right = tree.children(node)
        assert sorted(tree.members(node).tolist()) == sorted(tree.members(left).tolist() + tree.members(right).tolist())


def test_representatives_are_members_closest_to_the_mean_in_cosine(points):
    tree = diffuse.Dendrogram(points, diffuse.ward_linkage(points))
    for node in tree.partition(8):
        members = tree.members(node)
        rep = tree.representative(node)
        assert rep in members
        mean = points[members].mean(axis=0)
        cosine = points[members] @ mean / (np.linalg.norm(points[members], axis=1) * np.linalg.norm(mean))
        assert cosine[list(members).index(rep)] == pytest.approx(cosine.max())


def test_static_selection_takes_one_representative_per_cluster(points):
    tree = diffuse.Dendrogram(points, diffuse.ward_linkage(points))
    chosen = diffuse.static_selection(tree, 10)
    labels = tree.labels(10)
    assert len(chosen) == 10 and len({labels[i] for i in chosen}) == 10
    assert chosen == diffuse.static_selection(diffuse.Dendrogram(points, diffuse.ward_linkage(points)), 10)


def run_with_oracle(algorithm: diffuse.IterativeDiffUse, oracle: np.ndarray) -> list[list[int]]:
    batches = [algorithm.to_annotate()]
    while True:
        for item in algorithm.to_annotate():
            algorithm.record(item, oracle[item])
        new = algorithm.advance()
        if not new:
            break
        batches.append(new)
    return batches


def test_iterative_diffuse_releases_the_representatives_of_each_split(points):
    oracle = np.array(["a" if i % 3 else "b" for i in range(len(points))])  # a leads 2:1
    tree = diffuse.Dendrogram(points, diffuse.ward_linkage(points))
    algorithm = diffuse.IterativeDiffUse(tree, risk=0.05, min_n=4, budget=30)
    batches = run_with_oracle(algorithm, oracle)
    assert batches[0] == [tree.representative(n) for n in tree.partition(4)]
    # Replay the dendrogram from the top: each split releases its children's representatives that
    # were not released before; a split releasing nothing new is followed at once by the next one.
    released, k = set(batches[0]), 4
    for batch in batches[1:]:
        while True:
            node = tree.split_node(k)
            k += 1
            expected = [
                r for r in dict.fromkeys(tree.representative(c) for c in tree.children(node)) if r not in released
            ]
            if expected:
                break
        assert batch == expected
        released.update(batch)
    assert algorithm.k == k
    assert algorithm.outcome in ("decided", "inconclusive")
    status = algorithm.status()
    if algorithm.outcome == "decided":
        assert status.risk <= 0.05 and algorithm.winner == status.leader
    else:
        assert len(algorithm.labels) >= 30 or algorithm.k == tree.n
    assert set(algorithm.superseded).isdisjoint(algorithm.decision_items())


def test_a_clear_winner_stops_early_and_a_coin_flip_runs_out_of_budget():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 5))
    tree = diffuse.Dendrogram(x, diffuse.ward_linkage(x))
    clear = diffuse.IterativeDiffUse(tree, risk=0.1, min_n=5, budget=60)
    run_with_oracle(clear, np.array(["a"] * 300))
    assert clear.outcome == "decided" and clear.winner == "a" and len(clear.labels) < 15
    coin = diffuse.IterativeDiffUse(tree, risk=0.01, min_n=5, budget=20)
    run_with_oracle(coin, np.array(["a", "b"] * 150))
    assert coin.outcome == "inconclusive" and 20 <= len(coin.labels) <= 21


def test_weighted_ward_with_unit_weights_is_scipys_ward(points):
    exact = diffuse.ward_linkage(points)
    ours = diffuse.weighted_ward_linkage(points, np.ones(len(points)))
    np.testing.assert_allclose(ours[:, 2], exact[:, 2], rtol=1e-9)
    np.testing.assert_array_equal(ours[:, 3], exact[:, 3])
    for k in range(1, len(points)):
        assert same_partition(fcluster(ours, k, "maxclust"), fcluster(exact, k, "maxclust")), k


def test_a_weight_of_two_is_two_identical_points():
    rng = np.random.default_rng(3)
    base = rng.normal(size=(12, 4))
    weights = rng.integers(1, 4, size=12)
    duplicated = np.repeat(base, weights, axis=0)
    ours = diffuse.weighted_ward_linkage(base, weights.astype(float))
    exact = diffuse.ward_linkage(duplicated)
    # merges of identical copies happen at height 0 in the duplicated tree; the rest must agree
    np.testing.assert_allclose(np.sort(ours[:, 2]), np.sort(exact[:, 2])[-(len(base) - 1) :], rtol=1e-9, atol=1e-12)


def test_the_two_stage_tree_keeps_items_as_members_and_representatives():
    x = np.random.default_rng(5).normal(size=(300, 6))
    tree = diffuse.two_stage_tree(x, n_centroids=40, seed=1)
    assert tree.n == 40 and tree.n_items == 300
    assert sorted(tree.members(tree.root).tolist()) == list(range(300))
    chosen = diffuse.static_selection(tree, 10)
    labels = tree.labels(10)
    assert len(chosen) == 10 and len({labels[i] for i in chosen}) == 10
    algorithm = diffuse.IterativeDiffUse(tree, risk=0.1, min_n=5, budget=50)
    run_with_oracle(algorithm, np.array(["a"] * 300))
    status = algorithm.status()
    assert algorithm.outcome == "decided" and status.risk == pytest.approx(hypergeometric_risk(300, status.n, status.k))


def test_ward_tree_switches_to_two_stage_above_the_limit():
    x = np.random.default_rng(6).normal(size=(60, 3))
    assert diffuse.ward_tree(x, exact_limit=100).n == 60
    assert diffuse.ward_tree(x, exact_limit=50).n < 60


@pytest.mark.parametrize("oracle_kind", ["clear", "coin", "mixed"])
def test_a_stored_schedule_replays_exactly_what_the_tree_releases(oracle_kind):
    # Algorithm 1's releases depend on the labels only through when it stops, so splits computed ahead
    # (and stored as JSON) must give the same releases, decisions and outcome as splits read off the tree.
    rng = np.random.default_rng(8)
    x = rng.normal(size=(400, 6))
    oracle = {
        "clear": np.array(["a"] * 400),
        "coin": np.array(["a", "b"] * 200),
        "mixed": rng.choice(["a", "b", "tie"], size=400, p=[0.5, 0.35, 0.15]),
    }[oracle_kind]
    tree = diffuse.Dendrogram(x, diffuse.ward_linkage(x))
    from_tree = diffuse.IterativeDiffUse(tree, risk=0.05, min_n=5, budget=40)
    stored = diffuse.SplitSchedule.from_tree(tree, min_n=5, max_released=40)
    again = diffuse.SplitSchedule.from_json(json.loads(json.dumps(stored.to_json())))
    from_schedule = diffuse.IterativeDiffUse(risk=0.05, min_n=5, budget=40, schedule=again)
    assert run_with_oracle(from_tree, oracle) == run_with_oracle(from_schedule, oracle)
    assert (from_tree.released, from_tree.outcome, from_tree.k) == (
        from_schedule.released,
        from_schedule.outcome,
        from_schedule.k,
    )
    assert sorted(from_tree.decision_items()) == sorted(from_schedule.decision_items())
    assert from_tree.status() == from_schedule.status()


def test_a_schedule_stops_at_its_budget_and_says_when_it_is_too_short():
    x = np.random.default_rng(9).normal(size=(50, 3))
    tree = diffuse.Dendrogram(x, diffuse.ward_linkage(x))
    schedule = diffuse.SplitSchedule.from_tree(tree, min_n=3, max_released=10)
    released = set(schedule.initial) | {i for _, entering in schedule.splits for i in entering}
    assert len(released) >= 10 and not schedule.exhausted
    whole = diffuse.SplitSchedule.from_tree(tree, min_n=3, max_released=10**6)
    assert whole.exhausted and len(whole.splits) == tree.n - 3
    algorithm = diffuse.IterativeDiffUse(risk=0.05, min_n=3, budget=20, schedule=schedule)
    with pytest.raises(ValueError, match="built for a smaller budget"):
        run_with_oracle(algorithm, np.array(["a", "b"] * 25))
    with pytest.raises(ValueError, match="give a tree or a stored schedule"):
        diffuse.IterativeDiffUse(risk=0.05)
