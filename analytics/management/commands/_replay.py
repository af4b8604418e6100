"""``simulate --replay``: the study's own human judgments replayed through each system pair's decision under a design
(docs/decisions.md#replays); the JSON records independent checks read (pair, seed, decision, judgments_used,
judgments_fixed, and judge_verdicts_used with the judges). A helper of the ``simulate`` command, which parses the
options."""

import dataclasses
import json
import math
import zlib

import numpy as np
from django.core.management.base import CommandError

from analytics.populations import Population
from analytics.report.data import admitted, load_rows
from analytics.report.stopping import item_scores, pair_rating_sets
from selection.core import decisions, designs, multiplicity, racing, winners


def run(command, study, o):
    live = study.selection_settings
    alpha = live.decision_alpha if o["alpha"] is None else o["alpha"]
    margin = live.decision_margin if o["margin"] is None else o["margin"]
    if not 0 < alpha < 1 or not 0 <= margin < 0.5:
        raise CommandError("--alpha must be between 0 and 1 and --margin at least 0 and below 0.5")
    if o["seeds"] < 1:
        raise CommandError("--seeds must be at least 1")
    goal = o["goal"] or ("ranking" if live.ranks_only() else "pairs")
    looks, futility, chosen = study_design(live, o, goal)
    if looks < 0:
        raise CommandError(f"--looks must be at least 0 (0: look after every item), not {looks}")
    if not 0 < o["label_rate"] <= 1:
        raise CommandError(f"--label-rate must be above 0 and at most 1, not {o['label_rate']:g}")
    if not 0 <= futility < 1:
        raise CommandError(f"--futility must be at least 0 and below 1, not {futility:g}")
    if o["first_share"] is not None and not 0 < o["first_share"] < 1:
        raise CommandError("--first-share must be above 0 and below 1")
    if futility and not looks:
        raise CommandError("--futility goes with --looks (a stop for futility is read at a planned look)")
    every = list(study.comparisons.select_related("system_a", "system_b"))
    comparisons = [command._comparison(study, o["pair"])] if o["pair"] else every
    # each pair's alpha: per pair, or the study's split over its pairs (selection/core/multiplicity.py)
    control = o["error_control"] or live.error_control
    alpha = multiplicity.pair_alpha(alpha, len(every), control)
    everyone = load_rows(study)
    rows = admitted(everyone, Population())  # the study's people, as the report counts them
    if goal == "ranking" and (o["first_raters"] == "one" or looks or o["judges"]):
        raise CommandError(
            "--first-raters one, --looks and --judges replay every pair on its own; the ranking replay buys "
            "whole items after every one"
        )
    share = o.get("budget_share")
    if o.get("allocation") and share is None:
        raise CommandError("--allocation goes with --budget-share (how the shared budget is given out)")
    if share is not None:
        if not 0 < share <= 1:
            raise CommandError(f"--budget-share must be above 0 and at most 1, not {share:g}")
        if goal == "ranking":
            raise CommandError("--budget-share decides every pair on its own; it does not go with --goal ranking")
        if o["pair"]:
            raise CommandError("--budget-share shares one budget over all the study's pairs: leave out --pair")
    if goal == "ranking":
        design_name = "ranking: continuous, whole items"
        records = ranking_replay(comparisons, rows, o, alpha, margin)
    else:
        design = designs.Design(
            one_first=o["first_raters"] != "all",
            looks=looks,
            judges=o["judges"],
            label_rate=o["label_rate"],
            futility=futility,
            first_share=o["first_share"] or designs.first_share(looks),
        )
        design_name = design.name
        judges = [r for r in everyone if r.kind == "judge" and not r.screened_out] if o["judges"] else None
        records = (
            pairs_replay(comparisons, rows, o, alpha, margin, design, judges)
            if share is None
            else budget_replay(comparisons, rows, o, alpha, margin, design, judges)
        )
    for r in records:
        r["design"], r["alpha"] = design_name, alpha
    if o["json"]:
        command.stdout.write(json.dumps(records, indent=2))
        return
    deciding = "the ranking" if goal == "ranking" else "each pair"
    force = multiplicity.in_force(control, len(every)).replace("_", " ")
    command.stdout.write(
        f"{study.name}: {len(comparisons)} system pair(s), {o['seeds']} random orders each, design: "
        f"{design_name}{chosen}; alpha {alpha:.4g} per pair ({force}), "
        f"margin {margin}, deciding {deciding}{', A/A (null)' if o['null'] else ''}"
    )
    command.stdout.write(
        "pair".ljust(40)
        + "a".rjust(5)
        + "b".rjust(5)
        + "equiv".rjust(7)
        + "undec".rjust(7)
        + "used".rjust(10)
        + "fixed".rjust(9)
    )
    for c in comparisons:
        mine = [r for r in records if r["pair"] == str(c)]
        tally = [sum(r["decision"] == d for r in mine) for d in ("a", "b", "equivalent", "undecided")]
        used = np.mean([r["judgments_used"] for r in mine])
        command.stdout.write(
            str(c)[:39].ljust(40)
            + "".join(str(n).rjust(w) for n, w in zip(tally, (5, 5, 7, 7), strict=True))
            + f"{used:10.1f}"
            + str(mine[0]["judgments_fixed"]).rjust(9)
        )
    used, fixed = sum(r["judgments_used"] for r in records), sum(r["judgments_fixed"] for r in records)
    command.stdout.write(
        f"human judgments bought: {used:,} of {fixed:,} ({fixed / used:.2f}x fewer)"
        if used
        else "no human judgments to replay"
    )
    if o["judges"]:
        command.stdout.write(f"judge verdicts used: {sum(r['judge_verdicts_used'] for r in records):,}")
    if share is not None and records:
        decided = sum(r["decision"] != "undecided" for r in records)
        command.stdout.write(
            f"budget {records[0]['budget']:,} human judgments per order ({share:g} of the fixed design's, "
            f"allocation {records[0]['allocation']}): {decided} decisions reached in {len(records)} pair replays, "
            f"{used / o['seeds']:,.1f} judgments spent per order"
        )


