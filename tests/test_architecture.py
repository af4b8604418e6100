"""The house rules of ARCHITECTURE.md, executable. Source is parsed with ``ast``: no database, no Django.

Every import counts: module level, inside functions and methods, and under ``if TYPE_CHECKING:``. Relative imports
are resolved; ``from pkg import name`` imports ``pkg.name`` when that is a module, otherwise ``pkg``. Migrations are
never checked.

1. ``annotation`` is the bottom app: it imports neither ``selection`` nor ``analytics``.
2. ``selection`` does not import ``analytics``.
3. ``analytics`` reads selection's pure core (``selection.core.*``) and the few modules in ``ANALYTICS_MAY_READ``.
4. No circle of imports between project modules (importing a package means importing its ``__init__``).
5. Inside ``annotation``: the ground floor (modules directly in ``annotation/``, and the ``annotation/models/``
   package) imports no wing; a wing (sub-package listed in ``WINGS``, lowest first) imports the ground floor, itself
   and lower wings; ``templatetags`` and ``demo`` import any wing but ``views``; management commands are entry points
   and import anything. A top-level module named after a wing (say a new ``annotation/crowd.py``) counts as that
   wing; a module of the models package never does (``annotation/models/crowd.py`` is the ground floor).
6. Only the rating wing (``annotation/rating/``) creates ``Judgment`` rows or updates them (``Judgment.objects
   ….update(…)``); the live loop's decision travels back to it (``selection/live.Release.counted``).
7. Who may see what is decided in ``annotation/access.py`` only: no view looks an object up by id
   (``get_object_or_404``) or filters by ``request.user`` itself.
8. ARCHITECTURE.md's drawing names every module of the apps and ``config`` in its room, and nothing else; every file
   the pages (ARCHITECTURE.md, the READMEs, docs/) name exists.
9. A function that writes is named ``do_*`` (zulip's names: ``do_*`` changes state, ``check_*`` validates and
   raises, ``access_*`` decides who may). A function writes when its body (nested functions and lambdas included)
   calls an ORM write (``save``, ``delete``, ``bulk_create``, ``bulk_update``, ``get_or_create``,
   ``update_or_create``; ``create`` and ``update`` on a manager or a queryset, never ``dict.update``), runs SQL that
   inserts, updates or deletes, or calls a ``do_*`` function or a private function of its module that writes: the
   name climbs to every caller, and a private helper hides no write. The public functions and methods of the apps'
   modules are checked, except the entry points and Django's own names (``NAMED_ELSEWHERE``), the job bodies
   registered by dotted path, and the few writers ``NOT_DO`` lists with their reasons. No ``check_*`` or
   ``access_*`` function writes (reading under a row lock, ``select_for_update``, is reading).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict, deque
from collections.abc import Callable
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APPS = ("annotation", "selection", "analytics")
WINGS = ["exchange", "plan", "rating", "studies", "crowd", "judges", "generating", "arena", "views"]
ANALYTICS_MAY_READ = [  # besides selection.core.*; tighten as analytics stops needing them
    "selection.models",  # the stored runs and inclusion probabilities the reports weight by
    "selection.rating_sets",  # the one reader from judgments to rating sets; the budget planner's pilot outcomes
    "selection.services",  # loading a study's selection run, the one read path with its caching and checks
    "selection.strategies",  # the strategy names and designs a report labels and re-simulates
]
JUDGMENT_WRITES = {"create", "bulk_create", "update_or_create", "get_or_create", "update", "bulk_update"}


def module_file(name: str) -> Path | None:
    """The file of project module ``name`` (a package's ``__init__.py``), or None if it is not a project module."""
    if name.split(".")[0] not in (*APPS, "config"):
        return None
    base = ROOT.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def module_name(path: Path) -> str:  # annotation/rating/__init__.py -> annotation.rating
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files(*top: str) -> list[Path]:
    return sorted(p for t in top for p in (ROOT / t).rglob("*.py") if "migrations" not in p.relative_to(ROOT).parts)


def collect_imports(
    source: str, module: str, is_package: bool, is_module: Callable[[str], bool] = lambda n: module_file(n) is not None
) -> list[tuple[int, str]]:
    """(line, imported module) for every import anywhere in ``source``, the source of ``module``."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                child = f"{base}.{alias.name}"
                found.append((node.lineno, child if alias.name != "*" and is_module(child) else base))
    return list(dict.fromkeys(found))  # `from pkg import a, b` naming one module twice is one import


def project_imports(*top: str) -> list[tuple[str, int, str, str]]:
    """(file, line, importing module, imported module) for every .py file under ``top`` (migrations excluded)."""
    rows = []
    for path in source_files(*top):
        name = module_name(path)
        for line, imported in collect_imports(path.read_text(), name, path.name == "__init__.py"):
            rows.append((str(path.relative_to(ROOT)), line, name, imported))
    return rows


def offenders(rows, bad: Callable[[str, str], bool]) -> list[str]:
    return [f"{file}:{line} imports {imported}" for file, line, importer, imported in rows if bad(importer, imported)]


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_annotation_imports_neither_selection_nor_analytics():
    bad = offenders(project_imports("annotation"), lambda _, m: within(m, "selection") or within(m, "analytics"))
    assert not bad, "annotation is the bottom app; it must not import selection or analytics:\n" + "\n".join(bad)


def test_selection_does_not_import_analytics():
    bad = offenders(project_imports("selection"), lambda _, m: within(m, "analytics"))
    assert not bad, "selection must not import analytics:\n" + "\n".join(bad)


def test_analytics_reads_only_selections_pure_core_and_models():
    allowed = ["selection.core", *ANALYTICS_MAY_READ]
    bad = offenders(
        project_imports("analytics"), lambda _, m: within(m, "selection") and not any(within(m, a) for a in allowed)
    )
    assert not bad, f"analytics may read only {allowed} from selection:\n" + "\n".join(bad)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm; the components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component: list[str] = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def shortest_circle(graph: dict[str, set[str]], start: str, members: set[str]) -> list[str]:
    parent: dict[str, str | None] = {start: None}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for succ in sorted(graph[node] & members):
            if succ == start:
                path = [node]
                step = parent[node]
                while step is not None:
                    path.append(step)
                    step = parent[step]
                return [*reversed(path), start]
            if succ not in parent:
                parent[succ] = node
                queue.append(succ)
    return [start]


def test_no_module_import_circle_exists():
    graph, where = defaultdict(set), {}
    for file, line, importer, imported in project_imports(*APPS, "config"):
        if module_file(imported) is not None and imported != importer:
            graph[importer].add(imported)
            where.setdefault((importer, imported), f"{file}:{line}")
    circles = set()
    for component in strongly_connected(graph):
        for start in component:  # the shortest circle through each module of the tangle, each circle once
            circle = shortest_circle(graph, start, set(component))[:-1]
            first = circle.index(min(circle))
            circles.add(tuple(circle[first:] + circle[:first]))
    lines = [
        " -> ".join([*c, c[0]]) + "  (" + ", ".join(where[e] for e in zip(c, c[1:] + c[:1], strict=True)) + ")"
        for c in sorted(circles)
    ]
    assert not lines, f"{len(lines)} import circle(s) between project modules:\n" + "\n".join(lines)


def annotation_floor(module: str) -> str:
    """'ground', a wing's name, 'edge' (templatetags, demo) or 'entry' (management) for an annotation module."""
    parts = module.split(".")
    if len(parts) == 1:
        return "ground"
    return {"templatetags": "edge", "demo": "edge", "management": "entry"}.get(
        parts[1], parts[1] if parts[1] in WINGS else "ground"
    )


def may_import(floor: str, wing: str) -> bool:
    if floor in WINGS:
        return WINGS.index(wing) <= WINGS.index(floor)
    return floor == "entry" or (floor == "edge" and wing != "views")


def test_annotation_wings_import_only_downward():
    problems = [
        f"wing package annotation/{w}/ does not exist yet"
        for w in WINGS
        if not (ROOT / "annotation" / w / "__init__.py").is_file()
    ]
    for file, line, importer, imported in project_imports("annotation"):
        floor, wing = annotation_floor(importer), annotation_floor(imported)
        if within(imported, "annotation") and module_file(imported) is None:  # a stale path can't be placed
            problems.append(f"{file}:{line} imports {imported}, which is no module (moved? update the import)")
        elif within(imported, "annotation") and wing in WINGS and not may_import(floor, wing):
            where = f"the {floor} wing" if floor in WINGS else "the ground floor"
            problems.append(f"{file}:{line} imports {imported} (from {where} up into the {wing} wing)")
    assert annotation_floor("annotation.models.crowd") == "ground", "the models package is the ground floor"
    assert not problems, f"annotation's wings, lowest first, are {WINGS}:\n" + "\n".join(problems)


def judgment_writes(tree: ast.AST) -> list[int]:
    def is_judgment(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "Judgment") or (
            isinstance(node, ast.Attribute) and node.attr == "Judgment"
        )

    def rooted_in_judgment(node: ast.AST) -> bool:  # Judgment.objects.filter(...).exclude(...) ... down to Judgment
        while isinstance(node, ast.Attribute | ast.Call):
            node = node.func if isinstance(node, ast.Call) else node.value
            if is_judgment(node):
                return True
        return False

    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (
            is_judgment(node.func)
            or (
                isinstance(node.func, ast.Attribute)
                and node.func.attr in JUDGMENT_WRITES
                and rooted_in_judgment(node.func.value)
            )
        )
    ]


