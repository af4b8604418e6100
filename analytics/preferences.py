"""A study's judgments as preference data the next tool reads: ``prompt / chosen / rejected`` records for
reward models and DPO (JSONL, Parquet, a Hugging Face ``datasets`` folder with its dataset card), and Arena battles
with their style columns.

One record per judgment of the chosen rater population (``analytics.populations``: humans by default, as on the
report) and question (the main one, or a further preference question's): the judgment's preferred output is
``chosen``, the other ``rejected``. A tie has no chosen output: left out unless asked for (then ``chosen`` /
``rejected`` are A's and B's outputs and ``tie`` is true), and "both are bad" likewise (``both_bad``). ``margin`` is
the 5-point scale's strength (1 better, 2 much better) when the study uses it. Replaced answers (``revised``) are
never exported; the report's rules for screened-out raters come with the population.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import hmac
import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

from django.conf import settings

from analytics.core import style
from analytics.populations import Population
from analytics.report.data import Answers
from annotation import elicitation, questions
from annotation.exchange.rules import csv_safe
from annotation.models import Judgment, Rater, Study
from selection import services as selection_services

FORMATS = ("jsonl", "parquet", "hf", "arena")

# The record, field by field: its Parquet type and what it says (the dataset card lists them from here).
FIELDS: dict[str, tuple[str, str]] = {
    "prompt": ("string", "the item's input, as raters saw it"),
    "chosen": ("string", "the output the rater preferred (A's output when tie is true)"),
    "rejected": ("string", "the other output (B's output when tie is true)"),
    "chosen_system": ("string", "the system that wrote `chosen` (null for a tie)"),
    "rejected_system": ("string", "the system that wrote `rejected` (null for a tie)"),
    "tie": ("bool", "the rater had no preference (kept only with --ties keep)"),
    "both_bad": ("bool", "the rater said both outputs are bad (kept only with --both-bad keep)"),
    "margin": ("int8", "the 5-point scale's strength: 1 better, 2 much better; null without a scale"),
    "item_id": ("string", "the item's id in the study file"),
    "system_a": ("string", "the pair's first system (model coordinates)"),
    "system_b": ("string", "the pair's second system"),
    "sample_a": ("int32", "which of system_a's samples was shown"),
    "sample_b": ("int32", "which of system_b's samples was shown"),
    "shown_first": ("string", "the system whose output the rater saw first (left or top)"),
    "rater": (
        "string",
        "the rater: a pseudonym stable within the study (rater-…) unless exported with raw ids; a judge's name",
    ),
    "rater_kind": ("string", "human or judge"),
    "rater_source": ("string", "how the rater came: personal_link, open_link, external (a crowd site), import, run"),
    "population": ("string", "the rater population exported (analytics.populations key)"),
    "question": ("string", "the question answered: empty for the main question, else the further question's key"),
    "inclusion_probability": (
        "float64",
        "the item's probability of being selected for this system pair, when the "
        "selection design knows it (null for purposive or unrecorded designs)",
    ),
    "judgment_id": ("string", "the judgment's id in SepLab's own export (joins the two)"),
}


class ExportError(ValueError):
    """Nothing to export, or an option the study does not allow; the message is for the researcher."""


@dataclasses.dataclass(frozen=True)
class Options:
    population: Population = dataclasses.field(default_factory=Population)
    ties: bool = False  # keep ties
    both_bad: bool = False  # keep "both are bad"
    raw_rater_ids: bool = False  # people's ids as stored (crowd worker ids identify people): off by default


def pseudonym(study: Study, rater: str) -> str:
    """A person's rater id as exports publish it: stable within the study, not reversible without the server's
    secret key (HMAC-SHA-256 of the study and the id). Crowd sites' worker ids can be linked to people's accounts
    (MTurk) and their terms restrict sharing them (Prolific); judges keep their names."""
    digest = hmac.new(settings.SECRET_KEY.encode(), f"seplab-export:{study.pk}:{rater}".encode(), hashlib.sha256)
    return "rater-" + digest.hexdigest()[:12]


def _inclusion(study: Study) -> dict[tuple[str, str], dict[int, float]]:
    """(system a, system b) -> item id -> inclusion probability, for designs that know it."""
    out: dict[tuple[str, str], dict[int, float]] = {}
    for pair, design in selection_services.sample_designs(study).items():
        if design.kind == selection_services.UNIFORM and design.frame:
            share = len(design.chosen) / len(design.frame)
            out[pair] = {item: share for item in design.chosen}
        elif design.probability_sample:
            out[pair] = dict(design.inclusion)
    return out


def records(study: Study, options: Options | None = None) -> list[dict[str, Any]]:
    """The study's judgments of the population and question as preference records (``FIELDS``), oldest first."""
    options = options or Options()
    population, key = options.population, options.population.question
    inclusion = _inclusion(study)
    rows = (
        Judgment.objects.analysed()
        .filter(study=study)
        .order_by("created", "id")
        .values(
            "idempotency_key",
            "pair__item_id",
            "pair__item__external_id",
            "pair__item__input",
            "pair__generation_a__text",
            "pair__generation_b__text",
            "pair__generation_a__system__name",
            "pair__generation_b__system__name",
            "pair__generation_a__sample_index",
            "pair__generation_b__sample_index",
            "rater__external_id",
            "rater__kind",
            "rater__source",
            "rater__screened_out",
            "a_shown_first",
            "choice",
            "response_set",
            "strength",
            "probability_a",
            "answers",
        )
        .iterator(chunk_size=2000)
    )
    out = []
    for r in rows:
        if not population.admits(
            r["rater__kind"], r["rater__external_id"], r["rater__source"], r["rater__screened_out"]
        ):
            continue
        if key:
            answer = questions.stored_fields(r["answers"], key)
            if answer is None or "choice" not in answer:
                continue
            choice, response_set, strength, probability_a = (
                answer["choice"],
                answer["response_set"],
                answer["strength"],
                None,
            )
        else:
            choice, response_set, strength, probability_a = (
                r["choice"],
                r["response_set"],
                r["strength"],
                r["probability_a"],
            )
        said = elicitation.effective_choice(choice, response_set, probability_a)
        if said is None:
            continue
        both_bad = elicitation.no_output_acceptable(choice, response_set)
        tie = said == "tie" and not both_bad
        if (tie and not options.ties) or (both_bad and not options.both_bad):
            continue
        a, b = r["pair__generation_a__system__name"], r["pair__generation_b__system__name"]
        texts = {"a": r["pair__generation_a__text"], "b": r["pair__generation_b__text"]}
        names = {"a": a, "b": b}
        winner = "a" if said == "tie" else said
        loser = "b" if winner == "a" else "a"
        decided = said in ("a", "b")
        out.append(
            {
                "prompt": r["pair__item__input"],
                "chosen": texts[winner],
                "rejected": texts[loser],
                "chosen_system": names[winner] if decided else None,
                "rejected_system": names[loser] if decided else None,
                "tie": tie,
                "both_bad": both_bad,
                "margin": strength if decided else None,
                "item_id": r["pair__item__external_id"],
                "system_a": a,
                "system_b": b,
                "sample_a": r["pair__generation_a__sample_index"],
                "sample_b": r["pair__generation_b__sample_index"],
                "shown_first": a if r["a_shown_first"] else b,
                "rater": r["rater__external_id"]
                if options.raw_rater_ids or r["rater__kind"] == "judge"
                else pseudonym(study, r["rater__external_id"]),
                "rater_kind": r["rater__kind"],
                "rater_source": r["rater__source"],
                "population": population.key,
                "question": key,
                "inclusion_probability": inclusion.get((a, b), {}).get(r["pair__item_id"]),
                "judgment_id": r["idempotency_key"],
            }
        )
    return out


