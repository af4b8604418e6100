import dataclasses
import json
import sys

import numpy as np
from django.core.management.base import BaseCommand, CommandError

from analytics.core.simulation import (
    Drawn,
    Pool,
    draw_pools,
    estimate_rates,
    iterative_random_report,
    iterative_report,
    success_rates,
)
from analytics.management.commands import _replay as replay
from annotation.exchange import judgment_files, rules
from annotation.management.commands._common import get_study, read_file
from annotation.rating import imports
from selection import services
from selection.core import multiplicity, winners
from selection.rating_sets import rating_sets
from selection.strategies import (
    JUDGE_STRATEGIES,
    STRATEGIES,
    STRATIFIED,
    UNIFORM,
    WEIGHTED,
    SelectionContext,
    get_strategy,
    is_live,
    iterative_parameters,
    strategy_parameters,
)

DEFAULT_METHOD = "stratified"  # the product's default strategy; see bench/README.md for why
BASELINE = "people alone on a random sample (mean squared error (1 - n/N) S^2 / n, exact)"


class Command(BaseCommand):
    help = (
        "Benchmark selection methods on a study without raters: given an oracle preference per item "
        '(JSONL lines {"item": ID, "winner": SYSTEM | "tie"}, or a judgments file in the format of '
        "docs/interfaces.md#judgment-format, whose item winners follow the report's item-winner rule), draw 80 %% "
        "pools per seed and report how often each method's sample majority names the pool's winner, per budget, "
        "with random as the baseline. "
        "--method diffuse-iterative reports Algorithm 1's success / error / inconclusive rates and annotations. "
        "--method judge-disagreement, judge-stratified or judge-neyman (the study's LLM judges must have judged "
        "the pair's items) compares estimates of the pool's win rate instead: people alone and people with the "
        "judges, on a random sample and on every requested design that is a probability sample, with their error, "
        "interval width, coverage, the efficiency each claims and the efficiency it delivers (people alone on a "
        "random sample's mean squared error, known exactly, over the design's). "
        "--replay (no oracle) replays the study's own human judgments instead: per system pair and seed, its items "
        "in a random order with all their judgments, stopped at the first anytime-valid decision (a, b, "
        "equivalent; the report's rule), against the fixed design that buys every judgment; --null mirrors each "
        "item at random so no system is better (every direction decided is a false one). The default design buys "
        "one rater per item first (--first-raters all: whole items) and looks after every item (--looks K: "
        "group-sequential, O'Brien-Fleming spending over K looks); --judges puts the study's LLM judge verdicts "
        "inside the decision (prediction-powered, humans on --label-rate of the items). Each pair decides at the "
        "alpha selection/core/multiplicity.py gives it (--error-control, default the study's)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")
        parser.add_argument(
            "--oracle",
            help='JSONL file of {"item", "winner"}, or of judgments (docs/interfaces.md#judgment-format): then each '
            "item's winner is the majority of its raters (see --oracle-kind), each rater's "
            "preference the sign of Eq. 7 over their judgments of the item (the report's and live "
            "loop's rule).",
        )
        parser.add_argument(
            "--oracle-kind",
            choices=["any", "human", "judge"],
            default="any",
            help="With a judgments file: whose judgments make the oracle (human: the people's votes "
            "only, as when a study's LLM judges are being tested against them).",
        )
        parser.add_argument(
            "--method", default="default", help="Comma-separated: default, " + ", ".join(sorted(STRATEGIES))
        )
        parser.add_argument("--pair", help="SYSTEM_A,SYSTEM_B when the study compares several system pairs.")
        parser.add_argument("--budgets", default="5,10,20,50,100", help="Comma-separated budgets N.")
        parser.add_argument("--seeds", type=int, default=10, help="Number of random pools.")
        parser.add_argument("--seed", type=int, default=0, help="Base seed.")
        parser.add_argument("--risk", type=float, help="Iterative: risk threshold p (default: the study's).")
        parser.add_argument(
            "--min", type=int, dest="min_n", help="Iterative: initial clusters n (default: the study's)."
        )
        parser.add_argument(
            "--budget", type=int, help="Iterative: annotation budget b (default: the study's, else 200)."
        )
        parser.add_argument("--metric", help="Separability metric for separability strategies (default: the study's).")
        parser.add_argument("--threshold", type=float, help="Separability threshold (default: the study's).")
        parser.add_argument(
            "--uniform-share",
            type=float,
            help="judge-disagreement: the share of the budget spread evenly over all items "
            "(default 0.5; 1 is a uniform sample).",
        )
        parser.add_argument("--plot", help="Write the success-vs-budget plot to this .png or .svg file.")
        parser.add_argument(
            "--json",
            action="store_true",
            help="Print a JSON document (with --replay: a list of "
            "records {pair, system_a, system_b, seed, design, alpha, decision, items_used, judgments_used, "
            "judgments_fixed} and, with --judges, judge_verdicts_used; decision a is the pair's first system as the "
            "study lists the pair; alpha the pair's own).",
        )
        parser.add_argument(
            "--replay",
            action="store_true",
            help="Replay the study's human judgments through the anytime-valid decision of each "
            "system pair (every pair, or --pair), --seeds random orders from --seed.",
        )
        parser.add_argument(
            "--null",
            action="store_true",
            help="With --replay: A/A, each item's outcome mirrored at random (false-decision rate).",
        )
        parser.add_argument(
            "--alpha", type=float, help="With --replay: the decision error rate (default: the study's)."
        )
        parser.add_argument(
            "--margin",
            type=float,
            help="With --replay: the equivalence margin (default: the study's; 0: winners only).",
        )
        parser.add_argument(
            "--first-raters",
            choices=["one", "all"],
            help="With --replay and every pair as the goal: 'one' (the default) buys one rater per item while "
            "items remain and the other raters only where the pair stays undecided (each step at half the "
            "error rate); 'all' buys whole items.",
        )
        parser.add_argument(
            "--looks",
            type=int,
            help="With --replay: 0 looks after every item (the anytime-valid betting sequence); K looks "
            "group-sequentially at K equally spaced shares of the pair's items (Lan-DeMets O'Brien-Fleming "
            "spending; selection/core/group_sequential.py). Default: the study's setting (decision_looks; with "
            "the ranking as the goal, 0), with its futility threshold.",
        )
        parser.add_argument(
            "--futility",
            type=float,
            help="With looks: stop a pair undecided at a look whose conditional power (the chance of a decision "
            "by the last look if the trend so far holds) is below this, so its items go to pairs that can still be "
            "decided (one rater first moves on to whole items); 0: never. Default: the study's setting "
            "(decision_futility) when --looks is not given either, else 0.",
        )
        parser.add_argument(
            "--first-share",
            type=float,
            help="With one rater first: the share of the pair's alpha its first phase spends (the rest goes to whole "
            "items). Default: 0.5 looking after every item (the live plan's), 0.3 with --looks (chosen on PRD: "
            "borderline pairs are decided by whole items, clear ones by single votes at any alpha).",
        )
        parser.add_argument(
            "--judges",
            action="store_true",
            help="With --replay: the study's LLM judge verdicts known on every item from the start, inside a "
            "prediction-powered decision (selection/core/designs.py); records gain judge_verdicts_used.",
        )
        parser.add_argument(
            "--label-rate",
            type=float,
            default=0.5,
            help="With --judges: the share of items whose human judgments are bought (default 0.5).",
        )
        parser.add_argument(
            "--error-control",
            choices=multiplicity.CONTROLS,
            help="With --replay: each pair's error rate (per_pair) or the study's, split over its pairs "
            "(study_wide); auto: study-wide when it decides more than one pair. Default: the study's setting.",
        )
        parser.add_argument(
            "--budget-share",
            type=float,
            help="With --replay: replay all the study's pairs together under one budget of this share (above 0, at "
            "most 1) of the human judgments that buying every item of every pair would take, an item at a time "
            "to an open pair (--allocation); a pair the budget cuts off stays undecided. Records gain allocation "
            "and budget.",
        )
        parser.add_argument(
            "--allocation",
            choices=["race", "even", "serial"],
            help="With --budget-share: which open pair gets the next item. race (the default): the pairs closest "
            "to a decision first, not those needing far more items than their pool holds "
            "(selection/core/racing.py); even: the pair with the fewest items so far; serial: one pair at a "
            "time, each bought until it is decided, stopped or its next item no longer fits, in a random order "
            "of the pairs per seed.",
        )
        parser.add_argument(
            "--goal",
            choices=["pairs", "ranking"],
            help="With --replay: decide every system pair (pairs), or only what the ranking needs "
            "(ranking: an item at a time to the undecided pairs of adjacent systems whose order the "
            "decided pairs do not imply, until every adjacent order is decided or out of items; each "
            "record then also has 'implied', the direction the decided pairs imply for it). Default: "
            "the study's setting.",
        )

    def handle(self, *args, **o):
        study = get_study(o["study"])
        if o["replay"]:
            return replay.run(self, study, o)
        if o["null"] or o["alpha"] is not None or o["margin"] is not None or o["looks"] or o["judges"]:
            raise CommandError("--null, --alpha, --margin, --looks and --judges go with --replay")
        if not o["oracle"]:
            raise CommandError("--oracle is required (or --replay to replay the study's own human judgments)")
        comparison = self._comparison(study, o["pair"])
        try:
            budgets = [int(b) for b in o["budgets"].split(",")]
        except ValueError:
            raise CommandError(f"--budgets must be comma-separated whole numbers, not {o['budgets']!r}") from None
        methods = [m.strip() for m in o["method"].split(",") if m.strip()]
        for m in methods:
            if m != "default" and m not in STRATEGIES:
                raise CommandError(f"unknown method {m!r}; choose from default, " + ", ".join(sorted(STRATEGIES)))
        items, labels = self._oracle(study, comparison, o["oracle"], o["oracle_kind"])
        if len(items) < 10:
            raise CommandError(f"only {len(items)} items have an oracle label; a simulation needs at least 10")
        if o["uniform_share"] is not None and not 0 < o["uniform_share"] <= 1:
            raise CommandError("--uniform-share must be above 0 and at most 1")
        params = strategy_parameters(
            study, metric=o["metric"], threshold=o["threshold"], uniform_share=o["uniform_share"]
        )
        context = services.do_build_selection_context(study, comparison, items, params)
        uses_sep = any(m in STRATEGIES and STRATEGIES[m].uses_separability for m in methods)
        try:
            deltas = context.deltas if uses_sep else None
            judges = context.judges if any(m in JUDGE_STRATEGIES for m in methods) else None
        except ValueError as exc:  # what a method needs cannot be had: say it, without a traceback
            raise CommandError(str(exc)) from None
        pools = draw_pools(context.vectors, labels, o["seeds"], seed=o["seed"], delta=deltas, judges=judges)
        # the sample majority of a draw by the judges (weighted or stratified) is not an estimate of anything: those
        # designs are compared in the estimates table only
        static = {"random": "random"} | {
            m: (DEFAULT_METHOD if m == "default" else m)
            for m in methods
            if not is_live(m) and m not in JUDGE_STRATEGIES
        }
        rates = success_rates(pools, {m: self._method(s, params) for m, s in static.items()}, budgets, seed=o["seed"])
        document = {
            "study": study.name,
            "system_a": comparison.system_a.name,
            "system_b": comparison.system_b.name,
            "items": len(items),
            "pool_fraction": 0.8,
            "seeds": o["seeds"],
            "budgets": budgets,
            "default_method": DEFAULT_METHOD,
            "parameters": params,
            "oracle": {
                name: int((labels == code).sum())
                for code, name in (("a", comparison.system_a.name), ("b", comparison.system_b.name), ("tie", "tie"))
            },
            "success": {m: {str(b): r for b, r in v.items()} for m, v in rates.items()},
        }
        if judges is not None:
            document["estimates"] = self._estimates(pools, methods, params, budgets, o["seed"], judges)
        if any(is_live(m) for m in methods):
            settings = iterative_parameters(study, risk=o["risk"], min_n=o["min_n"], budget=o["budget"])
            for key, report in (
                ("iterative", iterative_report(pools, **settings)),
                ("iterative_random", iterative_random_report(pools, seed=o["seed"], **settings)),
            ):
                document[key] = {
                    "risk": settings["risk"],
                    "min": settings["min_n"],
                    "budget": settings["budget"],
                    "ties_count_in_n": settings["ties_count_in_n"],
                    "success": report.success,
                    "error": report.error,
                    "inconclusive": report.inconclusive,
                    "mean_annotations": report.mean_annotations,
                }
        if o["plot"]:
            self._plot(rates, budgets, o["plot"], document)
        if o["json"]:
            self.stdout.write(json.dumps(document, indent=2))
            return
        self.stdout.write(
            f"{document['system_a']} vs {document['system_b']}: {len(items)} items with an oracle, "
            f"{o['seeds']} pools of 80 %"
        )
        self.stdout.write("method".ljust(26) + "".join(f"N={b}".rjust(8) for b in budgets))
        for m, by_budget in rates.items():
            self.stdout.write(m.ljust(26) + "".join(f"{by_budget[b]:8.2f}" for b in budgets))
        if "estimates" in document:
            self._print_estimates(document["estimates"], budgets)
        for key, name in (("iterative", "diffuse-iterative"), ("iterative_random", "random-iterative")):
            if key in document:
                it = document[key]
                self.stdout.write(
                    f"{name} (p={it['risk']}, min {it['min']}, budget {it['budget']}): success {it['success']:.2f}, "
                    f"error {it['error']:.2f} (promised <= {it['risk']}), inconclusive {it['inconclusive']:.2f}, "
                    f"mean annotations {it['mean_annotations']:.1f}"
                )

    def _comparison(self, study, pair):
        comparisons = list(study.comparisons.select_related("system_a", "system_b"))
        if pair:
            wanted = [p.strip() for p in pair.split(",")]
            for c in comparisons:
                if sorted(wanted) == sorted([c.system_a.name, c.system_b.name]):
                    return c
            raise CommandError(
                f"the study does not compare {pair!r}; its pairs: "
                + "; ".join(f"{c.system_a.name},{c.system_b.name}" for c in comparisons)
            )
        if len(comparisons) != 1:
            raise CommandError("the study compares several system pairs; choose one with --pair A,B")
        return comparisons[0]

    def _oracle(self, study, comparison, path, kind="any"):
        data = read_file(path)
        first = next((line for line in data.decode("utf-8", "replace").splitlines() if line.strip()), "")
        try:
            is_judgments = "winner" not in json.loads(first)
        except (json.JSONDecodeError, TypeError):
            is_judgments = False
        if is_judgments:
            return self._oracle_from_judgments(study, comparison, data, path, kind)
        names = {comparison.system_a.name: "a", comparison.system_b.name: "b", "tie": "tie"}
        by_id = {i.external_id: i for i in study.items.order_by("position")}
        problems, labels = [], {}
        for number, raw in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
                item, winner = str(line["item"]), line["winner"]
            except (json.JSONDecodeError, KeyError, TypeError):
                problems.append(f"line {number}: expected a JSON object with 'item' and 'winner'")
                continue
            if item not in by_id:
                problems.append(f"line {number}, field 'item': unknown item {item!r}")
            elif winner not in names:
                problems.append(
                    f"line {number}, field 'winner': must be {comparison.system_a.name!r}, "
                    f"{comparison.system_b.name!r} or 'tie', not {winner!r}"
                )
            elif item in labels:
                problems.append(f"line {number}, field 'item': {item!r} appears twice")
            else:
                labels[item] = names[winner]
        if problems:
            raise CommandError(f"{path} has problems:\n" + "\n".join(problems[:200]))
        items = [by_id[i] for i in by_id if i in labels]
        return items, np.array([labels[i.external_id] for i in items])

    @staticmethod
    def _oracle_from_judgments(study, comparison, data: bytes, path, kind: str):
        """Item winners from judgments of the simulated system pair, by ``winners.item_winner``."""
        try:
            parsed = judgment_files.parse_judgments(data, path, imports.study_samples(study))
        except rules.FormatError as exc:
            raise CommandError(f"{path} has problems:\n{exc}") from None
        pair = (comparison.system_a.name, comparison.system_b.name)
        # the report's lines: this pair's, of the kind of rater asked for, neither replaced by a revision nor set
        # aside by the live loop (superseded); read into rating sets by the one reader
        counted = [
            j
            for j in parsed
            if (kind == "any" or j.rater_kind == kind)
            and {j.system_a, j.system_b} == set(pair)
            and not j.revised
            and not j.superseded
        ]
        sets = rating_sets(
            (j.item, j.rater, j.choice, j.response_set, j.probability_a, (j.system_a, j.system_b) != pair)
            for j in counted
        )
        if not sets:
            whose = "" if kind == "any" else f"{kind} "
            raise CommandError(f"{path} has no {whose}judgments of {pair[0]} vs {pair[1]}")
        labels = {item: winners.item_winner(list(by_rater.values())) for item, by_rater in sets.items()}
        items = [i for i in study.items.order_by("position") if i.external_id in labels]
        return items, np.array([labels[i.external_id] for i in items])

    def _estimates(self, pools, methods, params, budgets, seed, judges) -> dict:
        """The estimates table: people alone and people with the judges on a random sample (the baseline), and on
        each requested design that is a probability sample over the whole pool, by its kind's estimators."""
        estimators = {
            UNIFORM: (("people", "people"), ("people+judges", "people+judges")),
            WEIGHTED: (("people", "weighted people"), ("people+judges", "weighted")),
            STRATIFIED: (("people, by band", "stratified"),),
        }
        designs, left_out = {}, []
        for m in ["random", *[m for m in methods if m != "random"]]:
            name = DEFAULT_METHOD if m == "default" else m
            kind = STRATEGIES[name].design
            if kind not in estimators or (
                name in STRATEGIES and STRATEGIES[name].uses_separability and kind == STRATIFIED
            ):
                left_out.append(m)  # chosen on purpose, or strata over part of the pool: no estimate of the pool
                continue
            draw = self._draw(name, params)
            for label, estimator in estimators[kind]:
                designs[f"{m}: {label}"] = (draw, estimator)
        figures = estimate_rates(pools, designs, budgets, seed=seed)
        return {
            "judged_items": int(np.sum(~np.isnan(judges).all(axis=1))),
            "verdicts": int(np.sum(~np.isnan(judges))),
            "target": "the pool's own items (finite-population correction)",
            "baseline": BASELINE,
            "left_out": left_out,
            "designs": {
                name: {str(b): {**dataclasses.asdict(f), "realised": f.realised} for b, f in by_budget.items()}
                for name, by_budget in figures.items()
            },
        }

    def _print_estimates(self, estimates, budgets):
        self.stdout.write(
            f"\nEstimates of the pool's win rate ({estimates['verdicts']} judge verdicts on "
            f"{estimates['judged_items']} items), per budget: mean error / 95 % interval width / "
            f"coverage / efficiency claimed / efficiency realised (vs {estimates['baseline']})"
        )
        shown = [b for b in budgets if b >= 2]
        self.stdout.write("design".ljust(36) + "".join(f"N={b}".rjust(34) for b in shown))
        for name, by_budget in estimates["designs"].items():
            cells = "".join(
                f"{f['error']:.3f} {f['width']:.3f} {f['coverage']:.2f} {f['claimed']:.2f} {f['realised']:.2f}".rjust(
                    34
                )
                for f in (by_budget[str(b)] for b in shown)
            )
            self.stdout.write(name.ljust(36) + cells)
        if estimates["left_out"]:
            self.stdout.write(
                "Not estimated (items chosen on purpose, or strata over part of the pool): "
                + ", ".join(estimates["left_out"])
            )

    @staticmethod
    def _draw(name, params):
        """A strategy as a simulation draw: the chosen pool indices, with their inclusion probabilities and every
        item's stratum when the strategy states them."""
        strategy = get_strategy(name)

        def run(pool: Pool, budget: int, rng) -> Drawn:
            # a pool drawn without separability or the judges' verdicts has no loader for them (the command draws
            # them whenever a method needs them)
            delta, judges = pool.delta, pool.judges
            context = SelectionContext(
                len(pool.oracle),
                lambda: pool.x,
                None if delta is None else (lambda metric: delta),
                params,
                load_judges=None if judges is None else (lambda: judges),
            )
            chosen = np.array(strategy.select(context, budget, rng), dtype=np.int64)
            inclusion = context.notes.get("inclusion")
            strata = None
            if "strata" in context.notes:
                strata = np.full(len(pool.oracle), -1, dtype=np.int64)
                strata[np.asarray(context.notes["frame"], dtype=np.int64)] = context.notes["strata"]
            return Drawn(chosen, None if inclusion is None else np.asarray(inclusion, dtype=np.float64), strata)

        return run

    @classmethod
    def _method(cls, name, params):
        draw = cls._draw(name, params)
        return lambda pool, budget, rng: draw(pool, budget, rng).chosen

    def _plot(self, rates, budgets, path, document):
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for m, by_budget in rates.items():
            ax.plot(budgets, [by_budget[b] for b in budgets], marker="o", label=m)
        ax.set_xlabel("budget N")
        ax.set_ylabel("success rate")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"{document['system_a']} vs {document['system_b']} ({document['seeds']} pools)")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        try:
            fig.savefig(path)
        except (OSError, ValueError) as exc:
            raise CommandError(f"cannot write the plot to {path}: {exc}") from None
        print(f"plot: {path}", file=sys.stderr)
