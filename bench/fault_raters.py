"""Fault test: raters keep working while a gunicorn worker is killed with SIGKILL, then the whole
server, which is then restarted. Checks that every judgment acknowledged to a client is stored exactly
once, that raters resume after the restart, and that assignments left open by the crash do not stay
stuck (expiry returns their places to the queue). Bounded in time; loopback only.

    python bench/fault_raters.py [--raters 10] [--seconds 20] [--database postgres|sqlite]
Exit status 0 when every check passes; the last line is machine-readable.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import tempfile
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.load_clients import Budget, Rater  # noqa: E402
from bench.load_raters import free_port, setup_study, start_server  # noqa: E402
from bench.scratch import prepare_database  # noqa: E402


def children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                out.append(int(entry.name))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raters", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="postgres")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="seplab-fault-"))
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": prepare_database(args.database, workdir),
        "STATIC_ROOT": str(workdir / "static"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    os.environ.update(env)
    paths = setup_study(args.raters, max(200, args.raters * 40))
    port = free_port()
    server = start_server(env, port, 3, 8)
    deadline = time.time() + args.seconds
    raters = [Rater(f"http://127.0.0.1:{port}", p, deadline, "max", Budget(10**6), n) for n, p in enumerate(paths)]
    for r in raters:
        r.start()
    events = []
    time.sleep(args.seconds * 0.2)
    worker = children(server.pid)[0]
    os.kill(worker, signal.SIGKILL)
    events.append(f"killed worker {worker}")
    time.sleep(args.seconds * 0.2)
    acked_before_crash = sum(len(r.acknowledged) for r in raters)
    for pid in [server.pid, *children(server.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    server.wait()
    events.append(f"killed the whole server with {acked_before_crash} judgments acknowledged")
    time.sleep(1.0)
    server = start_server(env, port, 3, 8)
    events.append("restarted")
    for r in raters:
        r.join(args.seconds + 60)
    server.terminate()
    server.wait(timeout=30)

    from annotation.models import Assignment, Judgment, Study
    from annotation.rating import allocation

    acknowledged = [k for r in raters for k in r.acknowledged]
    stored = Counter(Judgment.objects.filter(study__name="load").values_list("idempotency_key", flat=True))
    lost = sum(1 for k in acknowledged if k not in stored)
    duplicated = sum(n - 1 for n in stored.values() if n > 1)
    resumed = len(acknowledged) - acked_before_crash
    study = Study.objects.get(name="load")
    open_before = Assignment.objects.filter(study=study, status="active").count()
    Assignment.objects.filter(study=study, status="active").update(
        last_activity=Assignment.objects.model._meta.get_field("last_activity").default() - timedelta(hours=2)
    )
    expired = allocation.do_expire_stale_assignments(study)
    stuck = Assignment.objects.filter(study=study, status="active").count()
    for e in events:
        print(e)
    print(
        f"{len(acknowledged)} judgments acknowledged ({resumed} after the restart), {sum(stored.values())} stored; "
        f"{open_before} assignments open at the end, {expired} expired and returned to the queue"
    )
    ok = lost == 0 and duplicated == 0 and resumed > 0 and stuck == 0
    print(
        f"fault_test={'pass' if ok else 'FAIL'} acknowledged={len(acknowledged)} lost={lost} duplicated={duplicated} "
        f"resumed={resumed} stuck={stuck}"
    )
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
