"""The call graph of one report refresh: which of the project's modules and rooms it visits, and how often it climbs
back into a module it is already inside.

The demo study (load_demo: 20 items, five simulated people and a judge) on a scratch SQLite database; the report is
refreshed once to warm the per-process caches, then again under ``sys.setprofile``, which sees every Python call and
return. Counted:
- modules: the project's modules (annotation, selection, analytics, config; not tests) any call entered;
- rooms: those modules' rooms as ARCHITECTURE.md draws them (annotation's ground floor, its models package and each
  wing; each app's top-level modules; each app's sub-packages such as analytics/report and analytics/core);
- calls between modules: distinct (caller module, callee module) pairs;
- climbs back: calls into a module that is already on the call stack below the caller (A -> B -> A), the pattern
  of a module that calls out and is called back;
- returns to a module left before: every move of control (a call or a return) into a module it had left earlier.

    python bench/report_callgraph.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.scratch import setup_scratch_database  # noqa: E402

APPS = ("annotation", "selection", "analytics", "config")


def module_of(filename: str, cache: dict[str, str | None] = {}) -> str | None:  # noqa: B006 (a deliberate cache)
    if filename not in cache:
        path = Path(filename)
        inside = path.is_relative_to(ROOT) and path.suffix == ".py"
        parts = path.relative_to(ROOT).with_suffix("").parts if inside else ()
        cache[filename] = (
            ".".join(parts).removesuffix(".__init__") if parts and parts[0] in APPS and len(parts) > 1 else None
        )
    return cache[filename]


def room_of(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "annotation" and len(parts) > 2:
        return f"annotation/{parts[1]}"
    if parts[0] == "annotation":
        return "annotation (ground floor)"
    return f"{parts[0]}/{parts[1]}" if len(parts) > 2 else parts[0]


def measure(refresh) -> dict:
    stack: list[str | None] = []
    visited: Counter[str] = Counter()
    edges: Counter[tuple[str, str]] = Counter()
    climbs: Counter[tuple[str, str]] = Counter()
    walk: dict = {"at": None, "left": set(), "back": 0}

    def move(module: str | None) -> None:  # control moves to a project module (calls and returns alike)
        if module is None or module == walk["at"]:
            return
        if walk["at"] is not None:
            walk["left"].add(walk["at"])
        if module in walk["left"]:
            walk["back"] += 1
        walk["at"] = module

    def profile(frame, event, arg) -> None:
        if event == "call":
            module = module_of(frame.f_code.co_filename)
            if module is not None:
                visited[module] += 1
                caller = next((m for m in reversed(stack) if m is not None), None)
                if caller is not None and caller != module:
                    edges[(caller, module)] += 1
                    if module in stack:
                        climbs[(caller, module)] += 1
            stack.append(module)
            move(module)
        elif event == "return" and stack:
            stack.pop()
            move(next((m for m in reversed(stack) if m is not None), None))

    sys.setprofile(profile)
    try:
        refresh()
    finally:
        sys.setprofile(None)
    return {
        "modules": len(visited),
        "rooms": sorted({room_of(m) for m in visited}),
        "calls_between_modules": len(edges),
        "climbs_back": sum(climbs.values()),
        "climbs_back_by_pair": sorted(f"{a} -> {b}: {n}" for (a, b), n in climbs.items()),
        "returns_to_a_module_left_before": walk["back"],
        "module_list": sorted(visited),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    setup_scratch_database("callgraph")
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from analytics import stored
    from analytics.populations import Population
    from annotation.models import Study

    owner = get_user_model().objects.create_user("bench")
    call_command("load_demo", "--username", owner.username, stdout=StringIO())
    study = Study.objects.get(name="demo")
    stored.do_refresh(study, Population())  # warm: per-process caches
    figures = measure(lambda: stored.do_refresh(study, Population()))
    if args.json:
        print(json.dumps(figures, indent=1))
        return
    print(f"modules visited: {figures['modules']}")
    print(f"rooms visited: {len(figures['rooms'])} ({', '.join(figures['rooms'])})")
    print(f"calls between modules: {figures['calls_between_modules']} distinct pairs")
    print(f"climbs back: {figures['climbs_back']} ({'; '.join(figures['climbs_back_by_pair']) or 'none'})")
    print(f"returns to a module left before: {figures['returns_to_a_module_left_before']}")


if __name__ == "__main__":
    main()
