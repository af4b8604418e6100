import itertools
import json
import os
import tempfile
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation import elicitation, orientation
from annotation.arena import battles
from annotation.exchange import judgment_files
from annotation.management.commands._common import get_study
from annotation.models import Battle, BattleReply, GoldAnswer, Judgment, SystemEndpoint

CHUNK = 500  # battles read at a time, with their replies and votes


class Command(BaseCommand):
    help = (
        "Export an arena's battles as JSONL, one battle a line (docs/arena.md#exports): its rater, category, tags, "
        "status, flag, the winner in Chatbot Arena's words (model_a, model_b, tie, tie (bothbad)), the two systems, "
        "each side's whole conversation as OpenAI chat messages (conversation_a, conversation_b) and every reply's "
        "timing, tokens and cost. To stdout or a file."
    )

    def add_arguments(self, parser):
        parser.add_argument("--study", required=True, help="The arena study: its name, or OWNER/NAME.")
        parser.add_argument("--output", "-o", help="Write to this file instead of stdout (whole or not at all).")

    def handle(self, *args, **options):
        study = get_study(options["study"])
        if not study.is_arena:
            raise CommandError(
                f"'{study.name}' is not an arena study: it has no battles (export_judgments exports it)."
            )
        if not options["output"]:
            count = self._write(study, self.stdout)
            self.stderr.write(f"Exported {count} battles of '{study.name}'.")
            return
        target = Path(options["output"])
        try:
            handle, temporary = tempfile.mkstemp(
                prefix=f".{target.name}.", suffix=".part", dir=target.parent if str(target.parent) else "."
            )
        except OSError as exc:
            raise CommandError(f"Cannot write {target}: {exc.strerror}") from None
        try:
            with os.fdopen(handle, "w", encoding="utf-8", newline="") as out:
                count = self._write(study, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, target)
        except BaseException as exc:
            Path(temporary).unlink(missing_ok=True)
            if isinstance(exc, OSError):
                raise CommandError(f"Cannot write {target}: {exc.strerror}") from None
            raise
        self.stderr.write(f"Exported {count} battles of '{study.name}' to {target}.")

    def _write(self, study, out) -> int:
        count = 0
        for line in conversation_lines(study):
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
            count += 1
        return count


def conversation_lines(study):
    """Every battle of the arena as an export line, oldest first, read ``CHUNK`` battles at a time (their replies,
    votes and attention-check answers in one query each)."""
    prompts_of = dict(SystemEndpoint.objects.filter(system__study=study).values_list("system_id", "system_prompt"))
    rows = (
        Battle.objects.filter(study=study)
        .select_related("rater", "comparison__system_a", "comparison__system_b")
        .order_by("pk")
        .iterator(chunk_size=CHUNK)
    )
    for chunk in iter(lambda: list(itertools.islice(rows, CHUNK)), []):
        ids = [b.pk for b in chunk]
        replies: dict[int, list[BattleReply]] = {}
        for reply in BattleReply.objects.filter(battle_id__in=ids).order_by("battle_id", "turn", "side"):
            replies.setdefault(reply.battle_id, []).append(reply)
        votes = {  # a vote on an item excluded in the data manager is kept and not counted, as a superseded one
            battle: (choice, response_set, superseded or excluded)
            for battle, choice, response_set, superseded, excluded in Judgment.objects.filter(
                assignment__battle__pk__in=ids, revised=False
            ).values_list("assignment__battle__pk", "choice", "response_set", "superseded", "pair__item__excluded")
        }
        golds = dict(
            GoldAnswer.objects.filter(assignment_pair__assignment__battle__pk__in=ids).values_list(
                "assignment_pair__assignment__battle__pk", "answer"
            )
        )
        for battle in chunk:
            yield _line(battle, replies.get(battle.pk, []), votes.get(battle.pk), golds.get(battle.pk), prompts_of)


def _line(battle: Battle, replies: list[BattleReply], vote, gold_answer: str | None, prompts_of: dict) -> dict:
    comparison = battle.comparison
    names = (comparison.system_a.name, comparison.system_b.name) if comparison else (None, None)
    systems = (comparison.system_a_id, comparison.system_b_id) if comparison else (None, None)
    prompts = list(battle.prompts) or [battle.item.input]
    line = {
        "battle": battle.pk,
        "item": f"battle-{battle.pk}",
        "rater": battle.rater.external_id,
        "category": battle.category or None,
        "tags": battle.tags,
        "status": battle.status,
        "flag": battle.flag or None,
        "attention_check": battle.gold_id is not None,
        "winner": _winner(vote) if battle.gold_id is None else _gold_winner(gold_answer, battle.a_shown_first),
        "counted": bool(vote) and not vote[2],
        "model_a": names[0],
        "model_b": names[1],
        "shown_left": "model_a" if battle.a_shown_first else "model_b",
        "created": judgment_files.format_timestamp(battle.created),
        "voted": judgment_files.format_timestamp(battle.voted) if battle.voted else None,
    }
    for side, system in zip("ab", systems, strict=True):
        texts = {r.turn: r.text for r in replies if r.side == side}
        line[f"conversation_{side}"] = battles.messages(prompts, texts, prompts_of.get(system, "") if system else "")
    line["replies"] = [_reply(r, names[0] if r.side == "a" else names[1]) for r in replies]
    return line


def _winner(vote) -> str | None:
    """The vote in Chatbot Arena's words (its battles' ``winner``: ``elicitation.arena_winner``, whatever the
    study's way of asking)."""
    if vote is None:
        return None
    choice, response_set, _ = vote
    return elicitation.arena_winner(choice, response_set)


def _gold_winner(answer: str | None, a_shown_first: bool) -> str | None:
    """An attention check's answer (display coordinates, as kept) in the same words; the better reply is model_a."""
    if answer is None:
        return None
    choice = answer.split(":", 1)[0]
    if choice in ("first", "second"):
        return elicitation.arena_winner(orientation.to_model(choice, a_shown_first))
    return elicitation.arena_winner("tie", [] if choice == "both_bad" else None)


def _ms(later, earlier) -> int | None:
    return None if later is None or earlier is None else round((later - earlier).total_seconds() * 1000)


def _reply(reply: BattleReply, model: str | None) -> dict:
    return {
        "side": f"model_{reply.side}",
        "turn": reply.turn,
        "model": model,
        "status": reply.status,
        "problem": reply.problem or None,
        "finish_reason": reply.finish_reason or None,
        "started": judgment_files.format_timestamp(reply.started),
        "first_token_ms": _ms(reply.first_token, reply.started),
        "duration_ms": _ms(reply.finished, reply.started),
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "cost": str(reply.cost),
    }