def test_only_the_rating_wing_writes_judgments():
    rating = ROOT / "annotation" / "rating"
    bad = [
        f"{path.relative_to(ROOT)}:{line} writes Judgment rows"
        for path in source_files(*APPS)
        if rating not in path.parents
        and "tests" not in path.relative_to(ROOT).parts
        and not path.name.startswith("test")
        for line in sorted(judgment_writes(ast.parse(path.read_text())))
    ]
    assert not bad, "only annotation/rating/ may write Judgment rows:\n" + "\n".join(bad)
    assert judgment_writes(
        ast.parse(
            "Judgment.objects.filter(x=1).exclude(y=2).update(z=3)\nJudgment(a=1)\nJudgment.objects.filter(x=1).count()"
        )
    ) == [1, 2]


def permission_decisions(tree: ast.AST) -> list[int]:
    def is_request_user(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "user"
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "request"
        ) or (
            isinstance(node, ast.Attribute)
            and node.attr == "user"
            and isinstance(node.value, ast.Name)
            and node.value.id == "request"
        )

    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
        if name == "get_object_or_404" or (
            name in ("filter", "get", "exclude") and any(is_request_user(k.value) for k in node.keywords)
        ):
            lines.append(node.lineno)
    return lines


def test_every_permission_decision_is_in_access():
    access = ROOT / "annotation" / "access.py"
    bad = [
        f"{path.relative_to(ROOT)}:{line} decides who may see something"
        for path in source_files(*APPS)
        if path != access
        for line in permission_decisions(ast.parse(path.read_text()))
    ]
    assert not bad, "ask annotation/access.py (an access_* function) instead:\n" + "\n".join(bad)
    assert permission_decisions(ast.parse("get_object_or_404(Study, pk=1)\nX.objects.filter(owner=request.user)")) == [
        1,
        2,
    ]


