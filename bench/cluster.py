"""SepLab past one machine, on loopback: two app servers (separate gunicorn processes on their own ports, as two
machines would be) behind one entry point (nginx), PostgreSQL behind PgBouncer in transaction pooling, Redis for the
limits the servers share, and two background workers (``manage.py run_worker``: the database queue, each taking a
task with ``SELECT ... FOR UPDATE SKIP LOCKED``). Every part is the real engine in its own process, so a test or a
bench can ``kill -9`` any of them and start it again.

    python bench/cluster.py --raters 1000 --seconds 240 --think 20,40     # the bench (bench/README.md)
    python bench/cluster.py --raters 20 --seconds 24 --think 0.3,1 --kill  # the kill run of tests/test_cluster.py
    python bench/cluster.py --queue rq ...                                 # the same on django-tasks-rq

The run prints what it measured; the last line is machine-readable:
    raters=… acknowledged=… stored=… lost=… duplicated=… judgments_per_s=… p95_next_ms=… p95_submit_ms=… … jobs_ok=…
Needs nginx and pgbouncer (Debian's packages: `make cluster-tools`), PostgreSQL at 127.0.0.1:5432 and Redis at
127.0.0.1:6379. Each run has a database of its own (dropped at the end) and Redis keys under a prefix of its own.
"""

from __future__ import annotations

import argparse
import atexit
import datetime as dt
import json
import multiprocessing
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.load_raters import ClientResult, free_port, run_chunk, server_times  # noqa: E402

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS = "redis://127.0.0.1:6379/0"
RQ_REDIS = "redis://127.0.0.1:6379/7"


def tool(name: str) -> str:
    """The path of an engine the cluster runs (Debian puts nginx and pgbouncer in /usr/sbin)."""
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin")
    if path is None:
        raise RuntimeError(f"{name} is not installed: run 'make cluster-tools' (apt-get install nginx-light pgbouncer)")
    return path


def wait_for_port(port: int, seconds: float = 30.0) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port} after {seconds:.0f} s")


