"""Rater populations: whose judgments a report, a leaderboard or a progress figure is computed from.

Humans and LLM judges are never pooled unless the researcher asks for it: the default population is
"humans", each judge is a population of its own, and "all" is an explicit choice that says it mixes them.
Within a population the researcher can keep only some sources (personal links, the open link, crowd sites,
imported), one rater, and leave screened-out raters in or out (out by default). This module is the one
home of that rule: the report, its CSV tables, the API, ``report --json`` and the study page's progress
all parse and apply a population through it. A population also names which question's answers it reads: the main
question's (the default), or one further preference question's (``annotation/questions.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from annotation.models import Rater

HUMANS, JUDGE, ALL = "humans", "judge", "all"
# Where raters come from: the rater model's own sources (one home), named as a filter reads them.
SOURCES = {value: label.lower() for value, label in Rater.Source.choices}


class PopulationError(ValueError):
    """A population or filter the study does not have; the message names the parameter."""


@dataclasses.dataclass(frozen=True)
class Population:
    kind: str = HUMANS  # "humans" | "judge" | "all"
    judge: str = ""  # the judge's rater id when kind == "judge"
    sources: tuple[str, ...] = ()  # empty: every source
    rater: str = ""  # one rater's id, or every rater
    include_screened: bool = False  # screened-out raters (failed attention checks) are left out by default
    question: str = ""  # which question's answers: the main one (""), or a further preference question's key

    @property
    def mixes(self) -> bool:
        """True for the explicit "all" view, which pools humans and judges."""
        return self.kind == ALL

    @property
    def key(self) -> str:
        """A canonical string for the population and its filters (stored reports are keyed by it)."""
        parts = [self.kind if self.kind != JUDGE else f"judge:{self.judge}"]
        if self.sources:
            parts.append("sources=" + ",".join(self.sources))
        if self.rater:
            parts.append(f"rater={self.rater}")
        if self.include_screened:
            parts.append("screened")
        if self.question:
            parts.append(f"question={self.question}")
        return "|".join(parts)

    @property
    def label(self) -> str:
        base = {HUMANS: "Humans", ALL: "Everyone: humans and judges mixed"}.get(self.kind, f"Judge {self.judge}")
        filters = []
        if self.sources:
            filters.append("from " + ", ".join(SOURCES[s] for s in self.sources))
        if self.rater:
            filters.append(f"rater {self.rater} only")
        if self.include_screened:
            filters.append("screened-out raters included")
        return base + (f" ({'; '.join(filters)})" if filters else "")

    def admits(self, kind: str, rater: str, source: str, screened_out: bool) -> bool:
        """Whether a judgment by a rater with these attributes belongs to the population."""
        if self.kind == HUMANS and kind != "human":
            return False
        if self.kind == JUDGE and (kind != "judge" or rater != self.judge):
            return False
        if self.sources and source not in self.sources:
            return False
        if self.rater and rater != self.rater:
            return False
        return self.include_screened or not screened_out

    def humans(self) -> Population:
        """The human raters under the same filters: what judges are checked against."""
        return dataclasses.replace(self, kind=HUMANS, judge="")

    def as_dict(self) -> dict:
        return {
            "key": self.key,
            "kind": self.kind,
            "judge": self.judge or None,
            "label": self.label,
            "mixes_humans_and_judges": self.mixes,
            "sources": list(self.sources),
            "rater": self.rater or None,
            "include_screened": self.include_screened,
            "question": self.question or None,
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> Population:
        """The population ``as_dict`` describes (a stored report's)."""
        return cls(
            kind=data["kind"],
            judge=data["judge"] or "",
            sources=tuple(data["sources"]),
            rater=data["rater"] or "",
            include_screened=data["include_screened"],
            question=data["question"] or "",
        )

    def query(self) -> dict[str, str]:
        """The population as query parameters (the inverse of ``parse``)."""
        out = {"population": self.kind if self.kind != JUDGE else f"judge:{self.judge}"}
        if self.sources:
            out["source"] = ",".join(self.sources)
        if self.rater:
            out["rater"] = self.rater
        if self.include_screened:
            out["screened"] = "include"
        if self.question:
            out["question"] = self.question
        return out


def parse(
    params: Mapping[str, str],
    judges: Iterable[str] | None = None,
    raters: Iterable[str] | None = None,
    questions: Iterable[str] | None = None,
) -> Population:
    """A population from query parameters ``population`` (humans | all | judge:NAME), ``source`` (comma-
    separated), ``rater``, ``screened`` (include | exclude) and ``question`` (a further preference question's key;
    empty: the main question). ``judges`` (the study's judge ids), ``raters`` and ``questions`` (the study's further
    preference questions' keys), when given, check they exist. Raises PopulationError naming the parameter."""
    value = (params.get("population") or HUMANS).strip()
    judge = ""
    if value in (HUMANS, ALL):
        kind = value
    elif value.startswith("judge:"):
        kind, judge = JUDGE, value.removeprefix("judge:")
        if judges is not None and judge not in set(judges):
            raise PopulationError(f"population: this study has no judge {judge!r}")
    else:
        raise PopulationError(f"population: {value!r} is not humans, all, or judge:<name>")
    sources = tuple(sorted({s.strip() for s in (params.get("source") or "").split(",") if s.strip()}))
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise PopulationError(f"source: {', '.join(unknown)} is not one of {', '.join(SOURCES)}")
    rater = (params.get("rater") or "").strip()
    if rater and raters is not None and rater not in set(raters):
        raise PopulationError(f"rater: this study has no rater {rater!r}")
    screened = (params.get("screened") or "exclude").strip()
    if screened not in ("include", "exclude"):
        raise PopulationError(f"screened: {screened!r} is not include or exclude")
    question = (params.get("question") or "").strip()
    if question and questions is not None and question not in set(questions):
        known = ", ".join(sorted(questions)) or "only the main question"
        raise PopulationError(f"question: this study asks no further preference question {question!r} ({known})")
    return Population(kind, judge, sources, rater, screened == "include", question)


def parse_for(study, params: Mapping[str, str]) -> Population:
    """``parse`` checked against ``study``: its judges, raters and further preference questions (the report page,
    its API and CSV, ``report`` and ``export_preferences`` all read a population this way)."""
    from annotation import questions

    raters = dict(study.raters.values_list("external_id", "kind"))
    return parse(
        params,
        judges=[r for r, k in raters.items() if k == "judge"],
        raters=raters,
        questions=questions.further_preference_keys(study),
    )