def test_the_import_collector_sees_relative_nested_and_submodule_imports():
    source = (
        "from .. import models\nfrom .votes import cast\nfrom selection import core\n"
        "def f():\n    import analytics.core.ppi\n    from . import *\n"
    )
    known = {"annotation.models", "selection.core"}.__contains__
    assert collect_imports(source, "annotation.rating.store", False, known) == [
        (1, "annotation.models"),
        (2, "annotation.rating.votes"),
        (3, "selection.core"),
        (5, "analytics.core.ppi"),
        (6, "annotation.rating"),
    ]
    assert collect_imports("from . import models\n", "annotation", True) == [(1, "annotation.models")]
    real = [m for _, _, importer, m in project_imports("annotation") if within(importer, "annotation.models")]
    assert real and all(isinstance(m, str) and m for m in real), "no imports found in annotation/models/"


# ----------------------------------------------------------------------------------------------------------
# Names: a function that writes says so (``do_*``)

# Where the names are not checked: entry points, like commands (a request or a command line becomes calls there),
# Django's own names (a model's ``save`` and ``clean``, ``AppConfig.ready``, template tags), the demo's population
# and the url lists.
NAMED_ELSEWHERE = (
    "*/migrations/*",
    "*/management/*",
    "annotation/views/*",
    "selection/views.py",
    "analytics/views.py",
    "analytics/review_views.py",
    "analytics/curation_views.py",
    "annotation/models/*",
    "*/models.py",
    "*/templatetags/*",
    "annotation/demo/*",
    "*/apps.py",
    "*/urls.py",
)
# The writers that keep their names (besides the job bodies registered by dotted path, ``registered_job_bodies``:
# entry points, like views -- the worker calls them, nothing else does).
NOT_DO = {
    ("annotation/endpoint_runs.py", "EndpointRun.job_body"): "the job body of every endpoint run (``judge_job``, "
    "``generate_job``): an entry point, like a view",
    ("annotation/endpoint_runs.py", "EndpointRun.run_as_job"): "the job body's run, only job_body calls it",
    ("annotation/jobs.py", "start"): "the job room's own: every job is created here (``jobs.start``)",
    ("annotation/jobs.py", "end"): "the job room's own: the one writer of a job's end (``jobs.end``)",
    ("annotation/jobs.py", "wait_for_database"): "the job room's own: the heartbeat that waits out an outage",
    ("annotation/jobs.py", "Progress.__call__"): "the job room's own: a body's progress is the job's heartbeat",
    ("annotation/jobs.py", "Progress.say"): "the job room's own: a body's message is the job's heartbeat",
    ("annotation/jobs.py", "run_job"): "the job room's own: the one task every job runs as",
    ("annotation/worker.py", "SupervisedWorker.run_task"): "django-tasks' method, overridden: its name is the base's",
    ("annotation/worker.py", "SupervisedWorker.run"): "django-tasks' worker loop, overridden (it claims the fairest "
    "task): its name is the base's",
    ("annotation/worker.py", "Beat.beat"): "the worker's heartbeat (its sign of life, its job's, the stale sweep)",
    ("annotation/worker.py", "Beat.stop"): "the worker's heartbeat ends: its sign of life is removed",
    ("selection/live.py", "replay"): "reads the live loop's state for the pages; a run stored before schedules were "
    "stores its schedule once, on first use (what its stored tree implies: a cache, never a decision)",
}
# An ORM write on any receiver but a cache; ``create`` and ``update`` only on a manager or a queryset, where they are
# never ``dict.update``, ``Counter.update`` or an API client's ``create``; SQL that inserts, updates or deletes
# (``cursor.execute``, a ``CompiledUpdate`` called), never a ``SELECT ... FOR UPDATE``.
ORM_WRITES = {"save", "delete", "bulk_create", "bulk_update", "get_or_create", "update_or_create"}
JOB_WRITES = {"jobs.start", "jobs.end"}  # exempt themselves, but whoever creates or ends a job through them writes
QUERYSET_WRITES = {"create", "update"}
MANAGERS = {"objects", "_default_manager", "_base_manager"}
QUERYSET_METHODS = {"all", "filter", "exclude", "select_for_update", "select_related", "prefetch_related", "order_by"}


