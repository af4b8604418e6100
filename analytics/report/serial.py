"""The report's JSON form: one converter between its typed results (frozen dataclasses) and the plain data that
``report --json``, the API and the stored report hold (the keys of docs/interfaces.md#report-json).

``to_json``: a dataclass becomes an object with its fields in declaration order (a field made with ``key`` names its
key when Python cannot, e.g. ``lambda``; one made with ``optional`` is left out while it is None; one made with
``codec`` converts itself), a dict keeps its order with its keys as strings, a tuple becomes a list, a numpy number a
Python one, NaN null. ``from_json``: the reverse, by the fields' type hints; an object where a union of dataclasses is
expected becomes the first of them whose fields it fits. PostgreSQL's jsonb does not keep the order of keys, so the
reverse never reads it. Imports no Django: ``manage.py leaderboard`` uses it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Callable
from typing import Any

import numpy as np

KEY, OMIT_NONE, CODEC = "json_key", "json_omit_none", "json_codec"


def optional(**kwargs: Any) -> Any:
    """A field left out of the JSON form while it is None: a key the report has only in some cases."""
    return dataclasses.field(default=None, metadata={OMIT_NONE: True}, **kwargs)


def key(name: str, **kwargs: Any) -> Any:
    """A field whose key in the JSON form is ``name`` (one that is no Python name, e.g. ``lambda``)."""
    return dataclasses.field(metadata={KEY: name}, **kwargs)


def codec(write: Callable[[Any], Any], read: Callable[[Any], Any], **kwargs: Any) -> Any:
    """A field of a type with a JSON form of its own: ``write`` makes it, ``read`` reads it back."""
    return dataclasses.field(metadata={CODEC: (write, read)}, **kwargs)


def to_json(value: Any) -> Any:
    """``value`` as plain JSON-ready data: dataclasses as objects, numpy numbers as Python ones, NaN as None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            v = getattr(value, f.name)
            if v is None and f.metadata.get(OMIT_NONE):
                continue
            out[f.metadata.get(KEY, f.name)] = f.metadata[CODEC][0](v) if CODEC in f.metadata else to_json(v)
        return out
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_json(value.tolist())
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating | float):
        number = float(value)
        return None if math.isnan(number) else number
    return value


def from_json(kind: Any, data: Any) -> Any:
    """``data``, the JSON form of a value of type ``kind``, as that value."""
    if data is None:
        return None
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        return _read(kind, data)
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        args = tuple(a for a in args if a is not type(None))
        classes = [a for a in args if isinstance(a, type) and dataclasses.is_dataclass(a)]
        if classes and isinstance(data, dict):
            fitting = next((c for c in classes if _fits(c, data)), None)
            if fitting is None:
                raise ValueError(f"{sorted(data)} fits none of {[c.__name__ for c in classes]}")
            return _read(fitting, data)
        return from_json(args[0], data) if len(args) == 1 else data
    if origin is list:
        return [from_json(args[0], v) for v in data]
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(args[0], v) for v in data)
        return tuple(from_json(a, v) for a, v in zip(args, data, strict=True))
    if origin is dict:
        key_type, value_type = args
        return {_key(key_type, k): from_json(value_type, v) for k, v in data.items()}
    return data


@dataclasses.dataclass(frozen=True, kw_only=True)
class Unavailable:
    """A section that cannot be computed yet, and why; its JSON form is ``{"available": false, "reason": ...}``."""

    available: bool = False
    reason: str


class JsonForm:
    """A typed result with its JSON form: ``to_json`` and ``from_json`` by the one converter."""

    def to_json(self) -> Any:
        return to_json(self)

    @classmethod
    def from_json(cls, data: Any) -> Any:
        return from_json(cls, data)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _names(cls: type) -> tuple[set[str], set[str]]:
    """(every key of the JSON form of ``cls``, the keys it must have)."""
    every, required = set(), set()
    for f in dataclasses.fields(cls):
        name = f.metadata.get(KEY, f.name)
        every.add(name)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.add(name)
    return every, required


def _fits(cls: type, data: dict) -> bool:
    every, required = _names(cls)
    return required <= data.keys() <= every


def _read(cls: type, data: dict) -> Any:
    hints = _hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        name = f.metadata.get(KEY, f.name)
        if f.init and name in data:
            read = f.metadata[CODEC][1] if CODEC in f.metadata else functools.partial(from_json, hints[f.name])
            values[f.name] = read(data[name])
    return cls(**values)


def _key(kind: Any, value: str) -> Any:
    """A dict key as its type: the JSON form keeps every key as a string."""
    return kind(value) if kind in (int, float) else value
