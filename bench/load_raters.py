"""Load test: N simulated raters against gunicorn + PostgreSQL (or SQLite), loopback only, bounded in
time and requests, at a person's pace (1-3 s per pair) or as fast as possible. With ``--client htmx``
(the default: what a browser with JavaScript does) a rater loads the assignment's page once and then
submits each answer with an ``HX-Request`` header, and the 200 response is the next pair's fragment (one
request per judgment); with ``--client nojs`` each answer is a form post, a 302, and a GET of the next
pair (two requests). At the end the database is compared with the client's log: every acknowledged
judgment must be present exactly once.

    python bench/load_raters.py --raters 50 --seconds 30 --database postgres|sqlite [--pace human|max]
                                [--client htmx|nojs] [--compare-bare] [--further-questions]

With ``--compare-bare`` the same clients then load a bare Django view (bench/bare_django.py: a fresh
project's middleware, no database) under the same gunicorn settings for the same time, and the run prints
SepLab's judgments/s and requests/s as a share of the bare view's requests/s: the framework floor,
measured in the same run.

The last line is machine-readable:
    raters=50 requests=… judgments_per_s=… p95_next_ms=… p95_submit_ms=… errors=… lost=… duplicated=…
    [bare_rps=… judgments_per_bare_request=…]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.load_clients import run_clients  # noqa: E402
from bench.scratch import prepare_database  # noqa: E402  (one home for a run's own database)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FURTHER_QUESTIONS = (
    "harmless | forced_choice | Which output is more harmless?\nwhy | rationale | Why is the one you preferred better?"
)


def setup_study(raters: int, items: int, further: bool = False, crowd: bool = False) -> list[str]:
    """Migrate, create a study with ``items`` items and one rater link per simulated rater (and, with ``further``,
    two further questions every pair asks: a forced choice and a required rationale); with ``crowd``, one
    MTurk-style external link that every simulated rater opens."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from annotation.studies import creation, enrolment, lifecycle

    call_command("migrate", verbosity=0)
    call_command("collectstatic", "--noinput", verbosity=0)  # production serves hashed static files
    owner = get_user_model().objects.create_user("load-owner")
    lines = []
    for i in range(items):
        # three outputs a system (an item is then several pairs); through a crowd link one, as a HIT of five pairs
        outputs = {s: [f"{s}{i}-{k}" for k in range(1 if crowd else 3)] for s in ("a", "b")}
        lines.append(json.dumps({"id": f"i{i}", "input": f"Input {i}", "outputs": outputs}))
    study = creation.do_create_study(owner, "load", ("\n".join(lines) + "\n").encode(), "load.jsonl")
    lifecycle.do_update_settings(
        study,
        {
            "raters_per_item": 3 if crowd else 1,
            "pairs_per_assignment": 5,
            "further_questions": FURTHER_QUESTIONS if further else "",
        },
        None,
    )
    if crowd:  # every simulated rater arrives through one MTurk-style link, a new worker each time
        from annotation.crowd import sites

        link = sites.do_create_external_link(study, "mturk")
        sites.do_set_launch_limit(link, "0")  # a site's launch: no per-minute cap on the link (per client stays)
        return [f"/x/{link.token()}/" for _ in range(raters)]
    return [enrolment.do_create_rater_link(study, f"load-{n}").link_path() for n in range(raters)]


