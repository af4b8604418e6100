import json

from annotation.exchange import exports
from annotation.management.commands import export_judgments


class Command(export_judgments.Command):
    what = "rankings"
    help = (
        "Export every ranking and best-worst answer of a study in the format of docs/interfaces.md#ranking-format "
        "(JSONL) to stdout or a file. The pairwise judgments they imply are in export_judgments' file, each with "
        "its answer's id in the field 'ranking'."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="Study name.")
        parser.add_argument("--format", choices=["jsonl"], default="jsonl", help="JSONL, the only format of rankings.")
        parser.add_argument("--output", "-o", help="Write to this file instead of stdout.")

    def _write(self, study, fmt: str, out) -> int:
        count = 0
        for line in exports.ranking_lines(study):
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
            count += 1
        return count