def _schema():
    import pyarrow as pa

    types = {"string": pa.string(), "bool": pa.bool_(), "int8": pa.int8(), "int32": pa.int32(), "float64": pa.float64()}
    return pa.schema([pa.field(name, types[kind]) for name, (kind, _) in FIELDS.items()])


def write_jsonl(rows: list[dict], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_parquet(rows: list[dict], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows, schema=_schema()), path)


HF_DATA = "data/train-00000-of-00001.parquet"


def dataset_card(study: Study, rows: list[dict], options: Options) -> str:
    """The Hugging Face dataset card (README.md with its YAML header): what the records hold and how the data was
    collected -- the study's settings, where the raters came from, the attention checks, and how items were
    selected with their inclusion probabilities."""
    crowd = study.crowd_settings
    sources = Counter(r["rater_source"] for r in rows)
    raters = len({r["rater"] for r in rows})
    population = options.population
    screened = sum(
        1
        for kind, name, source in Rater.objects.filter(study=study, screened_out=True).values_list(
            "kind", "external_id", "source"
        )
        if population.admits(kind, name, source, False)
    )
    designs = selection_services.sample_designs(study)
    asked = questions.preference_questions(study)
    question = next((q for q in asked if q.key == options.population.question), asked[0])
    lines = [
        "---",
        "configs:",
        "- config_name: default",
        "  data_files:",
        "  - split: train",
        f"    path: {HF_DATA}",
        "tags:",
        "- preference",
        "- dpo",
        "- human-feedback",
        "- seplab",
        "---",
        "",
        f"# {study.name}: pairwise preferences",
        "",
        f"{len(rows):,} preference records by {raters:,} rater{'s' if raters != 1 else ''} "
        f"({options.population.label}), exported from SepLab. One record per judgment: `chosen` is the output the "
        "rater preferred, `rejected` the other.",
        "",
        "## How the data was collected",
        "",
        f"- **Question**: {question.text} (answered as: {question.how.replace('_', ' ')})"
        + ("" if not question.key else f"; a further question of the study, key `{question.key}`")
        + ".",
        f"- **Elicitation**: {elicitation.mode_of(study).label}; a tie option: {'yes' if study.allow_tie else 'no'}; "
        f"'both are bad': {'yes' if study.neither_option else 'no'}.",
        f"- **Pairs**: {study.pairs_per_assignment} sampled output pair(s) per item and rater, {study.raters_per_item} "
        f"rater(s) per item, scheduling: {study.get_scheduling_display().lower()}; outputs shown as "
        f"{study.get_output_format_display().lower()}, sides randomised (`shown_first`).",
        "- **Raters**: "
        + (
            ", ".join(f"{n:,} judgments via {source.replace('_', ' ')}" for source, n in sorted(sources.items()))
            or "none"
        )
        + ".",
        (
            f"- **Attention checks**: {crowd.gold_rate:g} per pair; raters below {crowd.screen_accuracy:.0%} accuracy "
            f"after {crowd.screen_min_gold} checks are screened out ({screened} of this population's raters were); "
            "screened-out raters are " + ("included" if population.include_screened else "left out") + " here."
            if crowd.gold_rate > 0
            else "- **Attention checks**: none in this study, so nobody was screened out."
        ),
        *(
            [
                f"- **Imported judgments** ({sources['import']:,}): collected elsewhere and brought in as a file; the "
                "settings above describe how SepLab asked its own raters, not how these were collected."
            ]
            if sources.get("import")
            else []
        ),
        "- **Rater ids**: "
        + (
            "as stored (crowd workers as site:worker id)."
            if options.raw_rater_ids
            else "pseudonyms stable within the study (rater-...); judges keep their names."
        ),
        f"- **Ties**: {'kept (`tie` true)' if options.ties else 'left out'}; 'both are bad': "
        f"{'kept (`both_bad` true)' if options.both_bad else 'left out'}.",
        "",
        "## How items were selected",
        "",
    ]
    for (a, b), design in designs.items():
        known = (
            "every chosen item's inclusion probability is in `inclusion_probability`"
            if design.probability_sample
            else "no inclusion probabilities: " + (design.reason or "the items were not drawn at random")
        )
        lines.append(
            f"- {a} vs {b}: {design.method} ({design.kind}), {len(design.chosen):,} of "
            f"{len(design.frame):,} items; {known}."
        )
    if not designs:
        lines.append("- No system pairs.")
    lines += ["", "## Fields", ""]
    lines += [f"- `{name}` ({kind}): {words}" for name, (kind, words) in FIELDS.items()]
    lines += ["", 'Load it with `datasets.load_dataset(PATH, split="train")`.', ""]
    return "\n".join(lines)


