"""The simulated raters of the load benches (bench/load_raters.py, bench/fault_raters.py, bench/cluster_run.py): a
rater as a thread that starts assignments and answers their pairs over one keep-alive connection (or, with
``crowd``, arrives through an external link as a new worker for every assignment; or, ``bare``, GETs a bare view),
the processes that run them, and their merged figures."""

from __future__ import annotations

import http.client
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlencode, urlsplit

PAIR = re.compile(rb'name="pair" value="(\d+)"')
KEY = re.compile(rb'name="key" value="([0-9a-f]+)"')
TITLE = re.compile(rb"<h1[^>]*>([^<]*)</h1>")


class Rater(threading.Thread):
    def __init__(
        self,
        base: str,
        path: str,
        deadline: float,
        pace: str,
        budget: Budget,
        seed: int,
        arrive: float = 0.0,
        htmx: bool = False,
        bare: bool = False,
        think: tuple[float, float] = (1.0, 3.0),
        further: bool = False,
        crowd: bool = False,
    ):
        super().__init__(daemon=True)
        self.further = further
        self.crowd = crowd  # a new crowd worker (a new session, id and address) for every assignment
        self.seed = seed
        self.arrivals = 0
        self.think = think  # seconds a "human"-paced rater spends on a pair, uniform between the two
        self.bare = bare  # the framework floor: GET the same path again and again
        self.arrive = arrive  # when this rater opens the study (people do not all arrive in the same millisecond)
        self.host = urlsplit(base).netloc
        self.path = path.rstrip("/")
        self.deadline, self.pace, self.budget, self.htmx = deadline, pace, budget, htmx
        self.rng = random.Random(seed)
        self.next_ms: list[tuple[float, float]] = []  # (wall-clock time sent, milliseconds)
        self.submit_ms: list[tuple[float, float]] = []
        self.sent: list[float] = []  # wall-clock time of every request
        self.acknowledged: list[str] = []
        self.errors = 0
        self.error_kinds: Counter = Counter()
        self.requests = 0
        self.conn = http.client.HTTPConnection(self.host, timeout=30)

    def request(self, method: str, path: str, body: dict | None = None, htmx: bool = False, forwarded_for: str = ""):
        data = urlencode(body).encode() if body is not None else None
        headers = {"Content-Type": "application/x-www-form-urlencoded"} if data else {}
        if forwarded_for:  # what the trusted proxy in front of the app (BEHIND_PROXY=1) would append
            headers["X-Forwarded-For"] = forwarded_for
        if htmx:  # what htmx sends with a swap request
            headers.update({"HX-Request": "true", "HX-Target": "rating"})
        for attempt in range(2):
            try:
                started = time.perf_counter()
                self.sent.append(time.time())
                self.conn.request(method, path, body=data, headers=headers)
                response = self.conn.getresponse()
                payload = response.read()
                self.requests += 1
                return response.status, response.getheader("Location"), payload, (time.perf_counter() - started) * 1e3
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = http.client.HTTPConnection(self.host, timeout=30)
                if attempt:
                    raise
        raise RuntimeError("unreachable")

    def run(self) -> None:
        time.sleep(max(0.0, self.arrive - time.time()))
        if self.bare:
            return self.run_bare()
        assignment = None
        page: bytes | None = None
        while time.time() < self.deadline and self.budget.take():
            try:
                if assignment is None and self.crowd:
                    status, location, body, _ = self.arrive_as_new_worker()
                    if status != 302 or not location or "/a/" not in location:
                        self.errors += 1
                        title = TITLE.search(body)  # the page's own words: which refusal it was
                        self.error_kinds[f"entry {status} {title.group(1).decode() if title else ''}"] += 1
                        continue
                    assignment, page = urlsplit(location).path, None
                if assignment is None:
                    status, location, _, _ = self.request("POST", f"{self.path}/start/", {})
                    if status != 302 or not location:
                        if status >= 400:
                            self.errors += 1
                            self.error_kinds[f"start {status}"] += 1
                            continue
                        return  # nothing left for this rater
                    assignment = location
                    page = None
                if page is None:  # a new assignment, or the no-JavaScript client after a submit
                    status, _, page, ms = self.request("GET", assignment)
                    if status != 200:
                        self.errors += 1
                        self.error_kinds[f"next {status}"] += 1
                        page = None
                        continue
                    self.next_ms.append((time.time() - ms / 1e3, ms))
                pair, key = PAIR.search(page), KEY.search(page)
                if pair is None:  # assignment complete: start the next one
                    assignment = None
                    continue
                if self.pace == "human":
                    time.sleep(self.rng.uniform(*self.think))
                fields = {
                    "pair": pair.group(1).decode(),
                    "key": cast(re.Match[bytes], key).group(1).decode(),  # a page with a pair has its key
                    "choice": self.rng.choice(["first", "second", "tie"]),
                }
                if self.further:  # what a rater of a study with further questions also sends
                    fields.update(
                        {
                            "q-harmless-choice": self.rng.choice(["first", "second", "tie"]),
                            "q-why-text": "It answers the question.",
                        }
                    )
                status, _, body, ms = self.request("POST", assignment.rstrip("/") + "/submit/", fields, self.htmx)
                if status == (200 if self.htmx else 302):
                    self.submit_ms.append((time.time() - ms / 1e3, ms))
                    self.acknowledged.append(fields["key"])
                    page = body if self.htmx else None  # htmx: the response is the next pair
                else:
                    self.errors += 1
                    self.error_kinds[f"submit {status}"] += 1
                    page = None
            except Exception as exc:  # a failed request is an error in the figures, not a crash of the run
                self.errors += 1
                self.error_kinds[type(exc).__name__] += 1
                time.sleep(0.2)  # the server may be restarting: do not spin

    def arrive_as_new_worker(self):
        """A worker the site has just sent: the external link with a worker id, session and HIT of their own, from
        an address of their own (a documentation range; the proxy's X-Forwarded-For)."""
        self.arrivals += 1
        worker = f"W{self.seed}x{self.arrivals}"
        n = self.seed * 1000 + self.arrivals
        address = f"198.{18 + n // 65536 % 2}.{n // 256 % 256}.{n % 256}"
        query = urlencode(
            {
                "workerId": worker,
                "assignmentId": f"A{worker}",
                "hitId": "HLOAD",
                "turkSubmitTo": "https://www.mturk.com",
            }
        )
        return self.request("GET", f"{self.path}/?{query}", forwarded_for=address)

    def run_bare(self) -> None:
        while time.time() < self.deadline and self.budget.take():
            try:
                status, _, _, ms = self.request("GET", self.path + "/")
                if status == 200:
                    self.next_ms.append((time.time() - ms / 1e3, ms))
                else:
                    self.errors += 1
                    self.error_kinds[f"bare {status}"] += 1
            except Exception as exc:
                self.errors += 1
                self.error_kinds[type(exc).__name__] += 1
                time.sleep(0.2)
            if self.pace == "human":
                time.sleep(self.rng.uniform(1.0, 3.0))


