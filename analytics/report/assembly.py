"""The whole report: every section's result for one rater population, in the order of its JSON form."""

from __future__ import annotations

import dataclasses

from analytics.models import AnalysisSettings
from analytics.populations import Population
from analytics.report import data, judgments
from analytics.report.agreement import Agreement, agreement_section
from analytics.report.consistency import Consistency, consistency_section
from analytics.report.estimates import PairEstimates, win_rate_estimates
from analytics.report.indeterminacy import Indeterminacy, indeterminacy_section
from analytics.report.judgments import AskedQuestion, JudgmentCounts, PopulationChoice
from analytics.report.positional_bias import PositionalBiasSection, positional_bias_section
from analytics.report.ratings import AnyBoard, NoWinRates, WinRates, ratings_section
from analytics.report.reliability import Reliability, reliability_section
from analytics.report.separability import PairSeparability, separability_section
from analytics.report.serial import JsonForm, Unavailable, codec
from analytics.report.stopping import PairStopping, stopping_section
from analytics.report.strengths import HybridStrength, hybrid_strengths, strengths_blocked
from analytics.report.style import LengthControlled, StyleControl, length_controlled_section
from annotation.models import Study
from selection import services as selection_services


@dataclasses.dataclass(frozen=True, kw_only=True)
class Report(JsonForm):
    """The study report for one rater population (``population``): leaderboards, win rates, stopping, consistency,
    positional bias and agreement of the population's judgments; judges checked against the humans under the same
    filters."""

    study: str
    question: AskedQuestion  # the question whose answers it analyses
    questions: list[AskedQuestion]
    systems: list[str]
    population: Population = codec(Population.as_dict, Population.from_dict)
    populations: list[PopulationChoice]
    judgments: JudgmentCounts
    consistency: Consistency
    separability: dict[str, dict[str, PairSeparability]]  # metric -> "a vs b" -> its deltas
    elo: AnyBoard
    sep_elo: AnyBoard
    bradley_terry: AnyBoard
    win_rates: WinRates | NoWinRates
    style_control: StyleControl | Unavailable
    length_controlled: list[LengthControlled]
    stopping: list[PairStopping]
    positional_bias: PositionalBiasSection
    agreement: Agreement
    indeterminacy: Indeterminacy
    hybrid_strengths: list[HybridStrength]
    hybrid_strengths_blocked: list[str]  # the pairs whose design keeps the strengths from being computed
    win_rate_estimates: list[PairEstimates]
    rater_reliability: Reliability | Unavailable


def compute(study: Study, population: Population | None = None) -> Report:
    """The report of ``study`` for one rater ``population`` (analytics/populations.py; humans by default), its
    numbers as computed (NaN where undefined): what its JSON form is made from."""
    population = population or Population()
    settings = data.analysis_parameters(study)
    every = data.load_rows(study, population.question)
    rows = data.admitted(every, population)
    reference = data.admitted(every, population.humans()) + [r for r in every if r.kind == "judge"]
    humans, judges = [r for r in reference if r.kind == "human"], [r for r in reference if r.kind == "judge"]
    designs = selection_services.sample_designs(study)
    systems = list(study.systems.values_list("name", flat=True))
    deltas = data.separability_by_item(study)
    answers = data.Answers(study, {r.pair_id for r in rows} | {r.pair_id for r in reference})
    question, asked = judgments.asked(study, population)
    finite = settings.estimate_target == AnalysisSettings.EstimateTarget.THESE_ITEMS  # the finite-population correction
    stopping = stopping_section(study, rows, settings, plans=population == Population())  # the plan decides on these
    ratings = ratings_section(
        settings, rows, systems, deltas, answers, {(s.system_a, s.system_b): s.decision for s in stopping}
    )
    return Report(
        study=study.name,
        question=question,
        questions=asked,
        systems=systems,
        population=population,
        populations=judgments.population_choices(every),
        judgments=judgments.judgment_counts(study, population, every, rows),
        consistency=consistency_section(rows, deltas),
        separability=separability_section(study),
        elo=ratings.elo,
        sep_elo=ratings.sep_elo,
        bradley_terry=ratings.bradley_terry,
        win_rates=ratings.win_rates,
        style_control=ratings.style_control,
        length_controlled=length_controlled_section(systems, humans, judges, answers),
        stopping=stopping,
        positional_bias=positional_bias_section(rows, reference),
        agreement=agreement_section(rows),
        indeterminacy=indeterminacy_section(reference, settings.indeterminacy_beta),
        hybrid_strengths=hybrid_strengths(study, humans, judges, designs),
        hybrid_strengths_blocked=strengths_blocked(designs, humans),
        win_rate_estimates=win_rate_estimates(study, humans, judges, designs, finite),
        rater_reliability=reliability_section(rows, systems),
    )


def study_report(study: Study, population: Population | None = None) -> Report:
    """The report as its JSON form reads back (NaN as None, Python numbers): what is stored, and what the page,
    the CSV tables and ``report`` read."""
    return Report.from_json(compute(study, population).to_json())