def write_hf(study: Study, rows: list[dict], path: Path, options: Options) -> None:
    """A folder ``datasets.load_dataset`` reads: the records as Parquet under ``data/`` and the dataset card."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "data").mkdir(exist_ok=True)
    write_parquet(rows, path / HF_DATA)
    (path / "README.md").write_text(dataset_card(study, rows, options), encoding="utf-8")


ARENA_COLUMNS = (
    "question_id",
    "model_a",
    "model_b",
    "winner",
    "judge",
    "turn",
    *(f"{feature}_{side}" for feature in style.FEATURES for side in ("a", "b")),
)
ARENA_WINNER = {"a": "model_a", "b": "model_b"}


def arena_csv(study: Study, options: Options | None = None) -> str:
    """The judgments as Chatbot Arena battles (``model_a, model_b, winner`` with "tie" and "tie (bothbad)", the judge,
    and Arena's style columns counted from the outputs by ``analytics.core.style``): what ``leaderboard --battles``,
    FastChat and arena-rank read."""
    options = dataclasses.replace(options or Options(), ties=True, both_bad=True)
    rows = records(study, options)
    pair_of = dict(Judgment.objects.filter(study=study).values_list("idempotency_key", "pair_id"))
    counts = Answers(study, {pair_of[r["judgment_id"]] for r in rows})
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(ARENA_COLUMNS)
    for r in rows:
        winner = (
            "tie (bothbad)"
            if r["both_bad"]
            else "tie"
            if r["tie"]
            else ARENA_WINNER["a" if r["chosen_system"] == r["system_a"] else "b"]
        )
        a_counts, b_counts = counts.of_pair(pair_of[r["judgment_id"]])
        # text cells as every SepLab CSV writes them: a leading = + - @ gets an apostrophe (no formula in a sheet)
        writer.writerow(
            [
                csv_safe(r["item_id"]),
                csv_safe(r["system_a"]),
                csv_safe(r["system_b"]),
                winner,
                csv_safe(r["rater"]),
                1,
                *(value for i in range(len(style.FEATURES)) for value in (a_counts[i], b_counts[i])),
            ]
        )
    return buffer.getvalue()


def export(study: Study, fmt: str, path: Path, options: Options | None = None) -> int:
    """Write the study's preferences to ``path`` in ``fmt`` (``FORMATS``); returns how many records. An empty
    export is refused, naming what left everything out."""
    options = options or Options()
    if fmt not in FORMATS:
        raise ExportError(f"format must be one of {', '.join(FORMATS)}")
    if fmt == "arena":
        text = arena_csv(study, options)
        n = text.count("\n") - 1
        if n <= 0:
            raise ExportError(_nothing(options, arena=True))
        path.write_text(text, encoding="utf-8")
        return n
    rows = records(study, options)
    if not rows:
        raise ExportError(_nothing(options))
    if fmt == "jsonl":
        write_jsonl(rows, path)
    elif fmt == "parquet":
        write_parquet(rows, path)
    else:
        write_hf(study, rows, path, options)
    return len(rows)


def _nothing(options: Options, arena: bool = False) -> str:
    hint = "" if arena or options.ties else " (ties are left out: --ties keep keeps them)"
    return (
        f"No judgment to export for {options.population.label}"
        + (f", question '{options.population.question}'" if options.population.question else "")
        + hint
        + "."
    )