def named_elsewhere(file: str) -> bool:
    return any(fnmatch(file, pattern) for pattern in NAMED_ELSEWHERE)


def related_managers(*top: str) -> set[str]:
    """The related managers' names (``study.items``, ``endpoint.calls``): every ``related_name`` of a foreign key
    or many-to-many field of the apps' models, and each many-to-many field; Django's ``<model>_set`` besides."""
    names: set[str] = set()
    for path in source_files(*top):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                field = node.value.func
                if isinstance(field, ast.Attribute | ast.Name) and ast.unparse(field).endswith("ManyToManyField"):
                    names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith(("ForeignKey", "ManyToManyField")):
                names |= {
                    k.value.value
                    for k in node.keywords
                    if k.arg == "related_name"
                    and isinstance(k.value, ast.Constant)
                    and isinstance(k.value.value, str)
                    and not k.value.value.endswith("+")
                }
    return names


def is_queryset(node: ast.AST, related: set[str], bound: set[str]) -> bool:
    """Whether an expression is a manager or a queryset: ``objects`` (or the default manager), a related manager,
    a queryset's ``filter(...)`` (``exclude``, ``all``, ``select_for_update`` ...), or a name bound to one."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Attribute) and node.func.attr in QUERYSET_METHODS
    if isinstance(node, ast.Attribute):
        return node.attr in MANAGERS or node.attr in related or node.attr.endswith("_set")
    return isinstance(node, ast.Name) and node.id in bound


def is_cache(node: ast.AST) -> bool:
    return re.search(r"\bcaches?\b|_cache\b", ast.unparse(node)) is not None


def is_write_sql(node: ast.AST) -> bool:
    """Whether an expression is SQL text (a string, an f-string) that inserts, updates or deletes."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr):
        text = "".join(str(v.value) if isinstance(v, ast.Constant) else "?" for v in node.values)
    else:
        return False
    return re.match(r"\s*(INSERT|UPDATE|DELETE)\b", text, re.IGNORECASE) is not None


