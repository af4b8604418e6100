import json
import re
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.exchange.rules import FormatError
from annotation.management.commands._common import get_owner
from annotation.rating import imports
from annotation.studies import creation

DEFAULT_DATA = Path(__file__).resolve().parents[4] / "shared" / "data" / "prd_vicuna80_human"
MODELS = ("bard", "claude", "gpt35", "gpt4", "vicuna-13b")
JUDGES = ("gpt4", "gpt35", "claude", "bard", "vicuna-13b")
FILE = re.compile(r"answer_(?P<a>.+?)-vs-answer_(?P<b>.+?)-(?P<who>human|gpt4|gpt35|claude|bard|vicuna-13b)-reviewer")
WINNER = {1: "first", 2: "second", 3: "tie"}  # PRD's score: 1 = the answer shown first is better, 3 = a tie


class Command(BaseCommand):
    help = (
        "Load the PRD Vicuna-80 data as one study: the 80 questions, the answers of bard, claude, gpt35, gpt4 "
        "and vicuna-13b, every human vote (each an anonymous rater) and the verdicts of the five LLM judges in "
        "both presentation orders, so the report checks the judges against the humans."
    )

    def add_arguments(self, parser):
        parser.add_argument("--data", default=str(DEFAULT_DATA), help="The prd_vicuna80_human folder.")
        parser.add_argument("--name", default="prd-vicuna80", help="Name of the study.")
        parser.add_argument("--owner", help="Owner username (default: the only account, when there is one).")

    def handle(self, *args, **options):
        folder = Path(options["data"])
        if not folder.is_dir():
            raise CommandError(
                f"There is no folder {folder}. The PRD data is public (github.com/bcdnlp/PRD, its data/vicuna80 and "
                "prompts folders; README.md, 'The real data'): put it there or point --data at it."
            )
        if not (folder / "generations").is_dir():
            raise CommandError(f"{folder} has no generations/ folder: point --data at prd_vicuna80_human")
        owner = get_owner(options["owner"])
        questions = {q["question_id"]: q["text"] for q in _lines(folder / "prompts" / "vicuna_questions.jsonl")}
        answers = {
            m: {a["question_id"]: a["text"] for a in _lines(folder / "generations" / f"answer_{m}.jsonl")}
            for m in MODELS
        }
        items = [
            {"id": f"q{qid}", "input": text, "outputs": {m: [answers[m][qid]] for m in MODELS}}
            for qid, text in sorted(questions.items())
            if all(qid in answers[m] for m in MODELS)
        ]
        lines = [
            *self._verdicts(folder, "human", "human"),
            *(v for judge in JUDGES for v in self._verdicts(folder / f"ratings-{judge}", judge, "judge")),
        ]
        try:
            study = creation.do_create_study(
                owner,
                options["name"],
                _jsonl(items),
                "prd.jsonl",
                description="PRD Vicuna-80: human votes and five LLM judges",
            )
            summary = imports.do_import_judgments(study, _jsonl(lines), "prd-judgments.jsonl")
        except FormatError as exc:
            raise CommandError(f"The PRD data did not import:\n{exc}") from None
        self.stdout.write(
            self.style.SUCCESS(
                f"Created study '{study.name}': {len(items)} questions, {len(MODELS)} systems, {summary.created} "
                f"judgments ({sum(1 for v in lines if v['rater_kind'] == 'human')} human votes, the rest by "
                f"{len(JUDGES)} judges)."
            )
        )

    @staticmethod
    def _verdicts(folder: Path, who: str, kind: str) -> list[dict]:
        """One judgment line per vote or verdict: the pair in a fixed (sorted) order, so both presentation orders
        are the same pair, and the answer shown first as given by the file name."""
        out = []
        for file_number, path in enumerate(sorted(folder.glob("*.jsonl"))):
            match = FILE.match(path.name)
            if not match or match["who"] != who or match["a"] not in MODELS or match["b"] not in MODELS:
                continue
            first, second = match["a"], match["b"]
            system_a, system_b = sorted((first, second))
            for number, row in enumerate(_lines(path)):
                score = row.get("score")
                winner = None if score is None else WINNER.get(score)
                if winner is None:
                    continue
                rater = f"prd-human-{file_number}-{number}" if kind == "human" else who
                out.append(
                    {
                        "id": f"{who}:{file_number}:{number}",
                        "item": f"q{row['question_id']}",
                        "system_a": system_a,
                        "sample_a": 0,
                        "system_b": system_b,
                        "sample_b": 0,
                        "shown_first": first,
                        "rater": rater,
                        "rater_kind": kind,
                        "choice": {"first": first, "second": second, "tie": "tie"}[winner],
                    }
                )
        return out


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()