def study_design(live, o, goal: str) -> tuple[int, float, str]:
    """The looks and futility threshold the replay runs -- the options given, else the study's own
    (``decision_looks``, ``decision_futility``: what its live plan runs; the ranking goal looks after every item)
    -- and the words the output adds to the design's name when they are the study's."""
    if o["looks"] is not None:
        return o["looks"], o["futility"] or 0.0, ""
    looks = 0 if goal == "ranking" else live.decision_looks
    futility = o["futility"] if o["futility"] is not None else live.decision_futility if looks else 0.0
    return looks, futility, " (the study's setting)"


def order_seed(seed: int, pair: tuple[str, str]) -> list[int]:
    # seeded by the pair's names, not its database id: the same orders on every copy of the study
    return [seed, zlib.crc32(f"{pair[0]}\x00{pair[1]}".encode())]


def ranking_replay(comparisons, rows, o, alpha, margin) -> list[dict]:
    pairs = {
        (c.system_a.name, c.system_b.name): item_scores(pair_rating_sets(rows, (c.system_a.name, c.system_b.name)))
        for c in comparisons
    }
    records = []
    for seed in range(o["seed"], o["seed"] + o["seeds"]):
        names = "\x00".join(f"{a}\x00{b}" for a, b in sorted(pairs))
        found = decisions.ranking_replay(
            pairs, np.random.default_rng([seed, zlib.crc32(names.encode())]), alpha, margin, null=o["null"]
        )
        for c in comparisons:
            pair = (c.system_a.name, c.system_b.name)
            result, implied = found[pair]
            records.append(
                {
                    "pair": str(c),
                    "system_a": pair[0],
                    "system_b": pair[1],
                    "seed": seed,
                    **dataclasses.asdict(result),
                    "implied": implied,
                }
            )
    return records


