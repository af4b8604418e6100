"""The data manager's page (every item with its verdicts, filtered) and a bulk exclusion, against the review queue's
page in the same run -- the page researchers used before, built on the same reader of verdicts
(``analytics.review``) -- at 10^4 and 10^5 judgments.

A study of 1,000 items and 4 systems (6 system pairs, K = 1) gets judgments from 60 human raters and one judge
through the judgment importer (a Bradley-Terry preference with ties, as ``report_page.py``), then, through Django's
test client, logged in, as a browser asks:
- the data manager: GET /studies/<id>/items/ (page 1) the first time its rows are read (cold: the cache emptied
  before each request) and again (warm: the rows kept, ``curation.item_rows``), with a filter
  (?flagged=yes&judges=disagree), and page 10 (both warm);
- a bulk action: POST "exclude" on 50 ticked items, then "reopen" on them (each its own request);
- baseline: GET /studies/<id>/review/ (the review queue of the same study).

    python bench/data_manager.py [--judgments 10000,100000] [--requests 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.report_page import SYSTEMS, judgment_file, p95, sizes, timed  # noqa: E402
from bench.scratch import setup_scratch_database  # noqa: E402

ITEMS = 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--judgments", type=sizes, default=[10_000, 100_000])
    parser.add_argument("--requests", type=int, default=10, help="requests timed per page")
    args = parser.parse_args()
    if args.requests < 2:
        parser.error("--requests must be at least 2")
    setup_scratch_database("data-manager")
    print(
        f"{'judgments':>9}  {'cold page ms p50':>16}  {'warm page ms p50/p95':>21}  {'filtered ms p50':>15}  "
        f"{'page 10 ms p50':>14}  {'exclude 50 ms':>13}  {'re-open 50 ms':>13}  {'review queue ms p50':>19}  "
        f"{'cold ratio':>10}  {'warm ratio':>10}"
    )
    for n in args.judgments:
        measure(n, args.requests)


def measure(n: int, requests: int) -> None:
    import json

    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from annotation.models import Item
    from annotation.rating import imports
    from annotation.studies import creation

    owner, _ = get_user_model().objects.get_or_create(username="bench")
    study_file = "".join(
        json.dumps({"id": f"i{i}", "input": f"input {i}", "outputs": {s: [f"{s} says {i}"] for s in SYSTEMS}}) + "\n"
        for i in range(ITEMS)
    ).encode()
    study = creation.do_create_study(owner, f"data-manager-{n}", study_file, "s.jsonl")
    imports.do_import_judgments(study, judgment_file(n, ITEMS), "j.jsonl")
    client = Client()
    client.force_login(owner)
    items_url = reverse("study_items", args=[study.pk])

    def get(url: str):
        def fetch():
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)

        return fetch

    from django.core.cache import cache

    get(items_url)()  # warm the template cache

    def cold_get():
        cache.clear()
        get(items_url)()

    cold = timed(cold_get, requests)
    page = timed(get(items_url), requests)
    filtered = timed(get(items_url + "?flagged=yes&judges=disagree"), requests)
    tenth = timed(get(items_url + "?page=10"), requests)
    ticked = list(Item.objects.filter(study=study).order_by("position").values_list("pk", flat=True)[:50])

    def act(action: str):
        def post():
            response = client.post(reverse("curate_items", args=[study.pk]), {"action": action, "items": ticked})
            assert response.status_code == 302, response.status_code

        return post

    exclude = timed(act("exclude"), 1)
    assert Item.objects.filter(study=study, excluded=True).count() == 50
    reopen = timed(act("reopen"), 1)
    assert not Item.objects.filter(study=study, excluded=True).exists()
    review = timed(get(reverse("review_queue", args=[study.pk])), requests)
    base = statistics.median(review)
    print(
        f"{n:>9}  {statistics.median(cold):>16.0f}  {statistics.median(page):>10.0f} / {p95(page):<8.0f}  "
        f"{statistics.median(filtered):>15.0f}  {statistics.median(tenth):>14.0f}  {exclude[0]:>13.0f}  "
        f"{reopen[0]:>13.0f}  {base:>19.0f}  {statistics.median(cold) / base:>9.2f}x  "
        f"{statistics.median(page) / base:>9.2f}x"
    )


if __name__ == "__main__":
    main()
