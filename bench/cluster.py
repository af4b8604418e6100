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
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.cluster_run import run  # noqa: E402  (the deployment: bench/cluster_deployment.py)


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
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
