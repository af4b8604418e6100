"""Convert the public MTurk rating sets of "Compare without Despair" into SepLab studies."""

import csv
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from annotation.exchange.rules import FormatError
from annotation.management.commands._common import get_owner
from annotation.models import Study
from annotation.rating import imports
from annotation.studies import creation

DEFAULT_DATA = Path(__file__).resolve().parents[4] / "shared" / "data" / "separability_human_study"


class Command(BaseCommand):
    help = (
        "Import the separability paper's MTurk human study (human_ratings_long.csv and the K=5 generations of "
        "each model) as one SepLab study per configuration: items = instances, systems = the two models, "
        "judgments = every worker's 5 pairwise ratings in model coordinates, with the display order kept. "
        "The source articles/dialogues are not public, so each item's input says so."
    )

    def add_arguments(self, parser):
        parser.add_argument("--data", default=str(DEFAULT_DATA), help="The separability_human_study folder.")
        parser.add_argument(
            "--config", action="append", help="Only this configuration (file stem before _pref_data.csv); repeatable."
        )
        parser.add_argument("--prefix", default="mturk", help="Study names are PREFIX-CONFIG.")
        parser.add_argument("--owner", help="Owner username (default: the only account, when there is one).")

    def handle(self, *args: Any, **options: Any) -> None:
        folder = Path(options["data"])
        ratings_path = folder / "human_ratings_long.csv"
        if not ratings_path.exists():
            raise CommandError(f"{ratings_path} not found; point --data at the separability_human_study folder")
        owner = get_owner(options["owner"])
        with ratings_path.open(encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
        by_config: dict[str, list[dict]] = defaultdict(list)
        for row in rows:
            by_config[row["file"].removesuffix("_pref_data.csv")].append(row)
        wanted = options["config"] or sorted(by_config)
        unknown = [c for c in wanted if c not in by_config]
        if unknown:
            raise CommandError(f"unknown configuration(s) {unknown}; available: {sorted(by_config)}")
        for config in wanted:
            study = self._import(folder, config, by_config[config], owner, f"{options['prefix']}-{config}")
            self.stdout.write(
                f"Created '{study.name}': {study.items.count()} items, "
                f"{study.judgments.count()} judgments by {study.raters.count()} workers."
            )

    def _import(self, folder: Path, config: str, rows: list[dict], owner, name: str) -> Study:
        model_a, model_b = rows[0]["model_A"], rows[0]["model_B"]
        dataset = rows[0]["dataset"]
        generations = {}
        for model in (model_a, model_b):
            path = folder / f"{config}__{model}_generations.json"
            if not path.exists():
                raise CommandError(f"{path} not found")
            generations[model] = [entry["summaries"] for entry in json.loads(path.read_text(encoding="utf-8"))]
        items = [
            {
                "id": f"{dataset}-{i}",
                "input": f"{dataset} instance {i} (the source text is not part of the public data)",
                "outputs": {model_a: generations[model_a][i], model_b: generations[model_b][i]},
                "metadata": {"dataset": dataset, "instance": i, "config": config},
            }
            for i in range(len(generations[model_a]))
        ]
        sample_of = {
            model: [{text: j for j, text in enumerate(s)} for s in generations[model]] for model in (model_a, model_b)
        }
        judgments = []
        for row in rows:
            instance, display_id = int(row["instance"]), int(row["display_id"])
            text_a, text_b = (
                (row["text_col1"], row["text_col2"]) if display_id == 1 else (row["text_col2"], row["text_col1"])
            )
            try:
                sample_a, sample_b = sample_of[model_a][instance][text_a], sample_of[model_b][instance][text_b]
            except KeyError:
                raise CommandError(
                    f"{config}: a rated text of instance {instance}, worker {row['worker']}, pair "
                    f"{row['pair']} is not among the model's generations"
                ) from None
            pref = int(row["pref_model"])  # -1: A preferred, +1: B preferred, 0: no preference
            judgments.append(
                {
                    "id": f"{config}-{instance}-w{row['worker']}-p{row['pair']}",
                    "item": f"{dataset}-{instance}",
                    "system_a": model_a,
                    "sample_a": sample_a,
                    "system_b": model_b,
                    "sample_b": sample_b,
                    "shown_first": model_a if display_id == 1 else model_b,
                    "rater": f"mturk-{row['worker']}",
                    "rater_kind": "human",
                    "choice": {-1: model_a, 1: model_b, 0: "tie"}[pref],
                    "response_set": None,
                    "probability_a": None,
                    "pair_in_hit": int(row["pair"]),
                }
            )
        try:
            study = creation.do_create_study(
                owner,
                name,
                "".join(json.dumps(i) + "\n" for i in items).encode(),
                "mturk.jsonl",
                description=f"MTurk ratings of {model_a} vs {model_b} "
                f"({dataset}) from the separability paper's public data.",
            )
            imports.do_import_judgments(study, "".join(json.dumps(j) + "\n" for j in judgments).encode(), "j.jsonl")
        except FormatError as exc:
            raise CommandError(f"{config}: {exc}") from None
        return study