def descendants(pid: int) -> list[int]:
    """Every process ``pid`` started, and theirs (from /proc: a child may leave its parent's process group, as rq's
    work-horse does)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            parents.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(process: subprocess.Popen) -> None:
    """``kill -9`` a process and every process it started (a machine losing power: no clean shutdown)."""
    for pid in [process.pid, *descendants(process.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


class Cluster:
    """The processes of the deployment; ``start()`` brings them all up, ``stop()`` takes them down and drops the run's
    database. ``kill_server(i)`` / ``start_server(i)`` and ``kill_worker(i)`` / ``start_worker(i)`` for fault runs."""

    def __init__(
        self,
        workdir: Path,
        servers: int = 2,
        workers: int = 2,
        web_workers: int = 2,
        web_threads: int = 16,
        stale_seconds: int = 120,
        pool_size: int = 20,
        queue: str = "db",
    ):
        self.workdir = workdir
        self.n_servers, self.n_workers = servers, workers
        self.web_workers, self.web_threads = web_workers, web_threads
        self.database = f"seplab_cluster_{os.getpid()}_{secrets.token_hex(4)}"
        self.prefix = f"cluster-{secrets.token_hex(4)}"
        self.pg_port, self.entry_port = free_port(), free_port()
        self.server_ports = [free_port() for _ in range(servers)]
        self.pool_size = pool_size
        self.queue = queue  # "db": run_worker on the database queue; "rq": rqworker on Redis (django-tasks-rq)
        self.servers: list[subprocess.Popen | None] = [None] * servers
        self.workers: list[subprocess.Popen | None] = [None] * workers
        self.pgbouncer: subprocess.Popen | None = None
        self.nginx: subprocess.Popen | None = None
        self.env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
        self.env.update(
            {
                "DEBUG": "0",
                "SECRET_KEY": secrets.token_urlsafe(50),
                "ALLOWED_HOSTS": "127.0.0.1,localhost",
                "DATABASE_URL": f"postgres://postgres@127.0.0.1:{self.pg_port}/{self.database}",
                "DB_TRANSACTION_POOLER": "1",
                "DB_CONN_MAX_AGE": "60",
                "REDIS_URL": REDIS,
                "CACHE_KEY_PREFIX": self.prefix,
                "BEHIND_PROXY": "1",
                "SEPLAB_PROXY_COUNT": "1",
                "STATIC_ROOT": str(workdir / "static"),
                "SEPLAB_JOB_STALE_SECONDS": str(stale_seconds),
                "HTTPS": "0",
                "WEB_ACCESS_LOG": "",
            }
        )
        if queue == "rq":  # Redis database 7 holds the run's queue (emptied at the start: the bench owns it)
            self.env.update({"SEPLAB_TASKS_BACKEND": "django_tasks_rq.RQBackend", "RQ_URL": RQ_REDIS})

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.entry_port}"

    # -- the parts ---------------------------------------------------------------------------------------------

    def _create_database(self) -> None:
        import psycopg

        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {self.database}")

    def _drop_database(self) -> None:
        import psycopg

        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {self.database} WITH (FORCE)")

    def _start_pgbouncer(self) -> None:
        """PgBouncer in transaction pooling between every Django process and PostgreSQL. It refuses to run as root,
        so as root it runs as the postgres account, from a folder that account may read and write."""
        folder = self.workdir / "pgbouncer"
        folder.mkdir()
        (folder / "users.txt").write_text('"postgres" ""\n')
        (folder / "pgbouncer.ini").write_text(f"""[databases]
{self.database} = host=127.0.0.1 port=5432 dbname={self.database} user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.pg_port}
unix_socket_dir =
auth_type = trust
auth_file = {folder / "users.txt"}
pool_mode = transaction
default_pool_size = {self.pool_size}
max_client_conn = 4000
server_reset_query =
ignore_startup_parameters = extra_float_digits,options
logfile = {folder / "pgbouncer.log"}
""")
        command = [tool("pgbouncer"), str(folder / "pgbouncer.ini")]
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            os.chown(self.workdir, account.pw_uid, account.pw_gid)
            for path in (folder, *folder.iterdir()):
                os.chown(path, account.pw_uid, account.pw_gid)
            command[1:1] = ["-u", "postgres"]
        self.pgbouncer = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        wait_for_port(self.pg_port)

    def _start_nginx(self) -> None:
        folder = self.workdir / "nginx"
        folder.mkdir()
        upstream = "\n".join(f"    server 127.0.0.1:{p} max_fails=1 fail_timeout=3s;" for p in self.server_ports)
        user = "user root;" if os.geteuid() == 0 else ""
        (folder / "nginx.conf").write_text(f"""{user}
