"""Load test of the arena: N raters in battles at once against gunicorn (config/gunicorn.conf.py) and two local
streaming endpoints (tests/judge_server.py's streaming mode at a set word rate, each in its own process), loopback
only, bounded in time. A rater sends a prompt of its own, reads both replies' server-sent events to their end, asks
the page what comes next (the vote form, as static/js/arena.js does), thinks, votes (htmx), and starts the next
battle.

    python bench/arena_load.py --raters 100 --seconds 30 [--database sqlite|postgres] [--rate 20] [--think 1,3]

Measured:
- first token at the page: when the page's stream delivers a reply's first word, minus when the endpoint sent it
  (the endpoint keeps each reply's first-word send time; both clocks are this machine's);
- the vote request's time (POST, htmx, to its response), client-side;
- votes lost (acknowledged, not stored) or doubled (two judgments of one battle, or one key stored twice).
Baseline, in the same run: the same raters stream the same kind of reply directly from the endpoints (no SepLab in
between) for the same time; the ratio is SepLab's first-token p95 over the direct p95. The vote's baseline: the
battle page's GET each rater makes just before voting (same server, same load, no write), and the ratio of p95s.

The last line is machine-readable:
    raters=… battles=… first_token_p95_ms=… direct_p95_ms=… ratio=… vote_p95_ms=… page_p95_ms=… lost=… doubled=…
    errors=…
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.load_raters import free_port, percentile, positive, start_server  # noqa: E402
from bench.scratch import prepare_database  # noqa: E402

KEY = re.compile(rb'name="key" value="([0-9a-f]+)"')
# short model names: a reply of the judge server begins with its model's name, and a name of 3 characters or more
# in a reply refuses the vote (abuse.names_own_model: Chatbot Arena's rule); the systems are called red and blue
MODELS = ("r1", "b2")
LABELS = {"r1": "red", "b2": "blue"}


@dataclass
class Figures:
    """What one process of simulated raters saw."""

    first: list[tuple[str, str, float]] = field(default_factory=list)  # (model, prompt, arrival epoch)
    vote_ms: list[float] = field(default_factory=list)
    page_ms: list[float] = field(default_factory=list)  # the battle page's GET (htmx) before the vote: no write
    acknowledged: list[tuple[int, str]] = field(default_factory=list)  # (battle, vote key)
    battles: int = 0
    failed: int = 0
    errors: Counter = field(default_factory=Counter)


def read_events(conn: http.client.HTTPConnection, path: str, prompt: str, figures: Figures, lock) -> str:
    """One reply's server-sent events to their end; the first word's arrival kept. Returns the last event's kind."""
    conn.request("GET", path, headers={"Accept": "text/event-stream"})
    response = conn.getresponse()
    if response.status != 200:
        response.read()
        return f"status {response.status}"
    kind, first = "", True
    while True:
        line = response.readline()
        if not line:
            return kind or "closed"
        line = line.rstrip(b"\n")
        if line.startswith(b"event: "):
            kind = line[7:].decode()
        elif line.startswith(b"data: "):
            if kind in ("delta", "text") and first:
                data = json.loads(line[6:])
                if data:
                    at = time.time()
                    first = False
                    with lock:
                        figures.first.append((data.split(" ", 1)[0].strip(), prompt, at))
            if kind in ("done", "failed"):
                response.read()
                return kind