def pair_inputs(c, rows, judges):
    """A pair's rating sets, and per item each rater's score for the first system and judgments, with the judges'
    score and verdicts per item (None without --judges)."""
    pair = (c.system_a.name, c.system_b.name)
    sets = pair_rating_sets(rows, pair)
    raters = [[float(np.mean(winners.score_for_a(r))) for r in by_rater.values()] for by_rater in sets.values()]
    costs = [[len(r) for r in by_rater.values()] for by_rater in sets.values()]
    predictions = verdicts = None
    if judges is not None:
        judged = pair_rating_sets(judges, pair)
        missing = [item for item in sets if item not in judged]
        if missing:
            raise CommandError(
                f"--judges: the study's judges have not judged {len(missing)} of the {len(sets)} items of "
                f"{c} that people judged (e.g. {missing[0]}); import their verdicts first"
            )
        predictions = [winners.item_score(list(judged[item].values())) for item in sets]
        verdicts = [sum(len(v) for v in judged[item].values()) for item in sets]
    return sets, raters, costs, predictions, verdicts


def budget_replay(comparisons, rows, o, alpha, margin, design, judges) -> list[dict]:
    """Every pair replayed together under one budget (``racing.race_replay``): the share ``--budget-share`` of the
    fixed design's human judgments over all the pairs, rounded down; each pair's order seeded as in
    ``pairs_replay``, through ``designs.PairStream`` for every design (people alone and continuous too); with
    ``--allocation serial`` the pairs are bought one at a time in a random order per seed."""
    inputs = {c: pair_inputs(c, rows, judges) for c in comparisons}
    fixed = sum(sum(map(sum, costs)) for _, _, costs, _, _ in inputs.values())
    budget = math.floor(o["budget_share"] * fixed)
    allocation = o.get("allocation") or "race"
    records = []
    for seed in range(o["seed"], o["seed"] + o["seeds"]):
        streams = {
            str(c): designs.PairStream(
                raters,
                np.random.default_rng(order_seed(seed, (c.system_a.name, c.system_b.name))),
                design,
                alpha,
                margin,
                o["null"],
                costs,
                predictions,
                verdicts,
            )
            for c, (_, raters, costs, predictions, verdicts) in inputs.items()
        }
        order = None
        if allocation == "serial":  # a random order of the pairs per seed, seeded by their names (racing.race_replay)
            names = sorted(streams)
            rng = np.random.default_rng([seed, zlib.crc32("\x00".join(["serial", *names]).encode())])
            order = [names[i] for i in rng.permutation(len(names))]
        found = racing.race_replay(streams, budget, alpha, margin, allocation, order)
        for c in comparisons:
            record = {"pair": str(c), "system_a": c.system_a.name, "system_b": c.system_b.name, "seed": seed}
            record |= dataclasses.asdict(found[str(c)])
            if not design.judges:
                del record["judge_verdicts_used"]
            records.append(record | {"allocation": allocation, "budget": budget})
    return records


def pairs_replay(comparisons, rows, o, alpha, margin, design, judges) -> list[dict]:
    records = []
    for c in comparisons:
        pair = (c.system_a.name, c.system_b.name)
        sets, raters, costs, predictions, verdicts = pair_inputs(c, rows, judges)
        for seed in range(o["seed"], o["seed"] + o["seeds"]):
            rng = np.random.default_rng(order_seed(seed, pair))
            record = {"pair": str(c), "system_a": pair[0], "system_b": pair[1], "seed": seed}
            if design.looks or design.judges or design.first_share != 0.5:
                found = designs.replay(raters, rng, design, alpha, margin, o["null"], costs, predictions, verdicts)
                record |= dataclasses.asdict(found)
                if not design.judges:
                    del record["judge_verdicts_used"]
            else:  # continuous monitoring of people alone: the plan's own replays
                scores, votes = item_scores(sets)
                result = (
                    decisions.replay_one_rater_first(raters, rng, alpha, margin, o["null"], costs)
                    if design.one_first and max(map(len, raters), default=0) > 1
                    else decisions.replay(scores, votes, rng, alpha, margin, null=o["null"])
                )
                record |= dataclasses.asdict(result)
            records.append(record)
    return records
