"""Hot-path queries whose SQL is compiled once per thread, then run with new parameter values.

Django builds and compiles a query's SQL on every call. On the rating page and its submit, the two
requests every rater makes for every pair, that is most of what a request spends in the ORM -- more than
the database's own time (measured in bench/README.md, "Compiled hot-path queries", against the plain
ORM and a lean plain-ORM query, in-process and under load). A ``CompiledQuery`` keeps the query written
in ORM terms — filters, joins, the model's columns — and compiles it the first time a thread runs it:
each parameter is given a sentinel value, the SQL is compiled once, and the positions where the
sentinels landed in the SQL's parameters are remembered. Later calls put the real values in those
positions and execute the same SQL, with the same result conversion (``from_db_value``, SQLite's
booleans and datetimes) as the ORM. The SQL is the ORM's own, so it is the same on SQLite and
PostgreSQL, and with server-side binding PostgreSQL prepares it once per connection.

Parameters are integers compared for equality (primary and foreign keys) or aware datetimes. ``None`` is
refused, because a filter on ``None`` compiles to different SQL (``IS NULL``); an integer beyond the 64-bit
range of a key matches no row, as in the ORM, without reaching the database.
"""

from __future__ import annotations

import abc
import dataclasses
import datetime as dt
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import Model, QuerySet
from django.db.models.sql import UpdateQuery

KINDS = (int, dt.datetime)
_INT_SENTINEL = -7_213_948_000_000_000  # far below any primary key, inside a 64-bit integer
_INT_RANGE = range(-(2**63), 2**63)


M = TypeVar("M", bound=Model)
R = TypeVar("R")  # how a compiled statement's rows are read: _Results for a select, None for an update


class _NoMatch(Exception):
    """An integer parameter no key can equal: the query matches no row."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Results:
    compiler: Any  # the SQLCompiler, bound to this thread's connection
    converters: dict  # column position -> the ORM's converters for it
    names: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan(Generic[R]):
    sql: str
    params: list  # with the sentinels still in place; copied and filled on each call
    slots: list[tuple[int, str]]  # (position in params, parameter name)
    results: R  # _Results for a select, None for an update


class _Compiled(abc.ABC, Generic[R]):
    """What compiled selects and updates share: parameters, sentinels, the per-thread plan."""

    def __init__(self, build: Callable[..., Any], **kinds: type) -> None:
        for name, kind in kinds.items():
            if kind not in KINDS:
                raise TypeError(f"Parameter {name!r}: a compiled query takes int or datetime parameters, not {kind}.")
        self.build, self.kinds = build, kinds
        self._local = threading.local()

    def _sentinels(self, connection) -> tuple[dict[str, Any], dict[Any, str]]:
        """One distinctive value per parameter, and the value each becomes in the SQL's parameters."""
        given: dict[str, Any] = {}
        landed: dict[Any, str] = {}
        for i, (name, kind) in enumerate(self.kinds.items()):
            value: int | dt.datetime
            if kind is int:
                value = _INT_SENTINEL - i
                prepared = value
            else:
                value = dt.datetime(1901, 2, 3, 4, 5, 6, i + 1, tzinfo=dt.UTC)
                prepared = connection.ops.adapt_datetimefield_value(value)
            given[name], landed[prepared] = value, name
        return given, landed

    @abc.abstractmethod
    def _compile(self, built: Any, connection) -> tuple[str, tuple, R]:
        """SQL, parameters and how to read the rows (None for an update) of what ``build`` returned."""

    def _compiled(self) -> _Plan[R]:
        plan = getattr(self._local, "plan", None)
        if plan is None:
            connection = connections[DEFAULT_DB_ALIAS]
            given, landed = self._sentinels(connection)
            sql, params, results = self._compile(self.build(**given), connection)
            slots = [(i, landed[p]) for i, p in enumerate(params) if _hashable(p) and p in landed]
            missing = set(self.kinds) - {name for _, name in slots}
            if missing:
                raise RuntimeError(f"Parameters {sorted(missing)} do not appear in the compiled SQL: {sql}")
            plan = _Plan(sql, list(params), slots, results)
            self._local.plan = plan
        return plan

    def _params(self, plan: _Plan[R], values: dict[str, Any]) -> list:
        if set(values) != set(self.kinds):
            raise TypeError(f"Expected parameters {sorted(self.kinds)}, got {sorted(values)}.")
        params = plan.params.copy()
        ops = connections[DEFAULT_DB_ALIAS].ops
        for index, name in plan.slots:
            value = values[name]
            if self.kinds[name] is int:
                if not isinstance(value, int) or isinstance(value, bool):
                    raise TypeError(f"Parameter {name!r} must be an int, not {value!r}.")
                if value not in _INT_RANGE:
                    raise _NoMatch
                params[index] = value
            else:
                if not isinstance(value, dt.datetime):
                    raise TypeError(f"Parameter {name!r} must be a datetime, not {value!r}.")
                params[index] = ops.adapt_datetimefield_value(value)
        return params