def module_sql_writers(tree: ast.Module) -> set[str]:
    """The module-level names that write when executed or called: SQL text that writes (``_COUNT_ANSWER_SQL``) and
    compiled updates (``_MARK_SHOWN = CompiledUpdate(...)``)."""
    return {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        and (
            is_write_sql(node.value)
            or (isinstance(node.value, ast.Call) and ast.unparse(node.value.func).endswith("CompiledUpdate"))
        )
        for target in node.targets
        if isinstance(target, ast.Name)
    }


def direct_writes(function: ast.AST, related: set[str], sql: frozenset[str] = frozenset()) -> list[tuple[int, str]]:
    """(line, what) of each write in a function's body, nested functions and lambdas included: an ORM write, SQL
    that writes (``sql``: the module's names for it), or a ``do_*`` function called (or handed on to be called)."""
    nodes = list(ast.walk(function))
    bound: set[str] = set()  # the names bound to a queryset (``stale = Assignment.objects.filter(...)``)
    grown = True
    while grown:
        grown = False
        for node in nodes:
            if isinstance(node, ast.Assign | ast.AnnAssign | ast.NamedExpr) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                new = {t.id for t in targets if isinstance(t, ast.Name)} - bound
                if new and is_queryset(node.value, related, bound):
                    bound |= new
                    grown = True
    found: list[tuple[int, str]] = []
    for node in nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            method, receiver = node.func.attr, node.func.value
            if (method in ORM_WRITES and not is_cache(receiver)) or (
                method in QUERYSET_WRITES and is_queryset(receiver, related, bound)
            ):
                found.append((node.lineno, f"{ast.unparse(receiver)[:60]}.{method}()"))
            elif (
                method == "execute"
                and node.args
                and (is_write_sql(node.args[0]) or (isinstance(node.args[0], ast.Name) and node.args[0].id in sql))
            ):
                found.append((node.lineno, "SQL that writes"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in sql:
            found.append((node.lineno, f"{node.func.id}()"))
        if isinstance(node, ast.Call) and ast.unparse(node.func) in JOB_WRITES:  # a job created or ended
            found.append((node.lineno, f"{ast.unparse(node.func)}()"))
        elif isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Load):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name.startswith("do_"):
                found.append((node.lineno, name))
    return sorted(found)


def module_functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, definition) of each function of a module and each method of its classes."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found.append((prefix + node.name, node))

    visit(tree.body, "")
    return found


