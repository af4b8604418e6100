"""What each study setting accepts, read off its declaration (``study_settings.Setting``: a number's ``limits``, a
text's ``max_chars``) and its column (on or off, the choices, a URL): the one check the settings form and
``do_update_settings`` share, and the words the settings page documents each range with.

A refusal names the setting and what it takes (``assignment_timeout_minutes: a whole number from 1 to 10,080, not
0``); a value outside its range never reaches the database, where a number beyond its column would be an error
on PostgreSQL and silently stored on SQLite. A value is checked as it is, never rounded or cut to fit."""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, TypedDict
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.db import models

from annotation import study_settings
from annotation.errors import ServiceError

URL_SCHEMES = ("http", "https")  # where raters are sent: a web address, never ftp: or a file


def model_field(name: str) -> models.Field:
    """The column that stores a setting (a field of ``Study``, or of the settings row that owns it)."""
    from annotation.models import Study

    group = study_settings.group_of(name)
    model = group.model if group else Study
    return model._meta.get_field(name)  # type: ignore[return-value]  # a setting is a column, never a relation's end


def _number(value: float | Decimal) -> str:
    if isinstance(value, int) or float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def choices(name: str) -> list[tuple[Any, str]] | None:
    setting = study_settings.SETTINGS[name]
    if setting.choices is not None:
        return setting.choices()
    field = model_field(name)
    return list(field.flatchoices) if field.choices else None


def describe(name: str) -> str:
    """What a setting accepts, as people read it ("a whole number from 1 to 10,080"); "" for one the page offers as
    a choice, a tick box or a system."""
    setting = study_settings.SETTINGS[name]
    if setting.form_only or name == "baseline" or choices(name) is not None:
        return ""
    field = model_field(name)
    empty = ", or empty" if field.null or (field.blank and not isinstance(field, models.BooleanField)) else ""
    if isinstance(field, models.BooleanField):
        return ""
    if isinstance(field, models.URLField):
        return f"an {' or '.join(URL_SCHEMES)} address of at most {field.max_length} characters{empty}"
    if isinstance(field, models.CharField | models.TextField):
        return f"at most {_number(max_chars(name))} characters"
    limits = _limits(name)
    kind = "a whole number" if isinstance(field, models.IntegerField) else "a number"
    if limits.above or limits.below:
        low = f"more than {_number(limits.low)}" if limits.above else f"at least {_number(limits.low)}"
        high = f"less than {_number(limits.high)}" if limits.below else f"at most {_number(limits.high)}"
        span = f"{low} and {high}"
    else:
        span = f"from {_number(limits.low)} to {_number(limits.high)}"
    places = f" with at most {field.decimal_places} decimal places" if isinstance(field, models.DecimalField) else ""
    return f"{kind} {span}{places}{empty}"


def bounds(name: str) -> dict[str, float]:
    """A number setting's range as a field's ``min_value`` / ``max_value`` (the API's serializer documents it so;
    an end left out is the check's alone)."""
    limits = study_settings.SETTINGS[name].limits
    if limits is None:
        return {}
    out = {} if limits.above else {"min_value": limits.low}
    return out if limits.below else {**out, "max_value": limits.high}


class WholeBounds(TypedDict):
    min_value: int
    max_value: int


def whole_bounds(name: str) -> WholeBounds:
    """A whole-number setting's closed range as an integer field's keywords."""
    limits = _limits(name)
    return {"min_value": int(limits.low), "max_value": int(limits.high)}


def _limits(name: str) -> study_settings.Range:
    limits = study_settings.SETTINGS[name].limits
    if limits is None:  # a number without a declared range: a mistake of the declaration, caught at start-up
        raise ValueError(f"the number setting {name} declares no range (Setting.limits)")
    return limits


def max_chars(name: str) -> int:
    declared = study_settings.SETTINGS[name].max_chars
    column = model_field(name).max_length
    if declared is None and column is None:
        raise ValueError(f"the text setting {name} declares no length (Setting.max_chars)")
    return min(n for n in (declared, column) if n is not None)


