"""DiffUse (Ashury-Tahan et al., "Label-Efficient Model Selection for Text Generation";
docs/diffuse.md).

Cluster the difference vectors v_i = e(y_A^i) - e(y_B^i) with Ward's method, and annotate one
representative per cluster: the member closest in cosine distance to the cluster mean. The linkage
is computed once; any number of clusters k is then a cut of the tree, and going from k to k + 1
clusters undoes the k-th merge from the top (row n - 1 - k of the linkage matrix).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt

from selection.core import decisions
from selection.core.stopping import StoppingStatus, stopping_status


def difference_vectors(emb_a: npt.ArrayLike, emb_b: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """v_i = e(y_A^i) - e(y_B^i): (n, d) from two (n, d) arrays."""
    a, b = np.asarray(emb_a, dtype=np.float64), np.asarray(emb_b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"embeddings of A {a.shape} and B {b.shape} differ in shape")
    return a - b


def ward_linkage(x: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Exact Ward linkage with Euclidean distance (scipy): the (n - 1, 4) matrix."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError("Ward clustering needs at least two items, as an (n, d) array")
    from scipy.cluster.hierarchy import linkage  # imported when used: every command loads this app

    z: npt.NDArray[np.float64] = linkage(x, method="ward", metric="euclidean")
    return z


class Dendrogram:
    """A Ward tree with O(1) access to any node's members (contiguous in the leaf order).

    Nodes are numbered as in scipy: leaves 0..n-1 (``n`` = number of leaves), the merge in row r is
    node n + r. Normally every leaf is one item; a two-stage tree (``two_stage_tree``) has leaves that
    are groups of items (``leaf_members``), and ``n_items`` counts the items.
    """

    def __init__(
        self, x: npt.ArrayLike, z: npt.ArrayLike, leaf_members: Sequence[npt.NDArray[np.integer]] | None = None
    ) -> None:
        self.x = np.asarray(x, dtype=np.float64)
        self.z: npt.NDArray[np.float64] = np.asarray(z)  # scipy's linkage matrix, (n - 1, 4)
        self.n_items: int = self.x.shape[0]
        self.n: int = self.z.shape[0] + 1
        if leaf_members is None:
            if self.n != self.n_items:
                raise ValueError(f"linkage of shape {self.z.shape} does not fit {self.n_items} items")
            leaf_members = [np.array([i]) for i in range(self.n)]
        elif len(leaf_members) != self.n:
            raise ValueError(f"{len(leaf_members)} leaf groups for a tree with {self.n} leaves")
        from scipy.cluster.hierarchy import leaves_list

        leaf_order = leaves_list(self.z)
        self.order: npt.NDArray[np.int64] = np.concatenate(
            [np.asarray(leaf_members[leaf], dtype=np.int64) for leaf in leaf_order]
        )
        n_nodes = 2 * self.n - 1
        self.size: npt.NDArray[np.int64] = np.zeros(n_nodes, dtype=np.int64)
        self.size[: self.n] = [len(m) for m in leaf_members]
        for row in range(self.n - 1):
            self.size[self.n + row] = self.size[int(self.z[row, 0])] + self.size[int(self.z[row, 1])]
        self.start: npt.NDArray[np.int64] = np.zeros(n_nodes, dtype=np.int64)
        # leaves_list visits the left child (column 0) before the right one, so each node's members
        # are contiguous: left child starts where the parent starts, right child after the left.
        for row in range(self.n - 2, -1, -1):
            node = self.n + row
            left, right = int(self.z[row, 0]), int(self.z[row, 1])
            self.start[left] = self.start[node]
            self.start[right] = self.start[node] + self.size[left]

    @property
    def root(self) -> int:
        return 2 * self.n - 2

    def children(self, node: int) -> tuple[int, int]:
        if node < self.n:
            raise ValueError(f"node {node} is a leaf")
        row = node - self.n
        return int(self.z[row, 0]), int(self.z[row, 1])

    def members(self, node: int) -> npt.NDArray[np.int64]:
        return self.order[self.start[node] : self.start[node] + self.size[node]]

    def split_node(self, k: int) -> int:
        """The node that is split when the partition goes from k to k + 1 clusters."""
        if not 1 <= k < self.n:
            raise ValueError(f"k must be in [1, {self.n - 1}], got {k}")
        return self.n + (self.n - 1 - k)

    def partition(self, k: int) -> list[int]:
        """The k clusters (node ids) of the cut into k clusters."""
        if not 1 <= k <= self.n:
            raise ValueError(f"k must be in [1, {self.n}], got {k}")
        nodes = {self.root}
        for j in range(1, k):
            node = self.split_node(j)
            nodes.remove(node)
            nodes.update(self.children(node))
        return sorted(nodes)

    def labels(self, k: int) -> npt.NDArray[np.int64]:
        """Cluster label (1..k) of every item for the cut into k clusters (like fcluster)."""
        out = np.zeros(self.n_items, dtype=np.int64)
        for label, node in enumerate(self.partition(k), start=1):
            out[self.members(node)] = label
        return out

    def representative(self, node: int) -> int:
        """The member closest in cosine distance to the cluster mean (lowest index on ties)."""
        members = np.sort(self.members(node))
        if members.size == 1:
            return int(members[0])
        vectors = self.x[members]
        mean = vectors.mean(axis=0)
        norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(mean)
        with np.errstate(invalid="ignore", divide="ignore"):
            cosine = np.where(norms > 0, vectors @ mean / np.where(norms > 0, norms, 1.0), 0.0)
        return int(members[int(np.argmax(cosine))])


def weighted_ward_linkage(centroids: npt.ArrayLike, weights: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Ward linkage of weighted points (a point of weight w stands for w identical items), in scipy's
    format, by the nearest-neighbour-chain algorithm with Lance-Williams updates.

    Initial Ward distances are d^2(i, j) = 2 w_i w_j / (w_i + w_j) |c_i - c_j|^2, so with unit weights
    this is exactly ``scipy.cluster.hierarchy.linkage(x, "ward")``. Column 3 counts leaves, as scipy
    requires (the weights only enter the distances).
    """
    c = np.asarray(centroids, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    m = c.shape[0]
    if m < 2:
        raise ValueError("Ward clustering needs at least two points")
    sq_norm = np.einsum("ij,ij->i", c, c)
    sq = np.maximum(sq_norm[:, None] + sq_norm[None, :] - 2.0 * c @ c.T, 0.0)
    d2 = 2.0 * np.outer(w, w) / (w[:, None] + w[None, :]) * sq
    np.fill_diagonal(d2, np.inf)
    size = w.copy()
    active = np.ones(m, dtype=bool)
    merges: list[tuple[int, int, float]] = []
    chain: list[int] = []
    while len(merges) < m - 1:
        if not chain:
            chain.append(int(np.flatnonzero(active)[0]))
        a = chain[-1]
        row = d2[a]
        b = int(np.argmin(row))
        if len(chain) > 1 and row[chain[-2]] <= row[b]:
            b = chain[-2]  # prefer the previous chain element on ties, or the chain can cycle
        if len(chain) > 1 and b == chain[-2]:
            chain.pop()
            chain.pop()
            dist2 = row[b]
            merges.append((a, b, float(np.sqrt(dist2))))
            na, nb = size[a], size[b]
            with np.errstate(invalid="ignore"):
                updated = ((na + size) * d2[a] + (nb + size) * d2[b] - size * dist2) / (na + nb + size)
            updated[~active] = np.inf
            d2[a, :] = updated
            d2[:, a] = updated
            d2[a, a] = np.inf
            d2[b, :] = np.inf
            d2[:, b] = np.inf
            size[a] = na + nb
            active[b] = False
        else:
            chain.append(b)
    # The chain finds the same merges as the greedy algorithm in another order: sort by height and
    # relabel clusters as scipy does.
    order = sorted(range(len(merges)), key=lambda r: merges[r][2])
    parent = list(range(m))
    node_id = list(range(m))
    leaves = [1] * m

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    z = np.zeros((m - 1, 4))
    for r, index in enumerate(order):
        i, j, height = merges[index]
        ri, rj = find(i), find(j)
        a, b = sorted((node_id[ri], node_id[rj]))
        z[r] = (a, b, height, leaves[ri] + leaves[rj])
        parent[rj] = ri
        node_id[ri] = m + r
        leaves[ri] += leaves[rj]
    return z


EXACT_WARD_LIMIT = 20_000


def two_stage_tree(x: npt.ArrayLike, n_centroids: int = 2000, seed: int = 0) -> Dendrogram:
    """Approximate Ward for large n: mini-batch k-means to ``n_centroids`` groups, then size-weighted
    Ward on the group means. Leaves are the groups; representatives are still chosen among items."""
    from sklearn.cluster import MiniBatchKMeans

    x = np.asarray(x, dtype=np.float64)
    kmeans = MiniBatchKMeans(
        n_clusters=min(n_centroids, x.shape[0]), random_state=seed, batch_size=4096, n_init=1, max_no_improvement=20
    ).fit(x)
    groups = [np.flatnonzero(kmeans.labels_ == g) for g in range(kmeans.n_clusters)]
    groups = [g for g in groups if g.size]
    centroids = np.stack([x[g].mean(axis=0) for g in groups])
    z = weighted_ward_linkage(centroids, np.array([g.size for g in groups], dtype=np.float64))
    return Dendrogram(x, z, groups)


def ward_tree(x: npt.ArrayLike, exact_limit: int = EXACT_WARD_LIMIT, seed: int = 0) -> Dendrogram:
    """Exact Ward up to ``exact_limit`` items (docs/diffuse.md#large-pools-the-two-stage-tree), the two-stage
    approximation above."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] <= exact_limit:
        return Dendrogram(x, ward_linkage(x))
    return two_stage_tree(x, seed=seed)


def static_clusters(tree: Dendrogram, n_select: int) -> list[tuple[int, int]]:
    """DiffUse for a fixed budget: cut into n_select clusters; (representative item index, cluster size in
    items) for each, in cluster order. The size is how many candidates the representative stands for."""
    n_select = min(n_select, tree.n)
    return [(tree.representative(node), int(tree.size[node])) for node in tree.partition(n_select)]


def static_selection(tree: Dendrogram, n_select: int) -> list[int]:
    """DiffUse for a fixed budget: one representative per cluster of the cut into n_select clusters (item
    indices, in cluster order)."""
    return [rep for rep, _ in static_clusters(tree, n_select)]


class TreeSplits:
    """Algorithm 1's splits read off a tree, in order: the decision set starts as the representatives of the
    ``min_n``-cluster partition, and split j takes the partition from k to k + 1 clusters, so the parent's
    representative leaves the decision set and its children's enter. None of this depends on labels."""

    def __init__(self, tree: Dendrogram, min_n: int) -> None:
        self.tree, self.n_items = tree, tree.n_items
        self.k0 = min(max(1, min_n), tree.n)
        self.clusters = tree.partition(self.k0)
        self.reps = {node: tree.representative(node) for node in self.clusters}
        self.initial = [self.reps[node] for node in self.clusters]
        self.done = 0  # splits computed so far

    def has_split(self, j: int) -> bool:
        return self.k0 + j < self.tree.n

    def split(self, j: int) -> tuple[int, list[int]]:
        """(representative leaving the decision set, representatives entering) of the j-th split; splits
        are computed in order."""
        if j != self.done or not self.has_split(j):
            raise ValueError(f"split {j} cannot follow split {self.done - 1}")
        node = self.tree.split_node(self.k0 + j)
        self.clusters.remove(node)
        leaving = self.reps.pop(node)
        children = self.tree.children(node)
        self.clusters.extend(children)
        for child in children:
            self.reps[child] = self.tree.representative(child)
        self.done += 1
        return leaving, [self.reps[c] for c in children]


class SplitScheduleJSON(TypedDict):
    """``SplitSchedule.to_json``: each split is a list [leaving, [entering, ...]]."""

    n_items: int
    k0: int
    initial: list[int]
    splits: list[list[int | list[int]]]
    exhausted: bool


@dataclasses.dataclass
class SplitSchedule:
    """The splits of ``TreeSplits`` computed ahead and stored (JSON-ready), so a live run replays Algorithm 1
    from labels alone, with no vectors or tree. It holds every split until ``max_released`` distinct items
    have been released (the budget: the algorithm stops there) or the tree has no split left."""

    n_items: int
    k0: int
    initial: list[int]
    splits: list[tuple[int, list[int]]]
    exhausted: bool  # the tree has no split after the last one stored

    @classmethod
    def from_tree(cls, tree: Dendrogram, min_n: int, max_released: int) -> SplitSchedule:
        source = TreeSplits(tree, min_n)
        released = set(source.initial)
        splits: list[tuple[int, list[int]]] = []
        while len(released) < max_released and source.has_split(len(splits)):
            leaving, entering = source.split(len(splits))
            splits.append((leaving, entering))
            released.update(entering)
        return cls(tree.n_items, source.k0, source.initial, splits, not source.has_split(len(splits)))

    def has_split(self, j: int) -> bool:
        if j < len(self.splits):
            return True
        if self.exhausted:
            return False
        raise ValueError("the stored schedule ends before the budget: it was built for a smaller budget")

    def split(self, j: int) -> tuple[int, list[int]]:
        return self.splits[j]

    def relabelled(self, ids: Sequence[int]) -> SplitSchedule:
        """The same schedule naming item ``i`` as ``ids[i]`` (for example database keys), so a replay needs no
        index of the candidates."""
        return SplitSchedule(
            self.n_items,
            self.k0,
            [int(ids[i]) for i in self.initial],
            [(int(ids[out]), [int(ids[i]) for i in entering]) for out, entering in self.splits],
            self.exhausted,
        )

    def to_json(self) -> SplitScheduleJSON:
        return {
            "n_items": self.n_items,
            "k0": self.k0,
            "initial": [int(i) for i in self.initial],
            "splits": [[int(out), [int(i) for i in entering]] for out, entering in self.splits],
            "exhausted": self.exhausted,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SplitSchedule:
        """The schedule from its JSON (``to_json``) as stored."""
        return cls(
            data["n_items"],
            data["k0"],
            list(data["initial"]),
            [(out, list(entering)) for out, entering in data["splits"]],
            data["exhausted"],
        )


@dataclasses.dataclass
class IterativeDiffUse:
    """Algorithm 1 of the DiffUse paper as a state machine that works with a simulated oracle and with
    live raters alike: ask ``to_annotate()``, feed labels with ``record()``, then ``advance()``.

    Labels are "a", "b" or "tie" per item index. The decision set is the representatives of the
    current partition; a split drops the parent's representative from it (it stays labelled). The splits
    come from ``tree`` as needed, or from a stored ``schedule`` (``SplitSchedule``): the same releases.
    """

    tree: Dendrogram | None = None
    risk: float = 0.1
    min_n: int = 5
    budget: int = 200
    ties_count_in_n: bool = True
    schedule: SplitSchedule | None = None

    def __post_init__(self) -> None:
        if not 0 < self.risk < 1:
            raise ValueError("risk must be in (0, 1)")
        self._splits: TreeSplits | SplitSchedule
        if self.tree is not None and self.schedule is None:
            self._splits = TreeSplits(self.tree, self.min_n)
        elif self.schedule is not None and self.tree is None:
            self._splits = self.schedule
        else:
            raise ValueError("give a tree or a stored schedule")
        self.n_items = self._splits.n_items
        self.k = self._splits.k0
        self.decision: list[int] = list(self._splits.initial)
        self.labels: dict[int, str] = {}
        self.released: list[int] = []  # every item ever sent for annotation, in release order
        self._released_items: set[int] = set()
        self.outcome: str | None = None  # "decided" | "inconclusive"
        self._release(self.decision)

    def _release(self, items: Iterable[int]) -> list[int]:
        new = [i for i in dict.fromkeys(items) if i not in self._released_items]
        self.released.extend(new)
        self._released_items.update(new)
        return new

    def decision_items(self) -> list[int]:
        return list(self.decision)

    def to_annotate(self) -> list[int]:
        return [i for i in self.released if i not in self.labels]

    def record(self, item: int, label: str) -> None:
        if label not in ("a", "b", "tie"):
            raise ValueError(f"label must be 'a', 'b' or 'tie', got {label!r}")
        self.labels[item] = label

    def status(self) -> StoppingStatus:
        votes = [self.labels[i] for i in self.decision if i in self.labels]
        return stopping_status(
            votes.count("a"), votes.count("b"), votes.count("tie"), self.n_items, self.risk, self.ties_count_in_n
        )

    def advance(self) -> list[int]:
        """Re-evaluate the stopping rule once every decision item is labelled. Returns the items newly
        released for annotation (empty when waiting for labels, decided or out of budget)."""
        while self.outcome is None:
            if any(i not in self.labels for i in self.decision):
                return []
            if decisions.from_hypergeometric(self.status()).decided:
                self.outcome = "decided"
            elif len(self.labels) >= self.budget or not self._splits.has_split(self.k - self._splits.k0):
                self.outcome = "inconclusive"  # out of budget, or every leaf is its own cluster
            else:
                new = self._split()
                if new:
                    return new
        return []

    def _split(self) -> list[int]:
        leaving, entering = self._splits.split(self.k - self._splits.k0)
        self.k += 1
        self.decision.remove(leaving)
        self.decision.extend(entering)
        return self._release(entering)

    @property
    def superseded(self) -> list[int]:
        """Released items that are no longer in the decision set (their labels stay stored). A
        representative can come back when a deeper cluster picks it again."""
        current = set(self.decision)
        return [i for i in self.released if i not in current]

    @property
    def winner(self) -> str | None:
        return self.status().leader if self.outcome == "decided" else None