def is_public(name: str) -> bool:
    short = name.rsplit(".", 1)[-1]
    return not short.startswith("_") or short == "__call__"  # calling an object is calling its __call__


def module_writers(tree: ast.Module, related: set[str]) -> dict[str, list[tuple[int, str]]]:
    """Each public function and method of a module (qualified name) -> its writes (empty: it reads only), a call of
    one of the module's private writers (``_helper(...)``, ``self._helper(...)``) counted as a write."""
    functions = module_functions(tree)
    sql = frozenset(module_sql_writers(tree))
    own = {name: direct_writes(node, related, sql) for name, node in functions}
    private: set[str] = set()  # the short names of the private functions and methods that write
    grown = True
    while grown:
        grown = False
        for name, node in functions:
            short = name.rsplit(".", 1)[-1]
            if not is_public(name) and short not in private and (own[name] or calls_of(node, private)):
                private.add(short)
                grown = True
    return {name: sorted(own[name] + calls_of(node, private)) for name, node in functions if is_public(name)}


def calls_of(function: ast.AST, names: set[str]) -> list[tuple[int, str]]:
    return [
        (node.lineno, f"{name}()")
        for node in ast.walk(function)
        if isinstance(node, ast.Call)
        and (name := node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")) in names
    ]


def registered_job_bodies() -> set[tuple[str, str]]:
    """(file, function) of each job body registered by dotted path: ``annotation.jobs.KINDS`` and every
    ``jobs.register(kind, "dotted.path")``."""
    paths: set[str] = set()
    for node in ast.walk(ast.parse((ROOT / "annotation" / "jobs.py").read_text())):
        if isinstance(node, ast.AnnAssign | ast.Assign) and isinstance(node.value, ast.Dict):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "KINDS" for t in targets):
                paths |= {
                    v.value for v in node.value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
                }
    for path in source_files(*APPS):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and ast.unparse(node.func) == "jobs.register"
                and len(node.args) > 1
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                paths.add(node.args[1].value)
    bodies: set[tuple[str, str]] = set()
    for dotted in paths:
        module, function = dotted.rsplit(".", 1)
        file = module_file(module)
        assert file is not None, f"the job body {dotted} is in no module"
        bodies.add((file.relative_to(ROOT).as_posix(), function))
    return bodies


def test_a_function_that_writes_is_named_do():
    related = related_managers(*APPS)
    bodies = {(file, name) for file, name in registered_job_bodies() if name.endswith("_job")}
    defined, bad = set(), []
    for path in source_files(*APPS):
        file = path.relative_to(ROOT).as_posix()
        if named_elsewhere(file):
            continue
        for name, found in module_writers(ast.parse(path.read_text()), related).items():
            defined.add((file, name))
            short = name.rsplit(".", 1)[-1]
            if found and not short.startswith("do_") and (file, name) not in NOT_DO and (file, name) not in bodies:
                line, what = found[0]
                bad.append(f"{file} {name} writes (line {line}: {what})")
    assert bodies, "no registered job body found (annotation.jobs.KINDS, jobs.register)"
    assert set(NOT_DO) <= defined, f"NOT_DO names what is gone: {sorted(set(NOT_DO) - defined)}"
    assert not bad, (
        "a function that writes is named do_* (ARCHITECTURE.md, Names): rename it, or make it private (_name) when "
        "only its module calls it:\n" + "\n".join(bad)
    )