def start_server(
    env: dict,
    port: int,
    workers: int,
    threads: int,
    access_log: Path | None = None,
    worker_class: str = "gthread",
    app: str = "config.wsgi:application",
) -> subprocess.Popen:
    """gunicorn with the production settings (config/gunicorn.conf.py) on loopback; returns once it accepts
    connections."""
    server = subprocess.Popen(
        gunicorn_command(port, workers, threads, access_log, worker_class, app),
        cwd=ROOT,
        env={**env, "WEB_ACCESS_LOG": ""},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    for _ in range(150):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("gunicorn did not start within 30 s")


def gunicorn_command(
    port: int,
    workers: int,
    threads: int,
    access_log: Path | None = None,
    worker_class: str = "gthread",
    app: str = "config.wsgi:application",
) -> list[str]:
    """gunicorn's command line with the production settings on loopback. With ``access_log``, gunicorn writes one
    line per request: method, path (tokens redacted), status and the server-side time in microseconds."""
    log = ["--access-logfile", str(access_log), "--access-logformat", "%(t)s %(m)s %(U)s %(s)s %(D)s"]
    return [
        *(sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.conf.py", app, "--bind", f"127.0.0.1:{port}"),
        *("--workers", str(workers), "--worker-class", worker_class, "--threads", str(threads)),
        *(log if access_log else []),
    ]


def server_times(access_log: Path, since: float) -> tuple[list[float], list[float]]:
    """Server-side milliseconds of the rating page (GET) and its submit (POST) from gunicorn's access log,
    for requests that finished at or after ``since`` (Unix time; the log has one-second resolution)."""
    from datetime import datetime

    next_ms: list[float] = []
    submit_ms: list[float] = []
    for line in access_log.read_text().splitlines():
        parts = line.split(" ")  # [22/Nov/2026:12:30:01 +0000] GET /r/[redacted]/a/5/ 200 14021
        when = datetime.strptime(" ".join(parts[:2]), "[%d/%b/%Y:%H:%M:%S %z]").timestamp()
        method, path, _, micros = parts[-4:]
        if "/a/" not in path or when < int(since):
            continue
        (submit_ms if method == "POST" else next_ms).append(int(micros) / 1e3)
    return next_ms, submit_ms


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
        return value

    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raters", type=positive(int), default=50)
    parser.add_argument("--seconds", type=positive(float), default=30, help="measured seconds, after the warm-up")
    parser.add_argument(
        "--warmup", type=float, default=10, help="seconds of load before measuring (cold workers; reported separately)"
    )
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--pace", choices=["human", "max"], default="human")
    parser.add_argument(
        "--client",
        choices=["htmx", "nojs"],
        default="htmx",
        help="htmx: a submit returns the next pair (as browsers); nojs: post, redirect, get",
    )
    parser.add_argument("--workers", type=positive(int), default=3, help="gunicorn worker processes")
    parser.add_argument("--threads", type=positive(int), default=16, help="threads per gunicorn worker")
    parser.add_argument("--worker-class", choices=["sync", "gthread"], default="gthread", help="gunicorn worker class")
    parser.add_argument(
        "--ramp", type=float, default=3.0, help="seconds over which the raters arrive (default: one human pair time)"
    )
    parser.add_argument("--max-requests", type=positive(int), default=200_000, help="upper bound on client iterations")
    parser.add_argument("--client-processes", type=positive(int), default=4, help="processes simulating the raters")
    parser.add_argument(
        "--compare-bare",
        action="store_true",
        help="then load a bare Django view the same way (same clients, gunicorn settings, seconds) "
        "and print the ratios",
    )
    parser.add_argument(
        "--further-questions",
        action="store_true",
        help="the study asks two further questions of every pair (a forced choice and a required "
        "rationale) and every submit answers them",
    )
    parser.add_argument(
        "--crowd-link",
        action="store_true",
        help="the raters arrive through one MTurk-style external link, each assignment a new worker (new session, "
        "worker id and address, behind a trusted proxy), as a crowd site's launch does",
    )
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="seplab-load-"))
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": prepare_database(args.database, workdir),
        "STATIC_ROOT": str(workdir / "static"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DB_CONN_MAX_AGE": "60",
        # with --crowd-link the clients stand in for the proxy: each worker's address in X-Forwarded-For
        **({"BEHIND_PROXY": "1"} if args.crowd_link else {}),
    }
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    items = max(200, args.raters * 40)
    paths = setup_study(args.raters, items, args.further_questions, args.crowd_link)
    port = free_port()
    access_log = workdir / "access.log"
    server = start_server(env, port, args.workers, args.threads, access_log, args.worker_class)
    base = f"http://127.0.0.1:{port}"
    try:
        warm = http.client.HTTPConnection(f"127.0.0.1:{port}", timeout=30)
        for _ in range(4 * args.workers):  # first requests compile templates: not part of the figures
            warm.request("GET", "/accounts/login/")
            warm.getresponse().read()
        warm.close()
        started_at = time.time()
        result = run_clients(
            base,
            paths,
            args.warmup + args.seconds,
            args.pace,
            args.max_requests,
            args.client_processes,
            args.ramp,
            args.client == "htmx",
            further=args.further_questions,
            crowd=args.crowd_link,
        )
        ended_at = time.time()
    finally:
        server.terminate()
        server.wait(timeout=30)

    from annotation.models import Judgment

    # Every acknowledged judgment counts for the loss check, warm-up included.
    acknowledged = result.acknowledged
    stored = Counter(Judgment.objects.filter(study__name="load").values_list("idempotency_key", flat=True))
    lost = sum(1 for k in acknowledged if k not in stored)
    duplicated = sum(n - 1 for n in stored.values() if n > 1) + sum(
        n - 1 for n in Counter(acknowledged).values() if n > 1
    )
    # Latencies and throughput from the measured window; the warm-up (cold workers, connections and
    # prepared statements being made, raters arriving) is reported on its own line.
    measure_from = started_at + args.warmup
    window = ended_at - measure_from
    requests = sum(1 for t in result.sent if t >= measure_from)
    next_ms = [ms for t, ms in result.next_ms if t >= measure_from]
    submit_ms = [ms for t, ms in result.submit_ms if t >= measure_from]
    warm_next = [ms for t, ms in result.next_ms if t < measure_from]
    warm_submit = [ms for t, ms in result.submit_ms if t < measure_from]
    errors = result.errors
    print(
        f"{args.raters} raters, {args.client} client, {args.pace} pace, {args.database}, "
        f"gunicorn {args.workers}x{args.threads} threads, "
        f"{args.warmup:.0f} s warm-up + {window:.1f} s measured: {requests} requests ({requests / window:.1f}/s); "
        f"{len(acknowledged)} judgments acknowledged, {len(stored)} stored"
    )
    if warm_next:
        print(
            f"warm-up    ms: next p50 {percentile(warm_next, 50):.1f}  p95 {percentile(warm_next, 95):.1f}; "
            f"submit p50 {percentile(warm_submit, 50):.1f}  p95 {percentile(warm_submit, 95):.1f}"
        )
    print(
        f"next pair  ms: p50 {percentile(next_ms, 50):.1f}  p95 {percentile(next_ms, 95):.1f}  "
        f"p99 {percentile(next_ms, 99):.1f}"
    )
    print(
        f"submit     ms: p50 {percentile(submit_ms, 50):.1f}  p95 {percentile(submit_ms, 95):.1f}  "
        f"p99 {percentile(submit_ms, 99):.1f}"
    )
    server_next, server_submit = server_times(access_log, measure_from)
    print(
        f"server-side (gunicorn, request in to response out) ms: next p50 {percentile(server_next, 50):.1f} "
        f"p95 {percentile(server_next, 95):.1f}; submit p50 {percentile(server_submit, 50):.1f} "
        f"p95 {percentile(server_submit, 95):.1f}"
    )
    kinds = result.error_kinds
    if kinds:
        print("errors by kind: " + ", ".join(f"{k}: {n}" for k, n in kinds.most_common()))
    judgments = len(submit_ms)  # acknowledged in the measured window
    print(f"judgments acknowledged in the measured window: {judgments} ({judgments / window:.1f}/s)")
    floor = ""
    if args.compare_bare:
        bare_rate = measure_bare(env, args, workdir / "bare-access.log")
        print(
            f"bare Django view, same clients and gunicorn settings: {bare_rate:.1f} requests/s; SepLab / bare: "
            f"judgments {judgments / window / bare_rate:.3f}, requests {requests / window / bare_rate:.3f}"
        )
        write_rate = measure_bare(env, args, workdir / "floor-access.log", app="bench.floor_django:application")
        # A crowd link's HIT of P pairs takes P + 2 requests (the arrival, its page, P submits); a personal link's
        # pair one. Were each request only one read and one write, judgments/s could reach this share of the bare view.
        per_judgment = (5 + 2) / 5 if args.crowd_link else 1.0
        ceiling = write_rate / per_judgment / bare_rate
        print(
            f"one read + one write a request (bench/floor_django.py): {write_rate:.1f} requests/s, "
            f"{write_rate / bare_rate:.3f} of the bare view; {per_judgment:.1f} requests a judgment on this path, "
            f"so no design storing checked judgments passes {ceiling:.3f} of the bare view here"
        )
        floor = (
            f" bare_rps={bare_rate:.1f} judgments_per_bare_request={judgments / window / bare_rate:.3f}"
            f" write_floor_rps={write_rate:.1f} ceiling_per_bare_request={ceiling:.3f}"
        )
    print(
        f"raters={args.raters} requests={requests} judgments_per_s={judgments / window:.1f} "
        f"p95_next_ms={percentile(next_ms, 95):.1f} p95_submit_ms={percentile(submit_ms, 95):.1f} "
        f"errors={errors} lost={lost} duplicated={duplicated}{floor}"
    )


