"""The report page served from the stored report, against recomputing it on every request (the previous
design), and the time one refresh takes, at 10^4 and 10^5 judgments.

A study of 400 items and 4 systems (6 system pairs, K = 1) gets judgments from 60 human raters and one judge
through the judgment importer (a Bradley-Terry preference with ties), then:
- refresh: ``analytics.stored.do_refresh`` for the humans population (what the background job runs: every
  section, the bootstraps with the study's 100 rounds);
- page: GET /studies/<id>/report/ through Django's test client, logged in, as a browser asks for it, served
  from the stored report (fresh), and right after a new judgment arrived (stale: served, refresh queued);
- baseline, in the same run: the same page with the report recomputed in the request, as before.

    python bench/report_page.py [--judgments 10000,100000] [--requests 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scratch import setup_scratch_database  # noqa: E402

SYSTEMS = ("alpha", "bravo", "charlie", "delta")
STRENGTH = {"alpha": 0.6, "bravo": 0.2, "charlie": -0.1, "delta": -0.7}
ITEMS = 400


def sizes(value: str) -> list[int]:
    try:
        numbers = [int(v) for v in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, not {value!r}") from None
    if any(n < 100 for n in numbers):
        raise argparse.ArgumentTypeError("every size must be at least 100")
    return numbers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judgments", type=sizes, default=[10_000, 100_000])
    parser.add_argument("--requests", type=int, default=50, help="page requests timed per state")
    parser.add_argument("--baseline-requests", type=int, default=3, help="recomputing requests timed (slow)")
    args = parser.parse_args()
    if args.requests < 2 or args.baseline_requests < 1:
        parser.error("--requests must be at least 2 and --baseline-requests at least 1")
    setup_scratch_database("report")
    print(
        f"{'judgments':>9} {'import s':>8} {'refresh s':>9}  {'page fresh ms p50/p95':>22}  "
        f"{'page stale ms p50/p95':>22}  {'recompute per request ms p50':>29}  {'ratio p50':>9}"
    )
    for n in args.judgments:
        measure(n, args.requests, args.baseline_requests)


def judgment_file(n: int, items: int = ITEMS) -> bytes:
    import numpy as np

    rng = np.random.default_rng(n)
    lines = []
    for j in range(n):
        a, b = rng.choice(len(SYSTEMS), size=2, replace=False)
        sa, sb = SYSTEMS[a], SYSTEMS[b]
        judge = j % 5 == 0
        p_a = 1 / (1 + np.exp(-(STRENGTH[sa] - STRENGTH[sb]) * (2.0 if judge else 1.0)))
        u = rng.random()
        choice = "tie" if u < 0.1 else (sa if rng.random() < p_a else sb)
        lines.append(
            json.dumps(
                {
                    "id": f"j{j}",
                    "item": f"i{int(rng.integers(items))}",
                    "system_a": sa,
                    "sample_a": 0,
                    "system_b": sb,
                    "sample_b": 0,
                    "shown_first": sa if rng.random() < 0.5 else sb,
                    "rater": "judge" if judge else f"h{int(rng.integers(60))}",
                    "rater_kind": "judge" if judge else "human",
                    "choice": choice,
                }
            )
        )
    return ("\n".join(lines) + "\n").encode()


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        out.append((time.perf_counter() - started) * 1e3)
    return out


def p95(values: list[float]) -> float:
    import numpy as np

    return float(np.percentile(values, 95))


def measure(n: int, requests: int, baseline_requests: int) -> None:
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from analytics import presentation, stored
    from analytics.populations import Population
    from analytics.report.assembly import study_report
    from annotation.rating import imports
    from annotation.studies import creation

    owner, _ = get_user_model().objects.get_or_create(username="bench")
    study_file = "".join(
        json.dumps({"id": f"i{i}", "input": f"input {i}", "outputs": {s: [f"{s} says {i}"] for s in SYSTEMS}}) + "\n"
        for i in range(ITEMS)
    ).encode()
    study = creation.do_create_study(owner, f"report-{n}", study_file, "s.jsonl")
    started = time.perf_counter()
    imports.do_import_judgments(study, judgment_file(n), "j.jsonl")
    import_seconds = time.perf_counter() - started
    started = time.perf_counter()
    stored.do_refresh(study, Population())
    refresh_seconds = time.perf_counter() - started
    client = Client()
    client.force_login(owner)
    url = reverse("report", args=[study.pk])

    def get():
        response = client.get(url)
        assert response.status_code == 200, response.status_code

    get()  # warm the template cache
    fresh = timed(get, requests)
    assert stored.do_serve(study, Population()).state == "fresh"
    imports.do_import_judgments(study, judgment_file(1).replace(b'"j0"', b'"late-0"'), "late.jsonl")
    stale = timed(get, requests)
    assert stored.do_serve(study, Population()).state == "stale"

    def recompute():  # the previous design: the whole report computed and rendered in the request
        presentation.render_body(study, Population(), study_report(study, Population()))

    baseline = timed(recompute, baseline_requests)
    ratio = statistics.median(baseline) / statistics.median(fresh)
    print(
        f"{n:>9} {import_seconds:>8.1f} {refresh_seconds:>9.2f}  "
        f"{statistics.median(fresh):>10.1f} / {p95(fresh):<9.1f}  {statistics.median(stale):>10.1f} / "
        f"{p95(stale):<9.1f}  {statistics.median(baseline):>29.0f}  {ratio:>8.0f}x"
    )


if __name__ == "__main__":
    main()