def test_no_check_or_access_function_writes():
    related = related_managers(*APPS)
    bad = [
        f"{path.relative_to(ROOT)} {name} writes (line {found[0][0]}: {found[0][1]})"
        for path in source_files(*APPS)
        for name, found in module_writers(ast.parse(path.read_text()), related).items()
        if found and name.rsplit(".", 1)[-1].startswith(("check_", "access_"))
    ]
    assert not bad, "check_* validates and raises, access_* decides who may; neither writes:\n" + "\n".join(bad)


def test_the_write_detector_tells_orm_writes_from_dicts_sets_caches_and_clients():
    source = """
def f(study, counts, seen):
    Task.objects.filter(study=study).update(taken=0)
    study.items.create(input="x")
    place = AssignmentTask.objects.filter(slot__isnull=False)
    place.update(slot=None)
    study.save(update_fields=["name"])
    PairDecision.objects.select_for_update().get_or_create(comparison_id=1)
    do_rebuild_plan(study)
    transaction.on_commit(lambda: planning.do_queue_plan(study))
    type(study)._default_manager.filter(pk=1).update(name="x")
    study.comparison_set.all().delete()
    counts.update({"a": 1})
    Counter(seen).update(["b"])
    seen.add(1)
    cache.set("k", 1)
    cache.delete("k")
    totals = study.items.aggregate(n=Count("id"))
    totals.update(more=1)
    client.chat.completions.create(model="m")
    Task.objects.select_for_update().get(pk=1)
    cursor.execute(f"UPDATE {table} SET x = 1", [])
    cursor.execute(_COUNT_SQL, [])
    _MARK_SHOWN(pair=1)
    cursor.execute("SELECT 1 FROM t WHERE id = %s FOR UPDATE", [1])
"""
    function = ast.parse(source).body[0]
    writes = [line for line, _ in direct_writes(function, {"items"}, frozenset({"_COUNT_SQL", "_MARK_SHOWN"}))]
    assert writes == [3, 4, 6, 7, 8, 9, 10, 11, 12, 22, 23, 24]
    constants = ast.parse(
        '_COUNT_SQL = f"""\nUPDATE {t} SET n = n + 1"""\n_MARK = CompiledUpdate(build)\n_READ = "SELECT 1"'
    )
    assert module_sql_writers(constants) == {"_COUNT_SQL", "_MARK"}
    module = ast.parse(
        "def _store():\n    Job.objects.create()\n"
        "def _twice():\n    _store()\n"
        "def public():\n    _twice()\n"
        "def reads():\n    return Job.objects.filter(pk=1).first()\n"
        "class Run:\n    def _save(self):\n        self.row.save()\n    def go(self):\n        self._save()\n"
    )
    found = module_writers(module, set())
    assert {name for name, writes in found.items() if writes} == {"public", "Run.go"}
    assert found["reads"] == [] and "_store" not in found


# ----------------------------------------------------------------------------------------------------------
# The drawing of ARCHITECTURE.md names every module, in its room, and nothing else

DRAWN = ("annotation", "selection", "analytics", "config")
NOT_DRAWN = {"__init__", "apps"}  # every package and app has them; management commands are `management/`