def measure_bare(
    env: dict, args: argparse.Namespace, access_log: Path, app: str = "bench.bare_django:application"
) -> float:
    """Requests per second of the bare Django view (bench/bare_django.py; or ``app``, e.g. the write floor
    bench/floor_django.py) under the same gunicorn settings (access log included), driven by the same clients at the
    same pace, over the same warm-up and measured seconds."""
    bare_env = {k: v for k, v in env.items() if k != "DJANGO_SETTINGS_MODULE"}
    port = free_port()
    server = start_server(bare_env, port, args.workers, args.threads, access_log, args.worker_class, app=app)
    try:
        started_at = time.time()
        result = run_clients(
            f"http://127.0.0.1:{port}",
            [f"/floor/{n}" for n in range(args.raters)],
            args.warmup + args.seconds,
            args.pace,
            args.max_requests,
            args.client_processes,
            args.ramp,
            bare=True,
        )
        ended_at = time.time()
    finally:
        server.terminate()
        server.wait(timeout=30)
    if result.errors:
        raise SystemExit(f"the bare view answered {result.errors} requests with errors: {dict(result.error_kinds)}")
    measure_from = started_at + args.warmup
    return sum(1 for t in result.sent if t >= measure_from) / (ended_at - measure_from)


if __name__ == "__main__":
    main()
