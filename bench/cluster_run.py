"""The run bench/cluster.py makes against the deployment (bench/cluster_deployment.py): the studies, raters driven
through the entry point (bench/load_raters.py's clients), separability jobs for the workers, the ``kill -9`` faults
on time, and the figures it prints (the last line machine-readable; with ``--json`` one JSON object as well)."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import socket
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.cluster_deployment import Cluster
from bench.load_clients import ClientResult, run_chunk
from bench.load_raters import server_times


def build(cluster: Cluster, raters: int, items: int, job_items: int, jobs: int) -> dict:
    """A study for the raters (one personal link each), ``jobs`` small studies whose separability jobs the workers run
    (one each: a study computes one job of a metric at a time, a second start returns the first), and a crowd link
    with a launch limit of its own."""
    cluster.django()
    from django.contrib.auth import get_user_model

    from annotation.crowd import sites
    from annotation.models import ExternalLink
    from annotation.studies import creation, enrolment, lifecycle

    owner = get_user_model().objects.create_user("cluster-owner")
    lines = [
        json.dumps(
            {
                "id": f"i{i}",
                "input": f"Input {i}",
                "outputs": {s: [f"{s}{i}-{k} words here" for k in range(3)] for s in ("a", "b")},
            }
        )
        for i in range(items)
    ]
    study = creation.do_create_study(owner, "cluster", ("\n".join(lines) + "\n").encode(), "cluster.jsonl")
    lifecycle.do_update_settings(study, {"raters_per_item": 1, "judgments_per_assignment": 5}, None)
    paths = [enrolment.do_create_rater_link(study, f"r{n}").link_path() for n in range(raters)]
    lines = [
        json.dumps(
            {
                "id": f"j{i}",
                "input": f"Question {i}",
                "outputs": {s: [f"{s} answer {i} sample {k} with some words" for k in range(4)] for s in ("a", "b")},
            }
        )
        for i in range(job_items)
    ]
    job_studies = [
        creation.do_create_study(owner, f"jobs-{k}", ("\n".join(lines) + "\n").encode(), "jobs.jsonl").pk
        for k in range(jobs)
    ]
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    return {"study": study.pk, "paths": paths, "job_studies": job_studies, "link": link.path()}


def queue_jobs(study_ids: list[int]) -> list[int]:
    from annotation.models import Study
    from selection.jobs import do_start_separability_job

    return [do_start_separability_job(study, "rouge1").pk for study in Study.objects.filter(pk__in=study_ids)]


def settle_jobs(cluster: Cluster, job_ids: list[int], seconds: float) -> dict:
    """Wait for the jobs; a job failed because its worker was killed is started again (as its page offers). Then
    check each ran to the end exactly once: done, and every task of it claimed by one worker only."""
    from django_tasks_db.models import DBTaskResult

    from annotation.jobs import run_job
    from annotation.models import Job

    restarted: Counter = Counter()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        jobs = dict(Job.objects.filter(pk__in=job_ids).values_list("pk", "status"))
        for pk, status in jobs.items():
            if status == Job.Status.FAILED:
                Job.objects.filter(pk=pk).update(status=Job.Status.QUEUED, message="", finished=None)
                run_job.enqueue(pk)
                restarted[pk] += 1
        if all(s == Job.Status.DONE for s in jobs.values()):
            break
        time.sleep(0.5)
    jobs = dict(Job.objects.filter(pk__in=job_ids).values_list("pk", "status"))
    stuck = sum(s == Job.Status.RUNNING for s in jobs.values())
    if cluster.queue == "rq":  # rq keeps its own records: what the pages see is the jobs' rows
        return {
            "jobs": len(job_ids),
            "done": sum(s == Job.Status.DONE for s in jobs.values()),
            "succeeded_once": sum(s == Job.Status.DONE for s in jobs.values()),
            "claimed_twice": 0,
            "restarted_after_kill": sum(restarted.values()),
            "stuck_running": stuck,
            "job_seconds": None,
        }
    results: Counter[tuple[Any, str]] = Counter()  # (job id, task result status) -> results
    claimed_twice = 0
    took = []
    for row in DBTaskResult.objects.filter(task_path__endswith="run_job"):
        job = (row.args_kwargs.get("args") or [None])[0]
        if job in jobs:
            results[(job, row.status)] += 1
            claimed_twice += len(row.worker_ids) > 1
            if row.status == "SUCCESSFUL":
                took.append((row.finished_at - row.started_at).total_seconds())
    succeeded = {pk: results[(pk, "SUCCESSFUL")] for pk in job_ids}
    return {
        "jobs": len(job_ids),
        "done": sum(s == Job.Status.DONE for s in jobs.values()),
        "succeeded_once": sum(n == 1 for n in succeeded.values()),
        "claimed_twice": claimed_twice,
        "restarted_after_kill": sum(restarted.values()),
        "stuck_running": stuck,
        "job_seconds": round(sorted(took)[len(took) // 2], 2) if took else None,
    }


def shared_launch_limit(cluster: Cluster, link_path: str, limit: int, arrivals: int) -> dict:
    """Crowd limits are shared across the app servers: with the link's launch limit set to ``limit`` a minute,
    ``arrivals`` new workers from distinct addresses (127.0.1.n: nginx sees each as its own client) through the
    entry point, spread over both servers by nginx, are let in ``limit`` times in all, not ``limit`` per server."""
    from annotation.models import ExternalLink

    token = link_path.rstrip("/").rsplit("/", 1)[-1]
    link = next(link for link in ExternalLink.objects.all() if link.path().rstrip("/").endswith(token))
    link.launch_per_minute = limit
    link.save(update_fields=["launch_per_minute"])
    codes: Counter[str] = Counter()  # HTTP status -> arrivals
    for n in range(arrivals):
        conn = socket.create_connection(("127.0.0.1", cluster.entry_port), source_address=(f"127.0.1.{n + 1}", 0))
        request = f"GET {link_path}?worker_id=launch{n} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        conn.sendall(request.encode())
        status = conn.makefile("rb").readline().split()[1].decode()
        conn.close()
        codes[status] += 1
    return {
        "limit": limit,
        "arrivals": arrivals,
        "admitted": codes.get("302", 0),
        "refused": codes.get("429", 0),
        "other": sum(v for k, v in codes.items() if k not in ("302", "429")),
    }


def drive(
    cluster: Cluster,
    paths: list[str],
    seconds: float,
    think: tuple[float, float],
    ramp: float,
    events: Sequence[tuple[float, str, Callable[[], object]]] = (),
    processes: int = 4,
) -> tuple[ClientResult, float, list[str]]:
    """Raters at ``think`` seconds per pair through the entry point for ``seconds``, in ``processes`` client
    processes (bench/load_raters.run_chunk: threads, one per rater); ``events`` are (second, name, function), each
    function called on time while they rate (killing and starting the cluster's parts)."""
    from concurrent.futures import ProcessPoolExecutor

    start = time.time()
    deadline = start + seconds
    chunks = [paths[i::processes] for i in range(processes) if paths[i::processes]]
    done_log = []
    with ProcessPoolExecutor(len(chunks), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [
            pool.submit(run_chunk, cluster.base, chunk, deadline, "human", 10**9, n * 100_000, ramp, True, False, think)
            for n, chunk in enumerate(chunks)
        ]
        for at, name, action in sorted(events, key=lambda e: e[0]):
            time.sleep(max(0.0, start + at - time.time()))
            outcome = action()
            done_log.append(f"{time.time() - start:.1f}s {name}{'' if outcome is None else f' -> {outcome}'}")
        results = [f.result() for f in futures]
    merged = ClientResult.merged(results)
    return merged, time.time() - start, done_log


def windows(result: ClientResult, start: float, width: float) -> list[dict]:
    """p95 of the next pair and of the submit in each ``width``-second window from ``start``: arrivals, faults and
    jobs show where they fall, not only in the run's one figure."""
    rows = []
    end = max([t for t, _ in result.next_ms + result.submit_ms], default=start)
    at = start
    while at < end:
        nxt = [ms for t, ms in result.next_ms if at <= t < at + width]
        sub = [ms for t, ms in result.submit_ms if at <= t < at + width]
        rows.append(
            {
                "from_s": round(at - start),
                "submits": len(sub),
                "p95_next_ms": round(p95(nxt), 1),
                "p95_submit_ms": round(p95(sub), 1),
            }
        )
        at += width
    return rows


def check_judgments(result: ClientResult, study_id: int) -> dict:
    from annotation.models import Judgment

    acknowledged = Counter(result.acknowledged)
    stored = Counter(Judgment.objects.filter(study_id=study_id).values_list("idempotency_key", flat=True))
    return {
        "acknowledged": sum(acknowledged.values()),
        "stored": sum(stored.values()),
        "lost": sum(1 for k in acknowledged if k not in stored),
        "duplicated": sum(n - 1 for n in stored.values() if n > 1) + sum(n - 1 for n in acknowledged.values() if n > 1),
    }


def p95(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(0.95 * len(values)))] if values else float("nan")


def healthz(cluster: Cluster) -> dict:
    with urllib.request.urlopen(cluster.base + "/healthz", timeout=10) as response:
        return json.loads(response.read())


def run(args: argparse.Namespace) -> int:
    """Start the deployment, build the studies, drive the raters (with the faults of ``--kill``), print the figures
    and take the deployment down; 0 when nothing was lost or duplicated, every job finished exactly once and the
    shared launch limit held."""
    low, high = (float(x) for x in args.think.split(","))
    think = (low, high)
    ramp = args.ramp if args.ramp is not None else sum(think) / 2
    with tempfile.TemporaryDirectory(prefix="seplab-cluster-") as folder:
        os.chmod(folder, 0o755)
        cluster = Cluster(
            Path(folder),
            servers=args.servers,
            web_workers=args.web_workers,
            web_threads=args.web_threads,
            stale_seconds=10 if args.kill else 120,
            queue=args.queue,
        ).start()
        try:
            per_rater = int(args.seconds / max(think[0], 0.05)) // 3 + 2  # items one rater can reach (3 pairs each)
            built = build(
                cluster, args.raters, items=args.items or args.raters * per_rater, job_items=300, jobs=args.jobs
            )
            jobs: list[int] = []
            killed: list[int] = []
            third = args.seconds / 3

            def kill_busy_worker() -> int:
                killed.append(cluster.kill_busy_worker())
                return killed[-1]

            def start_killed_worker() -> bool | None:
                if killed[-1] < 0:  # no worker was running a job
                    return False
                cluster.start_worker(killed[-1])
                return None

            # (second, name, what is done then: its result, when not None, is logged)
            events: list[tuple[float, str, Callable[[], object]]] = [
                (third - 2, f"queue {args.jobs} jobs", lambda: jobs.extend(queue_jobs(built["job_studies"])))
            ]
            if args.kill:
                events += [
                    (third, "kill -9 app server 0", lambda: cluster.kill_server(0)),
                    (third + 0.1, "kill -9 a worker running a job", kill_busy_worker),
                    (2 * third, "start app server 0", lambda: cluster.start_server(0)),
                    (2 * third, "start the killed worker", start_killed_worker),
                ]
            began = time.time()
            result, elapsed, log = drive(cluster, built["paths"], args.seconds, think, ramp, events)
            figures = {"raters": args.raters, "servers": args.servers, "seconds": round(elapsed, 1)}
            figures.update(check_judgments(result, built["study"]))
            figures["judgments_per_s"] = round(figures["acknowledged"] / args.seconds, 1)
            figures["p95_next_ms"] = round(p95([ms for _, ms in result.next_ms]), 1)
            figures["p95_submit_ms"] = round(p95([ms for _, ms in result.submit_ms]), 1)
            settled = [ms for t, ms in result.next_ms + result.submit_ms if t >= began + ramp]
            figures["p95_after_arrivals_ms"] = round(p95(settled), 1)
            server_next, server_submit = [], []
            for i in range(args.servers):  # what the app servers themselves took (gunicorn's access logs)
                if cluster.access_log(i).exists():
                    n, sub = server_times(cluster.access_log(i), began)
                    server_next += n
                    server_submit += sub
            figures["server_p95_next_ms"] = round(p95(server_next), 1)
            figures["server_p95_submit_ms"] = round(p95(server_submit), 1)
            figures["errors"] = result.errors
            figures["error_kinds"] = dict(result.error_kinds)
            figures.update(settle_jobs(cluster, jobs, 120))
            figures["jobs_ok"] = (
                figures["succeeded_once"] == figures["jobs"] == figures["done"] and not figures["claimed_twice"]
            )
            figures["launch"] = shared_launch_limit(cluster, built["link"], 6, 10)
            figures["worker_seen"] = healthz(cluster).get("worker", {})
            if args.keep_logs:  # gunicorn's access logs and the workers' logs, for a closer look
                Path(args.keep_logs).mkdir(parents=True, exist_ok=True)
                for path in cluster.workdir.glob("*.log"):
                    shutil.copy(path, Path(args.keep_logs) / path.name)
            for line in log:
                print("event:", line)
            for row in windows(result, began, args.window):
                print("window:", " ".join(f"{k}={v}" for k, v in row.items()))
            if args.json:
                print(json.dumps(figures, default=str))
            print(" ".join(f"{k}={v}" for k, v in figures.items() if not isinstance(v, dict)))
        finally:
            cluster.stop()
    ok = (
        figures["lost"] == 0
        and figures["duplicated"] == 0
        and figures["jobs_ok"]
        and figures["launch"]["admitted"] == 6
    )
    return 0 if ok else 1