def rater(base: str, path: str, deadline: float, think: tuple[float, float], seed: int, figures: Figures, lock):
    host = urlsplit(base).netloc
    rng = random.Random(seed)
    conn = http.client.HTTPConnection(host, timeout=60)
    streams = [http.client.HTTPConnection(host, timeout=60) for _ in range(2)]
    n = 0
    time.sleep(rng.uniform(0, think[1]))  # raters arrive over a few seconds
    while time.time() < deadline:
        n += 1
        # [[say-name]]: the reply begins with its model's name (the page's first word tells which endpoint sent it)
        prompt = f"Bench prompt {seed}-{n}: tell me about item {rng.randint(0, 10**6)}. [[say-name]]"
        try:
            body = urlencode({"prompt": prompt}).encode()
            conn.request("POST", f"{path}arena/", body, {"Content-Type": "application/x-www-form-urlencoded"})
            response = conn.getresponse()
            response.read()
            location = response.getheader("Location", "")
            if response.status != 302 or "/arena/" not in location:
                figures.errors[f"start {response.status}"] += 1
                time.sleep(1)
                continue
            battle_path = urlsplit(location).path
            battle = int(battle_path.rstrip("/").rsplit("/", 1)[1])
            ends: list[str] = []

            def follow(c, side: str, into: list = ends, at: str = battle_path, said: str = prompt) -> None:
                into.append(read_events(c, f"{at}stream/{side}/", said, figures, lock))

            threads = [
                threading.Thread(target=follow, args=pair) for pair in zip(streams, ("left", "right"), strict=True)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            with lock:
                figures.battles += 1
            asked = time.perf_counter()
            conn.request("GET", battle_path, headers={"HX-Request": "true"})
            response = conn.getresponse()
            page = response.read()
            with lock:
                figures.page_ms.append((time.perf_counter() - asked) * 1000)
            found = KEY.search(page)
            if "failed" in ends or found is None:
                with lock:
                    figures.failed += 1 if "failed" in ends else 0
                    if found is None and "failed" not in ends:
                        figures.errors[f"no vote form ({', '.join(ends)})"] += 1
                continue
            time.sleep(rng.uniform(*think))
            key = found.group(1).decode()
            vote = urlencode(
                {"pair": battle, "key": key, "client_ms": "1000", "choice": rng.choice(["first", "second", "tie"])}
            ).encode()
            sent = time.perf_counter()
            conn.request(
                "POST",
                f"{battle_path}vote/",
                vote,
                {"Content-Type": "application/x-www-form-urlencoded", "HX-Request": "true"},
            )
            response = conn.getresponse()
            page = response.read()
            took = (time.perf_counter() - sent) * 1000
            with lock:
                figures.vote_ms.append(took)
                if response.status == 200 and b'data-testid="revealed"' in page:
                    figures.acknowledged.append((battle, key))
                else:
                    figures.errors[f"vote {response.status}"] += 1
        except (OSError, http.client.HTTPException, ValueError) as exc:
            with lock:
                figures.errors[type(exc).__name__] += 1
            conn.close()
            for c in streams:
                c.close()
            time.sleep(0.5)


def direct(endpoint: str, model: str, deadline: float, think: tuple[float, float], seed: int, figures, lock):
    """The baseline: the same kind of reply streamed straight from the endpoint, no SepLab in between."""
    rng = random.Random(seed)
    parts = urlsplit(endpoint)
    time.sleep(rng.uniform(0, think[1]))
    n = 0
    while time.time() < deadline:
        n += 1
        prompt = f"Direct prompt {seed}-{n}: tell me about item {rng.randint(0, 10**6)}. [[say-name]]"
        conn = http.client.HTTPConnection(parts.netloc, timeout=60)
        body = {"model": model, "messages": [{"role": "user", "content": prompt}], "stream": True}
        try:
            conn.request(
                "POST", f"{parts.path}/chat/completions", json.dumps(body), {"Content-Type": "application/json"}
            )
            response = conn.getresponse()
            first = True
            while line := response.readline():
                if first and line.startswith(b"data: ") and b'"content":"' in line.replace(b": ", b":"):
                    chunk = json.loads(line[6:])
                    if chunk["choices"] and chunk["choices"][0]["delta"].get("content"):
                        with lock:
                            figures.first.append((model, prompt, time.time()))
                        first = False
        except (OSError, http.client.HTTPException) as exc:
            with lock:
                figures.errors[type(exc).__name__] += 1
        finally:
            conn.close()
        with lock:
            figures.battles += 1
        time.sleep(rng.uniform(*think))


def run_process(kind: str, targets: list[tuple[str, str, int]], deadline: float, think: tuple[float, float]) -> Figures:
    figures, lock = Figures(), threading.Lock()
    if kind == "arena":
        threads = [
            threading.Thread(target=rater, args=(base, path, deadline, think, seed, figures, lock), daemon=True)
            for base, path, seed in targets
        ]
    else:
        threads = [
            threading.Thread(
                target=direct, args=(base, MODELS[seed % 2], deadline, think, seed, figures, lock), daemon=True
            )
            for base, _, seed in targets
        ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(deadline - time.time(), 0) + 90)
    return figures


def run(kind: str, targets: list[tuple[str, str, int]], seconds: float, think, processes: int) -> Figures:
    deadline = time.time() + seconds
    chunks = [targets[i::processes] for i in range(processes) if targets[i::processes]]
    with ProcessPoolExecutor(len(chunks)) as pool:
        results = [f.result() for f in [pool.submit(run_process, kind, c, deadline, think) for c in chunks]]
    merged = Figures()
    for r in results:
        merged.first += r.first
        merged.vote_ms += r.vote_ms
        merged.page_ms += r.page_ms
        merged.acknowledged += r.acknowledged
        merged.battles += r.battles
        merged.failed += r.failed
        merged.errors += r.errors
    return merged


def sent_times(endpoints: list[str]) -> dict[tuple[str, str], float]:
    """(model, prompt) -> when the endpoint sent the reply's first word."""
    found = {}
    for url in endpoints:
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.netloc, timeout=30)
        conn.request("GET", f"{parts.path}/stream-log")
        for row in json.loads(conn.getresponse().read())["first_sent"]:
            found[(row["model"], row["prompt"])] = row["sent"]
        conn.close()
    return found