def drawn_modules(text: str) -> dict[str, set[str]]:
    """app -> the modules the drawing names ("report/data", "views", "management/"), read from the first code block:
    a box (┌ ... └) is an app's, named by the first app name in its left margin; a name ending in "/" starts a
    package whose modules follow on its line and on the lines indented below it; "(pure)" is a note."""
    block = text.split("```\n", 2)[1]
    found: dict[str, set[str]] = defaultdict(set)
    app, package = "", ""
    names: set[str] = set()
    for line in block.splitlines():
        if "┌" in line:
            app, names, package = "", set(), ""
        elif "└" in line:
            found[app] |= names
        elif "│" in line and "├" not in line:
            margin, content = line.split("│")[:2]
            app = app or next((word for word in margin.split() if word in DRAWN), "")
            body = content.lstrip(" ")
            if len(content) - len(body) <= 1:  # a line of its own: a package's first line or plain modules
                package = ""
            for word in body.replace("(pure)", " ").split():
                if word == "management/":
                    names.add(word)
                elif word.endswith("/"):
                    package = word
                else:
                    names.add(package + word)
    return dict(found)


def modules_on_disk(app: str) -> set[str]:
    found = set()
    for path in (ROOT / app).rglob("*.py"):
        parts = path.relative_to(ROOT / app).with_suffix("").parts
        if "migrations" in parts or parts[-1] in NOT_DRAWN:
            continue
        if parts[0] == "management":
            found.add("management/")
        else:
            found.add("".join(f"{p}/" for p in parts[:-1]) + parts[-1])
    return found


def test_the_drawing_names_every_module_in_its_room_and_nothing_else():
    drawn = drawn_modules((ROOT / "ARCHITECTURE.md").read_text())
    assert set(drawn) == set(DRAWN)
    for app in DRAWN:
        on_disk = modules_on_disk(app)
        assert drawn[app] - on_disk == set(), f"ARCHITECTURE.md draws modules {app}/ does not have"
        assert on_disk - drawn[app] == set(), f"modules of {app}/ missing from ARCHITECTURE.md's drawing"


def test_every_file_the_pages_name_exists():
    """ARCHITECTURE.md, the READMEs and the docs name the files that hold what they describe: each still exists."""
    import re

    pages = [ROOT / "ARCHITECTURE.md", ROOT / "README.md", ROOT / "bench" / "README.md", *(ROOT / "docs").glob("*.md")]
    path = re.compile(r"`((?:annotation|selection|analytics|config|templates|tests|bench|docs)/[\w/.-]*)`")
    missing = []
    for page in pages:
        named = set(path.findall(page.read_text()))
        assert named or page.parent.name == "docs", f"{page.name} names no file"
        # a module's attribute (`analytics/presentation.SECTIONS`) names the module's file; bench/.cache/ is made by
        # the benchmarks that fill it
        missing += [
            f"{page.relative_to(ROOT)}: {p}"
            for p in sorted(named)
            if not (ROOT / p).exists() and not (ROOT / f"{p.split('.')[0]}.py").exists() and p != "bench/.cache/"
        ]
    assert missing == []


def test_the_drawing_reader_sees_packages_notes_and_continuations():
    text = """```
                 ┌────────────┐
   selection     │ live views │
                 │ core/ (pure) a b │
                 │       c     │
                 │ hooks       │
                 │ management/ │
                 └────────────┘
```
"""
    assert drawn_modules(text) == {"selection": {"live", "views", "core/a", "core/b", "core/c", "hooks", "management/"}}


def test_every_analysis_reads_judgments_through_the_one_home():
    """Which judgments count is defined once (``Judgment.objects.analysed()`` and ``.counted()``): no reader in
    selection or analytics filters revised or superseded judgments on its own, where it would miss an excluded item --
    but the few that must see excluded items, named here with their reasons."""
    sees_excluded = {
        # the item page and the data manager list every verdict, an excluded item's too (its review queue reads
        # ``analysed()``); a ruling needs a verdict, then refuses an excluded item by name
        "analytics/review.py": 2,
        "analytics/report/judgments.py": 1,  # the report's count of the judgments it left out with excluded items
    }
    found: dict[str, int] = {}
    for app in ("selection", "analytics"):
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            n = sum("revised=False" in line or "superseded=False" in line for line in path.read_text().splitlines())
            if n:
                found[str(path.relative_to(ROOT))] = n
    assert found == sees_excluded
