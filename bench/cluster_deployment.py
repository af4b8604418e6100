"""The deployment bench/cluster.py runs, on loopback: its processes (gunicorn app servers, nginx in front of them,
PgBouncer in front of PostgreSQL, run_worker or rqworker workers), their ports and configuration files, and starting
and ``kill -9``-ing each of them. Each run has a database of its own (dropped by ``stop()``) and Redis keys under a
prefix of its own."""

from __future__ import annotations

import atexit
import datetime as dt
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

from bench.load_raters import free_port, gunicorn_command
from bench.scratch import create_database, database_name, drop_database

ROOT = Path(__file__).resolve().parents[1]
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


def start_pgbouncer(workdir: Path, database: str, port: int, pool_size: int) -> subprocess.Popen:
    """PgBouncer in transaction pooling on ``port`` in front of PostgreSQL's ``database`` (at 127.0.0.1:5432), at
    most ``pool_size`` server connections, its files in ``workdir/pgbouncer``. It refuses to run as root, so as root
    it runs as the postgres account, from a folder that account may read and write."""
    folder = workdir / "pgbouncer"
    folder.mkdir()
    (folder / "users.txt").write_text('"postgres" ""\n')
    (folder / "pgbouncer.ini").write_text(f"""[databases]
{database} = host=127.0.0.1 port=5432 dbname={database} user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder / "users.txt"}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 4000
server_reset_query =
ignore_startup_parameters = extra_float_digits,options
logfile = {folder / "pgbouncer.log"}
""")
    command = [tool("pgbouncer"), str(folder / "pgbouncer.ini")]
    if os.geteuid() == 0:
        account = pwd.getpwnam("postgres")
        os.chown(workdir, account.pw_uid, account.pw_gid)
        for path in (folder, *folder.iterdir()):
            os.chown(path, account.pw_uid, account.pw_gid)
        command[1:1] = ["-u", "postgres"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for_port(port)
    return process


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
        self.database = database_name("cluster")
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

    def _start_pgbouncer(self) -> None:
        self.pgbouncer = start_pgbouncer(self.workdir, self.database, self.pg_port, self.pool_size)

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
        self.servers[i] = subprocess.Popen(
            gunicorn_command(self.server_ports[i], self.web_workers, self.web_threads, self.access_log(i)),
            cwd=ROOT,
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        wait_for_port(self.server_ports[i])

    def kill_server(self, i: int) -> None:
        kill_tree(cast(subprocess.Popen, self.servers[i]))  # a running server (the caller's)
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
        kill_tree(cast(subprocess.Popen, self.workers[i]))  # a running worker (the caller's)
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
        create_database(self.database)
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
            drop_database(self.database)
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