def delays(figures: Figures, sent: dict[tuple[str, str], float]) -> tuple[list[float], int]:
    """Milliseconds from the endpoint's first word to its arrival, and how many arrivals had no send time."""
    out, unmatched = [], 0
    for model, prompt, at in figures.first:
        when = sent.get((model, prompt))
        if when is None:
            unmatched += 1
        else:
            out.append((at - when) * 1000)
    return out, unmatched


def setup_arena(raters: int, endpoints: list[str]) -> list[str]:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from annotation.arena import setup
    from annotation.models import Arena
    from annotation.studies import enrolment

    call_command("migrate", verbosity=0)
    call_command("collectstatic", "--noinput", verbosity=0)
    owner = get_user_model().objects.create_user("arena-owner")
    study = setup.do_create_arena(
        owner,
        "arena-load",
        [setup.SystemSpec(LABELS[m], m, url) for m, url in zip(MODELS, endpoints, strict=True)],
        samples=0,  # no background samples: no worker runs here (the streams are what is measured)
        endpoint_fields={"api_key_env": "", "request_budget": 10**6, "max_concurrency": 64, "timeout_seconds": 30},
    )
    # every simulated rater is one network (127.0.0.1): the per-network vote limit would refuse most votes
    Arena.objects.filter(study=study).update(votes_per_rater_hour=10_000, votes_per_network_hour=1_000_000)
    return [enrolment.do_create_rater_link(study, f"arena-{n}").link_path() for n in range(raters)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--raters", type=positive(int), default=100)
    parser.add_argument("--seconds", type=positive(float), default=30)
    parser.add_argument("--database", choices=["postgres", "sqlite"], default="sqlite")
    parser.add_argument("--rate", type=positive(float), default=20.0, help="words a second each endpoint streams")
    parser.add_argument("--think", default="1,3", help="seconds a rater reads before voting, uniform between")
    parser.add_argument("--workers", type=positive(int), default=3)
    parser.add_argument("--threads", type=positive(int), default=120)
    parser.add_argument("--client-processes", type=positive(int), default=4)
    parser.add_argument(
        "--conn-max-age",
        type=int,
        default=None,
        help="DB_CONN_MAX_AGE (default: 60 on SQLite and behind PgBouncer, else 0)",
    )
    parser.add_argument(
        "--pgbouncer",
        type=positive(int),
        default=None,
        metavar="POOL",
        help="PostgreSQL only: the servers reach it through PgBouncer in transaction pooling with POOL server "
        "connections (the deployment's way: bench/cluster.py), each thread keeping its client connection",
    )
    args = parser.parse_args()
    think = tuple(float(x) for x in args.think.split(","))
    if args.pgbouncer and args.database != "postgres":
        parser.error("--pgbouncer needs --database postgres")

    workdir = Path(tempfile.mkdtemp(prefix="seplab-arena-"))
    ports = [free_port(), free_port()]
    judges = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.judge_server", "--port", str(p), "--stream-rate", str(args.rate)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for p in ports
    ]
    endpoints = [f"http://127.0.0.1:{p}/v1" for p in ports]
    env = {
        **os.environ,
        "DEBUG": "0",
        "SECRET_KEY": secrets.token_urlsafe(50),
        "ALLOWED_HOSTS": "127.0.0.1",
        "DATABASE_URL": prepare_database(args.database, workdir, "arena"),
        "STATIC_ROOT": str(workdir / "static"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        # a thread keeps its connection for a minute; with hundreds of threads (two streams a rater) PostgreSQL's
        # 100 connections run out, so there each request connects anew (--conn-max-age to change)
        "DB_CONN_MAX_AGE": str(
            args.conn_max_age
            if args.conn_max_age is not None
            else (60 if args.database == "sqlite" or args.pgbouncer else 0)
        ),
        "SEPLAB_JUDGE_PRIVATE_HOSTS": "127.0.0.1",  # the local endpoints
        # the streams' leases are shared by the workers through Redis (a cache of each process's own would let a
        # reconnection on another worker ask the endpoint a second time); a prefix of this run's own
        "REDIS_URL": os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0",
        "CACHE_KEY_PREFIX": f"arena-load-{secrets.token_hex(4)}",
    }
    os.environ.update(env)
    paths = setup_arena(args.raters, endpoints)
    pooler = None
    if args.pgbouncer:  # the servers' connections go through PgBouncer; this process's (setup, counts) straight in
        from bench.cluster_deployment import start_pgbouncer

        database = urlsplit(env["DATABASE_URL"]).path.lstrip("/")
        pool_port = free_port()
        pooler = start_pgbouncer(workdir, database, pool_port, args.pgbouncer)
        env = {
            **env,
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:{pool_port}/{database}",
            "DB_TRANSACTION_POOLER": "1",
        }
    port = free_port()
    server = start_server(env, port, args.workers, args.threads)
    base = f"http://127.0.0.1:{port}"
    try:
        warm = http.client.HTTPConnection(f"127.0.0.1:{port}", timeout=30)
        for path in paths[: 4 * args.workers]:  # first requests compile templates: not part of the figures
            warm.request("GET", f"{path}arena/")
            warm.getresponse().read()
        warm.close()
        arena = run("arena", [(base, p, n) for n, p in enumerate(paths)], args.seconds, think, args.client_processes)
        baseline = run(
            "direct",
            [(endpoints[n % 2], "", n) for n in range(args.raters)],
            args.seconds,
            think,
            args.client_processes,
        )
        sent = sent_times(endpoints)
    finally:
        server.terminate()
        server.wait(timeout=30)
        for judge in judges:
            judge.terminate()
        if pooler is not None:
            pooler.terminate()
            pooler.wait(timeout=30)

    from annotation.models import Judgment

    stored = Counter(
        Judgment.objects.filter(study__name="arena-load").values_list("pair__item__battle", "idempotency_key")
    )
    per_battle = Counter(battle for battle, _ in stored.elements())
    lost = sum(1 for battle, key in arena.acknowledged if (battle, key) not in stored)
    doubled = sum(n - 1 for n in per_battle.values() if n > 1) + sum(
        n - 1 for n in Counter(arena.acknowledged).values() if n > 1
    )
    page_ms, unmatched = delays(arena, sent)
    pooled = f" behind PgBouncer ({args.pgbouncer})" if args.pgbouncer else ""
    direct_ms, direct_unmatched = delays(baseline, sent)
    p95, d95 = percentile(page_ms, 95), percentile(direct_ms, 95)
    vote95 = percentile(arena.vote_ms, 95)
    errors = sum(arena.errors.values())
    print(
        f"{args.raters} raters, {args.database}{pooled}, gunicorn {args.workers}x{args.threads} threads, two endpoints "
        f"at {args.rate:g} words/s, think {think[0]:g}-{think[1]:g} s, {args.seconds:g} s: {arena.battles} battles "
        f"({arena.battles / args.seconds:.1f}/s, {arena.failed} failed), {len(arena.vote_ms)} votes, "
        f"{len(arena.acknowledged)} acknowledged, {sum(stored.values())} stored"
    )
    print(
        f"first token at the page after the endpoint sent it, ms: p50 {percentile(page_ms, 50):.1f}  p95 {p95:.1f}  "
        f"p99 {percentile(page_ms, 99):.1f}  ({len(page_ms)} replies, {unmatched} unmatched)"
    )
    print(
        f"baseline, straight from the endpoint, ms: p50 {percentile(direct_ms, 50):.1f}  p95 {d95:.1f}  "
        f"({len(direct_ms)} replies, {direct_unmatched} unmatched); SepLab / direct p95: {p95 / d95:.1f}x"
    )
    page95 = percentile(arena.page_ms, 95)
    print(
        f"vote ms: p50 {percentile(arena.vote_ms, 50):.1f}  p95 {vote95:.1f}  p99 {percentile(arena.vote_ms, 99):.1f}"
        f"; baseline, the battle page's GET before it (same raters, same moment, no write): p50 "
        f"{percentile(arena.page_ms, 50):.1f}  p95 {page95:.1f}; vote / page p95: {vote95 / page95:.1f}x"
    )
    if arena.errors:
        print("errors by kind: " + ", ".join(f"{k}: {n}" for k, n in arena.errors.most_common()))
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"load average (1, 5, 15 min) at the end: {load} on {os.cpu_count()} cores")
    print(
        f"raters={args.raters} battles={arena.battles} first_token_p95_ms={p95:.1f} direct_p95_ms={d95:.1f} "
        f"ratio={p95 / d95:.1f} vote_p95_ms={vote95:.1f} page_p95_ms={page95:.1f} lost={lost} doubled={doubled} "
        f"errors={errors}"
    )


if __name__ == "__main__":
    main()