worker_processes 1;
pid {folder / "nginx.pid"};
error_log {folder / "error.log"} warn;
events {{ worker_connections 8192; }}
http {{
  access_log off;
  client_body_temp_path {folder / "body"};
  proxy_temp_path {folder / "proxy"};
  fastcgi_temp_path {folder / "fastcgi"};
  uwsgi_temp_path {folder / "uwsgi"};
  scgi_temp_path {folder / "scgi"};
  upstream seplab {{
{upstream}
    keepalive 64;
  }}
  server {{
    listen 127.0.0.1:{self.entry_port};
    keepalive_timeout 60s;
    keepalive_requests 100000;
    location / {{
      proxy_pass http://seplab;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_connect_timeout 1s;
      # a request the dead server never answered (a connection refused or reset, not a slow reply) goes to the
      # other one, POSTs included: every POST on the raters' path is idempotent (a submission key, an assignment
      # start that resumes the active one)
      proxy_next_upstream error non_idempotent;
    }}
  }}
}}
""")
        self.nginx = subprocess.Popen(
            [tool("nginx"), "-c", str(folder / "nginx.conf"), "-p", str(folder), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_port(self.entry_port)

    def manage(self, *args: str) -> None:
        subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env, check=True, stdout=subprocess.DEVNULL
        )

    def access_log(self, i: int) -> Path:
        return self.workdir / f"access-{i}.log"

    def start_server(self, i: int) -> None:
        log = ["--access-logfile", str(self.access_log(i)), "--access-logformat", "%(t)s %(m)s %(U)s %(s)s %(D)s"]
        self.servers[i] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "config/gunicorn.conf.py",
                "config.wsgi:application",
                "--bind",
                f"127.0.0.1:{self.server_ports[i]}",
                "--workers",
                str(self.web_workers),
                "--threads",
                str(self.web_threads),
                *log,
            ],
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_port(self.server_ports[i])

    def kill_server(self, i: int) -> None:
        kill_tree(self.servers[i])
        self.servers[i] = None

    def start_worker(self, i: int) -> None:
        log = open(self.workdir / f"worker-{i}.log", "ab")  # noqa: SIM115 - the process keeps it
        command = (
            ["run_worker", "--interval", "0.2"]
            if self.queue == "db"
            else ["rqworker", "--job-class", "django_tasks_rq.Job", "default"]
        )
        self.workers[i] = subprocess.Popen(
            [sys.executable, "manage.py", *command],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )

    def kill_worker(self, i: int) -> None:
        kill_tree(self.workers[i])
        self.workers[i] = None

    def kill_busy_worker(self, seconds: float = 30.0) -> int:
        """``kill -9`` a worker while it runs a job (found by the pid its heartbeat row records); returns its index,
        or -1 when no worker was busy within ``seconds``."""
        from django.utils import timezone
        from django_tasks_db.models import DBTaskResult

        from annotation.models import Job, WorkerBeat

        end = time.monotonic() + seconds
        if self.queue == "rq":  # rq's workers record nothing of ours: wait until every worker is busy, kill the first
            live = sum(p is not None for p in self.workers)
            while time.monotonic() < end:
                if Job.objects.filter(status=Job.Status.RUNNING).count() >= live:
                    self.kill_worker(0)
                    return 0
                time.sleep(0.05)
            return -1
        while time.monotonic() < end:
            pids = {p.pid: i for i, p in enumerate(self.workers) if p is not None}
            just = timezone.now() - dt.timedelta(seconds=0.3)
            for worker_ids, args in DBTaskResult.objects.filter(status="RUNNING", started_at__gte=just).values_list(
                "worker_ids", "args_kwargs"
            ):
                job = ((args or {}).get("args") or [None])[0]
                # a job that started a moment ago (a job here takes seconds), so the kill leaves it unfinished
                if not Job.objects.filter(pk=job, status=Job.Status.RUNNING).exists():
                    continue
                beat = WorkerBeat.objects.filter(worker_id__in=worker_ids[-1:]).values_list("pid", flat=True).first()
                if beat in pids:
                    self.kill_worker(pids[beat])
                    return pids[beat]
            time.sleep(0.05)
        return -1

    def start(self) -> Cluster:
        atexit.register(self.stop)
        if self.queue == "rq":
            import redis

            redis.Redis.from_url(RQ_REDIS).flushdb()
        self._create_database()
        self._start_pgbouncer()
        self.manage("migrate", "--noinput")
        self.manage("collectstatic", "--noinput")
        for i in range(self.n_servers):
            self.start_server(i)
        for i in range(self.n_workers):
            self.start_worker(i)
        self._start_nginx()
        return self

    def stop(self) -> None:
        for process in [*self.servers, *self.workers, self.nginx, self.pgbouncer]:
            if process is not None and process.poll() is None:
                kill_tree(process)
        self.servers = [None] * self.n_servers
        self.workers = [None] * self.n_workers
        self.nginx = self.pgbouncer = None
        try:
            self._drop_database()
        except Exception:  # noqa: BLE001 - already dropped, or the server is gone: nothing left to clean
            pass
        atexit.unregister(self.stop)

    # -- the Django side, in this process (through PgBouncer like the servers) -------------------------------

    def django(self) -> None:
        """Set this process up as one more client of the cluster's database (for building studies and checking)."""
        os.environ.update(self.env)
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        import django

        django.setup()