class CompiledQuery(_Compiled[_Results]):
    """A ``values()`` query compiled once per thread.

    ``build`` receives one keyword argument per declared parameter and returns the queryset, e.g.::

        PAIR = CompiledQuery(lambda pk: AssignmentPair.objects.filter(pk=pk).values("pk", "shown_at"), pk=int)
        PAIR.rows(pk=5)  # [{"pk": 5, "shown_at": ...}]
    """

    def _compile(self, queryset: QuerySet, connection) -> tuple[str, tuple, _Results]:
        """SQL, parameters and how to read the rows."""
        compiler = queryset.query.get_compiler(connection=connection)
        sql, params = compiler.as_sql()
        query = queryset.query
        # What results_iter() would work out on every call: the converters of the selected columns.
        fields = [column[0] for column in compiler.select[0 : compiler.col_count]]
        if compiler.has_composite_fields(fields):
            raise TypeError("A compiled query selects plain columns, not composite primary keys.")
        converters = compiler.get_converters(fields)
        names = (*query.extra_select, *query.values_select, *query.annotation_select)
        return sql, params, _Results(compiler, converters, names)

    def rows(self, **values: Any) -> list[dict[str, Any]]:
        """The rows as dicts keyed like ``values()``, converted exactly as the ORM converts them."""
        plan = self._compiled()
        try:
            params = self._params(plan, values)
        except _NoMatch:
            return []
        with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
            cursor.execute(plan.sql, params)
            fetched = cursor.fetchall()
        if not fetched:
            return []
        results = plan.results
        if results.converters:
            fetched = results.compiler.apply_converters(fetched, results.converters)
        return [dict(zip(results.names, row, strict=True)) for row in fetched]


class CompiledKeysQuery:
    """A ``values()`` query over a list of integer keys (an ``__in`` filter), compiled once per thread and per
    number of keys: ``build`` receives the list and returns the queryset, e.g.::

        JUDGMENTS = CompiledKeysQuery(lambda pairs: Judgment.objects.filter(pair_id__in=pairs).values("pk"))
        JUDGMENTS.rows([3, 5])

    An ``IN`` list of n keys is different SQL for every n, so each length is a ``CompiledQuery`` of its own; lists
    longer than ``longest`` run through the plain ORM (the same queryset, built afresh). Repeated keys count once, and
    keys no 64-bit key can equal are left out (they match no row; the plain ORM would send them, and SQLite refuse)."""

    def __init__(self, build: Callable[[list[int]], QuerySet], longest: int = 64) -> None:
        self.build, self.longest = build, longest
        self._by_length: dict[int, CompiledQuery] = {}

    def _query(self, n: int) -> CompiledQuery:
        query = self._by_length.get(n)
        if query is None:
            names = [f"k{i}" for i in range(n)]
            query = CompiledQuery(
                lambda **keys: self.build([keys[name] for name in names]), **dict.fromkeys(names, int)
            )
            self._by_length[n] = query
        return query

    def rows(self, keys) -> list[dict[str, Any]]:
        """The rows as dicts keyed like ``values()``, converted as the ORM converts them."""
        keys = list(keys)
        for key in keys:
            if not isinstance(key, int) or isinstance(key, bool):
                raise TypeError(f"Keys must be ints, not {key!r}.")
        distinct = [key for key in dict.fromkeys(keys) if key in _INT_RANGE]
        if not distinct:
            return []
        if len(distinct) > self.longest:
            return list(self.build(distinct))
        return self._query(len(distinct)).rows(**{f"k{i}": key for i, key in enumerate(distinct)})


class CompiledUpdate(_Compiled[None]):
    """An ``UPDATE`` compiled once per thread: ``build`` returns ``(queryset, {field: new value})``;
    calling it returns the number of rows updated, like ``QuerySet.update``."""

    def _compile(self, built, connection) -> tuple[str, tuple, None]:
        queryset, changes = built
        query = queryset.query.chain(UpdateQuery)
        query.add_update_values(changes)
        query.annotations = {}
        if query.related_updates:
            raise TypeError("A compiled update changes one table only.")
        sql, params = query.get_compiler(connection=connection).as_sql()
        return sql, params, None

    def __call__(self, **values: Any) -> int:
        plan = self._compiled()
        try:
            params = self._params(plan, values)
        except _NoMatch:
            return 0
        with transaction.mark_for_rollback_on_error(using=DEFAULT_DB_ALIAS):
            with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
                cursor.execute(plan.sql, params)
                return cursor.rowcount


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def model_columns(model: type[Model], prefix: str = "") -> tuple[str, ...]:
    """The ``values()`` names of every concrete column of ``model``, reached through ``prefix``
    (e.g. ``"rater__"``), in the order ``instance`` expects."""
    return tuple(prefix + field.attname for field in model._meta.concrete_fields)


def instance(model: type[M], row: dict[str, Any], prefix: str = "") -> M:
    """A model instance from the columns ``model_columns(model, prefix)`` put in ``row``, as the ORM
    would have built it (``Model.from_db``: not adding, loaded from the default database)."""
    names = [field.attname for field in model._meta.concrete_fields]
    return model.from_db(DEFAULT_DB_ALIAS, names, [row[prefix + name] for name in names])