def problem(name: str, value: Any, study: Any = None) -> str | None:
    """What is wrong with ``value`` for the setting ``name`` ("a whole number from 1 to 10,080, not 0"), or None
    when it may be stored. ``study``: the study it is for (a baseline must be one of its systems)."""
    setting = study_settings.SETTINGS[name]
    if setting.form_only:
        return None  # the explicit pairs: the plan checks them against the study's systems
    field = model_field(name)
    if value is None or value == "":
        if field.null or (field.blank and value == ""):
            return None
        return "a value is required" + (f": {describe(name)}" if describe(name) else "")
    if name == "baseline":
        if getattr(value, "study_id", None) != getattr(study, "pk", object()):
            return "must be one of this study's systems"
        return None
    if isinstance(field, models.BooleanField):
        return None if isinstance(value, bool) else f"must be on or off (True or False), not {value!r}"
    offered = choices(name)
    if offered is not None:
        allowed = [str(key) for key, _ in offered]
        return None if value in allowed else f"must be one of {', '.join(allowed)}, not {value!r}"
    if isinstance(field, models.CharField | models.TextField):
        return _text_problem(name, field, value)
    return _number_problem(name, field, value)


def _text_problem(name: str, field: models.Field, value: Any) -> str | None:
    if not isinstance(value, str):
        return f"must be text, not {value!r}"
    if isinstance(field, models.URLField):
        try:
            URLValidator(schemes=list(URL_SCHEMES))(value)
        except ValidationError:
            try:
                scheme = urlsplit(value).scheme
            except ValueError:  # not even a URL's shape ("http://[" is an unclosed IPv6 address)
                scheme = ""
            wrong = f" ({scheme}: is not one)" if scheme and scheme not in URL_SCHEMES else ""
            return f"must be {describe(name)}{wrong}"
    if len(value) > max_chars(name):
        return f"must be {describe(name)}, not {len(value):,}"
    try:
        field.run_validators(value)  # e.g. the further questions' own format
    except ValidationError as exc:
        return " ".join(exc.messages)
    return None


def _number_problem(name: str, field: models.Field, value: Any) -> str | None:
    limits = _limits(name)
    whole = isinstance(field, models.IntegerField)
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float | Decimal)
        or (whole and not isinstance(value, int))
    ):
        return f"must be {describe(name)}, not {value!r}"
    if not math.isfinite(value):
        return f"must be {describe(name)}, not {value}"
    if isinstance(field, models.DecimalField):
        try:
            exact = Decimal(str(value))
        except InvalidOperation:
            return f"must be {describe(name)}, not {value!r}"
        if exact != exact.quantize(Decimal(1).scaleb(-field.decimal_places)):
            return f"must be {describe(name)}, not {value}"
    if not limits.holds(value):
        return f"must be {describe(name)}, not {_number(value)}"
    return None


def unchanged(study: Any, name: str, value: Any) -> bool:
    """Whether ``value`` is what the study already has: never refused, so a study saved before a range was declared
    (or narrowed) keeps saving its other settings -- even one frozen once raters started."""
    if study is None or getattr(study, "pk", None) is None or study_settings.SETTINGS[name].form_only:
        return False
    stored = study_settings.value(study, name)
    return type(stored) is type(value) and stored == value


def check_changes(study: Any, changes: Mapping[str, Any]) -> None:
    """Raise a ``ServiceError`` naming every setting in ``changes`` whose value is outside what it accepts (and any
    name that is no setting), before anything is written; a value the study already has is not checked again."""
    problems = []
    for name, value in changes.items():
        if name not in study_settings.SETTINGS:
            problems.append(f"{name}: no such setting")
            continue
        wrong = None if unchanged(study, name, value) else problem(name, value, study)
        if wrong:
            problems.append(f"{name}: {wrong}")
    if problems:
        raise ServiceError("Settings not saved: " + "; ".join(problems) + ".")