def build(cluster: Cluster, raters: int, items: int, job_items: int) -> dict:
    """A study for the raters (one personal link each), a small study whose separability jobs the workers run, and a
    crowd link with a launch limit of its own."""
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
    jobs_study = creation.do_create_study(owner, "jobs", ("\n".join(lines) + "\n").encode(), "jobs.jsonl")
    link = sites.do_create_external_link(study, ExternalLink.Platform.GENERIC)
    return {"study": study.pk, "paths": paths, "jobs_study": jobs_study.pk, "link": link.path()}


def queue_jobs(study_id: int, n: int) -> list[int]:
    from annotation.models import Study
    from selection.jobs import do_start_separability_job

    study = Study.objects.get(pk=study_id)
    return [do_start_separability_job(study, "rouge1").pk for _ in range(n)]


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
    results = Counter()
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
    codes = Counter()
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
    events: list[tuple[float, str, object]] = (),
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
    merged = ClientResult(
        [v for r in results for v in r.next_ms],
        [v for r in results for v in r.submit_ms],
        [t for r in results for t in r.sent],
        [k for r in results for k in r.acknowledged],
        sum(r.errors for r in results),
        sum((r.error_kinds for r in results), Counter()),
        sum(r.requests for r in results),
    )
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


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--raters", type=int, default=1000, help="simulated raters (default 1000)")
    parser.add_argument("--seconds", type=float, default=240, help="how long they rate (default 240)")
    parser.add_argument(
        "--think",
        default="20,40",
        help="seconds a rater spends on a pair, uniform LOW,HIGH (default 20,40: one judgment per ~30 s)",
    )
    parser.add_argument(
        "--ramp", type=float, default=None, help="raters arrive over this many seconds (default: the mean think time)"
    )
    parser.add_argument(
        "--kill",
        action="store_true",
        help="kill -9 one app server and one worker a third of the way in, start them again at two thirds",
    )
    parser.add_argument("--jobs", type=int, default=12, help="separability jobs queued for the two workers (12)")
    parser.add_argument("--web-workers", type=int, default=2, help="gunicorn workers per app server (2)")
    parser.add_argument("--web-threads", type=int, default=16, help="threads per gunicorn worker (16)")
    parser.add_argument(
        "--queue",
        choices=("db", "rq"),
        default="db",
        help="db: run_worker on the database queue (the default); rq: rqworker on Redis (needs "
        "'pip install django-tasks-rq')",
    )
    parser.add_argument("--servers", type=int, default=2, help="app servers behind the entry point (2)")
    parser.add_argument(
        "--items",
        type=int,
        default=0,
        help="items of the raters' study (default: as many as the raters could reach at the fastest think time)",
    )
    parser.add_argument("--window", type=float, default=30, help="seconds per line of the latency timeline (30)")
    parser.add_argument("--keep-logs", metavar="DIR", help="copy the servers' access logs and the workers' logs here")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object as well")
    args = parser.parse_args()
    think = tuple(float(x) for x in args.think.split(","))
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
            built = build(cluster, args.raters, items=args.items or args.raters * per_rater, job_items=300)
            jobs: list[int] = []
            killed: list[int] = []
            third = args.seconds / 3
            events = [
                (third - 2, f"queue {args.jobs} jobs", lambda: jobs.extend(queue_jobs(built["jobs_study"], args.jobs)))
            ]
            if args.kill:
                events += [
                    (third, "kill -9 app server 0", lambda: cluster.kill_server(0)),
                    (
                        third + 0.1,
                        "kill -9 a worker running a job",
                        lambda: killed.append(cluster.kill_busy_worker()) or killed[-1],
                    ),
                    (2 * third, "start app server 0", lambda: cluster.start_server(0)),
                    (
                        2 * third,
                        "start the killed worker",
                        lambda: killed[-1] >= 0 and cluster.start_worker(killed[-1]),
                    ),
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


if __name__ == "__main__":
    sys.exit(main())