class Budget:
    """A global cap on loop iterations, so the run is bounded in requests as well as time."""

    def __init__(self, limit: int):
        self.left, self.lock = limit, threading.Lock()

    def take(self) -> bool:
        with self.lock:
            self.left -= 1
            return self.left >= 0


@dataclass
class ClientResult:
    next_ms: list[tuple[float, float]]
    submit_ms: list[tuple[float, float]]
    sent: list[float]
    acknowledged: list[str]
    errors: int
    error_kinds: Counter
    requests: int

    @classmethod
    def merged(cls, parts: list) -> ClientResult:
        """One result from several raters' or client processes' (anything with these fields)."""
        return cls(
            [v for r in parts for v in r.next_ms],
            [v for r in parts for v in r.submit_ms],
            [t for r in parts for t in r.sent],
            [k for r in parts for k in r.acknowledged],
            sum(r.errors for r in parts),
            sum((r.error_kinds for r in parts), Counter()),
            sum(r.requests for r in parts),
        )


def run_chunk(
    base: str,
    paths: list[str],
    deadline: float,
    pace: str,
    budget: int,
    first_seed: int,
    ramp: float = 0.0,
    htmx: bool = False,
    bare: bool = False,
    think: tuple[float, float] = (1.0, 3.0),
    further: bool = False,
    crowd: bool = False,
) -> ClientResult:
    """One client process: its raters as threads (several processes keep the client's own GIL out of
    the measured latencies). Raters arrive at uniformly random moments over the first ``ramp`` seconds."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # a socket per rater
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 2 * len(paths) + 256)), hard))
    shared = Budget(budget)
    arrivals = random.Random(first_seed)
    start = time.time()
    raters = [
        Rater(
            base,
            p,
            deadline,
            pace,
            shared,
            first_seed + n,
            start + arrivals.uniform(0, ramp),
            htmx,
            bare,
            think,
            further,
            crowd,
        )
        for n, p in enumerate(paths)
    ]
    for r in raters:
        r.start()
    for r in raters:
        r.join(max(1.0, deadline - time.time()) + 60)
    return ClientResult.merged(raters)


def run_clients(
    base: str,
    paths: list[str],
    seconds: float,
    pace: str,
    max_requests: int,
    processes: int,
    ramp: float = 0.0,
    htmx: bool = False,
    bare: bool = False,
    further: bool = False,
    crowd: bool = False,
) -> ClientResult:
    from concurrent.futures import ProcessPoolExecutor

    deadline = time.time() + seconds
    chunks = [paths[i::processes] for i in range(processes) if paths[i::processes]]
    with ProcessPoolExecutor(len(chunks)) as pool:
        futures = [
            pool.submit(
                run_chunk,
                base,
                chunk,
                deadline,
                pace,
                max_requests // len(chunks),
                n * 100_000,
                ramp,
                htmx,
                bare,
                (1.0, 3.0),
                further,
                crowd,
            )
            for n, chunk in enumerate(chunks)
        ]
        results = [f.result() for f in futures]
    return ClientResult.merged(results)
