"""Services: the comparison plan (its tasks, system pairs and sampled pairs) and assignments (which places a rater
holds, under racing starts; bundles, counters, progress and time estimates)."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from annotation import models
from annotation.errors import ServiceError
from annotation.models import Assignment, AssignmentTask, Judgment, Rater, Task
from annotation.plan import planning
from annotation.rating import allocation
from annotation.studies import creation, enrolment, lifecycle, monitoring
from tests.conftest import answer_all, study_jsonl


def test_the_plan_has_one_task_per_item_with_n_sampled_pairs(study):
    tasks = list(study.tasks.prefetch_related("task_pairs"))
    assert len(tasks) == 4
    assert all(t.raters_required == 3 for t in tasks)
    assert all(len(t.task_pairs.all()) == 5 for t in tasks)
    pairs = [
        (tp.pair.generation_a.sample_index, tp.pair.generation_b.sample_index)
        for tp in tasks[0].task_pairs.select_related("pair__generation_a", "pair__generation_b")
    ]
    assert len(set(pairs)) == 5


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("all", {("s1", "s2"), ("s1", "s3"), ("s2", "s3")}),
        ("baseline", {("s2", "s1"), ("s3", "s1")}),
        ("explicit", {("s1", "s3")}),
    ],
)
def test_pair_modes_choose_the_system_pairs(researcher, mode, expected):
    study = creation.do_create_study(researcher, "three", study_jsonl(2, ("s1", "s2", "s3")), "t.jsonl")
    systems = {s.name: s for s in study.systems.all()}
    changes = {"pair_mode": mode, "baseline": systems["s1"] if mode == "baseline" else None, "scheduling": "no_repeat"}
    explicit = [(systems["s1"].pk, systems["s3"].pk)] if mode == "explicit" else None
    lifecycle.do_update_settings(study, changes, explicit)
    got = {(c.system_a.name, c.system_b.name) for c in study.comparisons.all()}
    assert got == expected
    assert study.tasks.count() == 2 * len(expected)  # no-repeat: every item on every pair


def test_random_scheduling_compares_each_item_once(researcher):
    study = creation.do_create_study(researcher, "three", study_jsonl(6, ("s1", "s2", "s3")), "t.jsonl")
    assert study.comparisons.count() == 3
    assert sorted(study.tasks.values_list("item__external_id", flat=True)) == [f"item-{i}" for i in range(6)]


def test_the_budget_limits_items_per_system_pair(study):
    lifecycle.do_update_settings(study, {"budget": 2}, None)
    assert study.tasks.count() == 2


def test_the_plan_is_frozen_once_raters_start(study, rater):
    allocation.do_start_assignment(rater)
    with pytest.raises(ServiceError, match="frozen"):
        lifecycle.do_update_settings(study, {"pairs_per_assignment": 2}, None)
    lifecycle.do_update_settings(study, {"question": "Which summary is more faithful?"}, None)
    study.refresh_from_db()
    assert study.question == "Which summary is more faithful?"


def test_an_assignment_holds_the_tasks_pairs_in_a_stored_display_order(study, rater):
    assignment = allocation.do_start_assignment(rater)
    task_pairs = list(assignment.places.get().task.task_pairs.values_list("pair_id", flat=True))
    assert list(assignment.pairs.values_list("pair_id", flat=True)) == task_pairs
    assert assignment.pairs.count() == 5
    assert allocation.do_start_assignment(rater) == assignment  # the active one comes back


def test_raters_never_get_an_item_twice_and_tasks_get_their_raters(study):
    raters = [enrolment.do_create_rater_link(study, f"r{i}") for i in range(5)]
    for rater in raters:
        while (assignment := allocation.do_start_assignment(rater)) is not None:
            answer_all(assignment)
    per_task = Counter(AssignmentTask.objects.values_list("task_id", flat=True))
    assert set(per_task.values()) == {3} and len(per_task) == 4
    per_rater_item = Counter(AssignmentTask.objects.values_list("rater_id", "item_id"))
    assert set(per_rater_item.values()) == {1}
    assert Judgment.objects.count() == 4 * 3 * 5


def test_a_lost_race_for_a_place_retries_elsewhere(study, monkeypatch):
    """Another request takes the place between our read of the open tasks and our claim: the claim reads
    the places held under its lock and the rater gets a different place."""
    first, second = (enrolment.do_create_rater_link(study, n) for n in ("first", "second"))
    original = allocation._open_tasks
    raced = []

    def racing_open_tasks(rater, size):
        tasks = original(rater, size)
        if tasks and not raced and rater == second:
            raced.append(tasks[0])
            taken = Assignment.objects.create(study=study, rater=first)
            AssignmentTask.objects.create(
                assignment=taken, task=tasks[0], rater=first, item_id=tasks[0].item_id, slot=0
            )
        return tasks

    monkeypatch.setattr(allocation, "_open_tasks", racing_open_tasks)
    assignment = allocation.do_start_assignment(second)
    assert assignment is not None
    place = assignment.places.get()
    assert (place.task_id, place.slot) != (raced[0].pk, 0)
    assert AssignmentTask.objects.filter(task=raced[0], slot=0).count() == 1


def test_a_start_reads_its_tasks_pairs_in_one_query_however_many_tasks(researcher):
    """A bundle of one task and a bundle of two take the same number of queries to start."""
    counts = []
    for per_assignment in (5, 10):  # one task (item) of 5 pairs, two of them
        study = creation.do_create_study(researcher, f"q{per_assignment}", study_jsonl(), "q.jsonl")
        lifecycle.do_update_settings(study, {"judgments_per_assignment": per_assignment}, None)
        rater = enrolment.do_create_rater_link(study, "r")
        with CaptureQueriesContext(connection) as captured:
            assignment = allocation.do_start_assignment(rater)
        assert assignment.places.count() == per_assignment // 5
        counts.append(len(captured))
    assert counts[0] == counts[1]


@contextlib.contextmanager
def rows_held_elsewhere(tasks, release: threading.Event):
    """The tasks' rows locked FOR UPDATE by another connection's transaction (as a start claiming them holds
    them) until ``release`` is set; yields the holding thread."""
    locked = threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                list(tasks.select_for_update())
                locked.set()
                release.wait(30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert locked.wait(10)
        yield holder
    finally:
        release.set()
        holder.join()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks: SQLite runs one writer at a time")
@pytest.mark.django_db(transaction=True)
def test_a_start_skips_a_task_another_start_is_claiming_without_waiting(researcher):
    """PostgreSQL: while another transaction holds a task's row (a start claiming it), a new start takes
    the next task at once instead of waiting for that transaction or colliding with it."""
    study = creation.do_create_study(researcher, "locks", study_jsonl(), "l.jsonl")
    lifecycle.do_update_settings(study, {"judgments_per_assignment": 5}, None)  # one task per assignment
    first = Task.objects.filter(study=study).order_by("taken", "position").first()  # what a start takes unlocked
    release = threading.Event()
    with rows_held_elsewhere(Task.objects.filter(pk=first.pk), release) as holder:
        assignment = allocation.do_start_assignment(enrolment.do_create_rater_link(study, "r"))
        holder_still_waiting = holder.is_alive() and not release.is_set()
    assert holder_still_waiting  # the start finished while the other transaction held its task
    tasks = set(assignment.places.values_list("task_id", flat=True))
    assert first.pk not in tasks and len(tasks) == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks: SQLite runs one writer at a time")
@pytest.mark.django_db(transaction=True)
def test_a_start_waits_when_every_open_task_is_being_claimed_instead_of_saying_nothing_is_left(researcher):
    """PostgreSQL: while other transactions hold every open task's row, a start neither takes one of them nor
    tells the rater there is nothing left: it looks again until they commit (here: release their locks)."""
    study = creation.do_create_study(researcher, "all-locked", study_jsonl(), "l.jsonl")
    lifecycle.do_update_settings(study, {"judgments_per_assignment": 5}, None)
    release = threading.Event()
    with rows_held_elsewhere(Task.objects.filter(study=study), release):
        threading.Timer(0.05, release.set).start()  # the other starts commit after 50 ms
        assignment = allocation.do_start_assignment(enrolment.do_create_rater_link(study, "r"))
    assert assignment is not None and assignment.places.count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_raters_never_overfill_a_task(researcher) -> None:
    """Eight threads, each with its own database connection, start assignments at once for a study
    with room for exactly 2 x 2 places: four get one, nobody gets a place twice."""
    study = creation.do_create_study(researcher, "race", study_jsonl(2), "r.jsonl")
    lifecycle.do_update_settings(study, {"raters_per_item": 2, "judgments_per_assignment": 5}, None)  # an item each
    raters = [enrolment.do_create_rater_link(study, f"r{i}") for i in range(8)]
    barrier = threading.Barrier(len(raters))
    results: dict[int, object] = {}

    def start(rater: Rater) -> None:
        try:
            barrier.wait()
            results[rater.pk] = allocation.do_start_assignment(Rater.objects.get(pk=rater.pk))
        except Exception as exc:  # reported below
            results[rater.pk] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=start, args=(r,)) for r in raters]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [r for r in results.values() if isinstance(r, Exception)]
    assert errors == []
    assert sum(1 for r in results.values() if r is not None) == 4
    assert Counter(AssignmentTask.objects.values_list("task_id", flat=True)) == Counter(
        {t.pk: 2 for t in Task.objects.filter(study=study)}
    )
    assert connection.vendor in ("sqlite", "postgresql")


def test_progress_counts_judgments_against_the_target(study, rater):
    answer_all(allocation.do_start_assignment(rater))
    [progress] = monitoring.study_progress(study)
    assert (progress.label, progress.tasks, progress.target, progress.judgments) == ("sys-a vs sys-b", 4, 60, 5)
    assert progress.places_done == 1 and progress.percent == 8


def test_starters_spread_over_the_tasks_with_the_fewest_raters(researcher):
    study = creation.do_create_study(researcher, "spread", study_jsonl(30), "s.jsonl")
    lifecycle.do_update_settings(study, {"raters_per_item": 2, "judgments_per_assignment": 5}, None)
    first_wave = [allocation.do_start_assignment(enrolment.do_create_rater_link(study, f"r{i}")) for i in range(30)]
    assert len({task_of(a) for a in first_wave}) == 30  # breadth first: every task gets one rater first
    tasks = [task_of(allocation.do_start_assignment(enrolment.do_create_rater_link(study, f"s{i}"))) for i in range(8)]
    assert len(set(tasks)) == 8


def test_the_held_places_counter_follows_starts_completions_and_expiry(study):
    from datetime import timedelta

    from django.db.models import Count, Q
    from django.utils import timezone

    def consistent() -> None:
        actual = dict(
            Task.objects.filter(study=study)
            .annotate(n=Count("places", filter=Q(places__slot__isnull=False)))
            .values_list("pk", "n")
        )
        assert dict(Task.objects.filter(study=study).values_list("pk", "taken")) == actual

    raters = [enrolment.do_create_rater_link(study, f"c{i}") for i in range(4)]
    first = [allocation.do_start_assignment(r) for r in raters]
    consistent()
    assert sum(Task.objects.filter(study=study).values_list("taken", flat=True)) == 4
    answer_all(first[0])
    consistent()  # a completed assignment keeps its place
    Assignment.objects.filter(pk__in=[a.pk for a in first[1:3]]).update(
        last_activity=timezone.now() - timedelta(minutes=study.crowd_settings.assignment_timeout_minutes + 1)
    )
    assert allocation.do_expire_stale_assignments(study) == 2
    consistent()
    assert sum(Task.objects.filter(study=study).values_list("taken", flat=True)) == 2


def test_a_counter_that_fell_behind_is_repaired_when_the_task_is_offered(study):
    study.raters_per_item = 1
    study.save()
    planning.do_rebuild_plan(study)
    tasks = list(Task.objects.filter(study=study))
    rater = enrolment.do_create_rater_link(study, "first")
    held = allocation.do_start_assignment(rater)
    Task.objects.filter(pk=task_of(held)).update(taken=0)  # as if written by hand, bypassing the service
    others = [
        allocation.do_start_assignment(enrolment.do_create_rater_link(study, f"o{i}")) for i in range(len(tasks) - 1)
    ]
    assert len({task_of(a) for a in others} | {task_of(held)}) == len(tasks)  # every task once, none twice
    # Every place is held now; the task whose counter lies is still offered, found full, and repaired.
    assert allocation.do_start_assignment(enrolment.do_create_rater_link(study, "late")) is None
    assert Task.objects.get(pk=task_of(held)).taken == 1


def test_a_rating_set_shows_each_sample_once_by_default(study):
    # K = N = 5: every task's five pairs use each of A's and B's five samples exactly once (the paper's P_AB)
    assert study.sample_pairing == "one_to_one"
    for task in study.tasks.all():
        pairs = [tp.pair for tp in task.task_pairs.select_related("pair__generation_a", "pair__generation_b")]
        assert sorted(p.generation_a.sample_index for p in pairs) == list(range(5))
        assert sorted(p.generation_b.sample_index for p in pairs) == list(range(5))


def test_the_grid_pairing_is_an_explicit_option(study):
    lifecycle.do_update_settings(study, {"sample_pairing": "grid", "pairs_per_assignment": 8}, None)
    for task in study.tasks.all():
        cells = {
            (tp.pair.generation_a.sample_index, tp.pair.generation_b.sample_index)
            for tp in task.task_pairs.select_related("pair__generation_a", "pair__generation_b")
        }
        assert len(cells) == 8  # 8 distinct cells of the 5 x 5 grid: some sample is shown twice
        assert len({a for a, _ in cells}) < 8


def test_the_assignment_size_and_time_come_from_the_plan_and_this_studys_median_time(study):
    size = allocation.assignment_size(study)
    assert (size.pairs, size.seconds_per_pair, size.measured) == (5, models.DEFAULT_SECONDS_PER_PAIR, False)
    assert size.minutes == round(5 * models.DEFAULT_SECONDS_PER_PAIR / 60)
    for n in range(2):
        answer_all(allocation.do_start_assignment(enrolment.do_create_rater_link(study, f"timed-{n}")))
    Judgment.objects.filter(study=study).update(time_on_task_ms=12000)  # 10 timed judgments of 12 s
    size = allocation.assignment_size(study)
    assert (size.seconds_per_pair, size.measured, size.minutes) == (12.0, True, 1)


def test_the_time_estimate_leaves_out_implausibly_fast_raters_and_times(study):
    """Two raters at 0.3 s per pair once made the welcome page promise "about 1 minute" for long answers. The
    estimate leaves out raters the study page flags (annotation/rating/pace.py), times under the reading floor and
    screened-out raters, and keeps the default until ten plausible times remain."""
    from annotation.models import Generation
    from annotation.rating import pace

    Generation.objects.filter(item__study=study).update(n_words=300)  # long answers: 600 words a pair
    raters = [enrolment.do_create_rater_link(study, f"timed-{n}") for n in range(3)]
    for rater in raters[:2]:
        answer_all(allocation.do_start_assignment(rater))
    Judgment.objects.filter(study=study).update(time_on_task_ms=300)  # both flagged: 0.3 s on long answers
    size = allocation.assignment_size(study)
    assert (size.seconds_per_pair, size.measured) == (models.DEFAULT_SECONDS_PER_PAIR, False)
    answer_all(allocation.do_start_assignment(raters[2]))
    floor = pace.reading_floor(300, 300)  # 30 s: 600 words at 20 words a second
    Judgment.objects.filter(study=study, rater=raters[2]).update(time_on_task_ms=int(1000 * (floor + 10)))
    # one slow reader's five judgments are not yet ten plausible times
    from django.core.cache import cache

    cache.delete(f"pace:{study.pk}")  # ten timed judgments, none plausible: that answer was kept for a while
    assert allocation.assignment_size(study).measured is False
    fourth = enrolment.do_create_rater_link(study, "timed-3")
    answer_all(allocation.do_start_assignment(fourth))
    times = [int(1000 * t) for t in (floor + 10, floor + 20, floor + 20, floor + 30, floor - 5)]  # one below floor
    for judgment, ms in zip(Judgment.objects.filter(rater=fourth).order_by("id"), times, strict=True):
        Judgment.objects.filter(pk=judgment.pk).update(time_on_task_ms=ms)
    cache.delete(f"pace:{study.pk}")
    size = allocation.assignment_size(study)
    plausible = [floor + 10] * 5 + [floor + 10, floor + 20, floor + 20, floor + 30]  # nine: still the default
    assert len(plausible) < allocation.MIN_TIMED_JUDGMENTS and size.measured is False
    Judgment.objects.filter(rater=fourth, time_on_task_ms=int(1000 * (floor - 5))).update(
        time_on_task_ms=int(1000 * (floor + 40))
    )
    cache.delete(f"pace:{study.pk}")
    size = allocation.assignment_size(study)
    assert (size.seconds_per_pair, size.measured) == (floor + 10, True)  # the median of the ten plausible times
    raters[2].screened_out = True
    raters[2].save()
    cache.delete(f"pace:{study.pk}")
    assert allocation.assignment_size(study).measured is False  # a screened-out rater's times do not count


def task_of(assignment: Assignment) -> int:
    """The task of an assignment that holds one place (one item)."""
    return assignment.places.get().task_id


def k1_study(researcher, name: str, n_items: int):
    """One output per system (K = 1, so N = 1 pair per item), one rater per item, the default bundle size."""
    study = creation.do_create_study(researcher, name, study_jsonl(n_items, k=1), f"{name}.jsonl")
    return lifecycle.do_update_settings(study, {"raters_per_item": 1}, None)


def test_an_assignment_bundles_whole_items_up_to_the_studys_size_with_one_code(researcher):
    study = k1_study(researcher, "bundle", 12)
    assert study.judgments_per_assignment == 10
    rater = enrolment.do_create_rater_link(study, "crowd-worker")
    first = allocation.do_start_assignment(rater)
    items = list(first.places.values_list("item_id", flat=True))
    assert (first.n_pairs, first.pairs.count(), len(items), len(set(items))) == (10, 10, 10, 10)
    assert allocation.assignment_size(study).pairs == 10
    answer_all(first)
    first.refresh_from_db()
    assert first.status == Assignment.Status.COMPLETED and len(first.completion_code) == 10
    second = allocation.do_start_assignment(rater)  # the two items left, none seen before
    rest = set(second.places.values_list("item_id", flat=True))
    assert second.n_pairs == 2 and not rest & set(items)
    assert sorted(Task.objects.filter(study=study).values_list("taken", flat=True)) == [1] * 12
    assert allocation.do_start_assignment(enrolment.do_create_rater_link(study, "late")) is None


def test_an_expired_bundle_returns_every_place(researcher):
    from datetime import timedelta

    from django.utils import timezone

    study = k1_study(researcher, "expiring", 4)
    lifecycle.do_update_settings(study, {"judgments_per_assignment": 3}, None)
    slow = allocation.do_start_assignment(enrolment.do_create_rater_link(study, "slow"))
    assert slow.places.count() == 3
    Assignment.objects.filter(pk=slow.pk).update(last_activity=timezone.now() - timedelta(hours=2))
    assert allocation.do_expire_stale_assignments(study) == 1
    assert not AssignmentTask.objects.filter(assignment=slow, slot__isnull=False).exists()
    assert sum(Task.objects.filter(study=study).values_list("taken", flat=True)) == 0
    other = allocation.do_start_assignment(enrolment.do_create_rater_link(study, "next"))
    assert other.places.count() == 3
