from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar, cast

from django import forms
from django.core import validators
from django.core.exceptions import ImproperlyConfigured
from django.db import models

from annotation import setting_ranges, study_settings
from annotation.arena import setup as arena_setup
from annotation.errors import FieldErrors
from annotation.exchange.judgment_files import COMMENT_MAX_CHARS
from annotation.exchange.ranking_files import MAX_SHOWN
from annotation.exchange.rules import MAX_STORED_INT
from annotation.generating import runner as generating
from annotation.judges import prompts
from annotation.models import Arena, Judge, Study, SystemEndpoint, key_variables
from annotation.models.endpoints import key_variable_words
from annotation.plan import planning
from annotation.text import UNSTORABLE, newlines


class OneLineEnding:
    """A form whose text keeps ``\n`` line endings whatever the browser sends (``annotation.text.newlines``)."""

    def clean(self):
        data = super().clean()
        for name, value in list(data.items()):
            if isinstance(value, str) and "\r" in value:
                data[name] = newlines(value)
        return data


class StudyCreateForm(OneLineEnding, forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    file = forms.FileField(help_text="JSONL (one item per line) or CSV long form; see the README for the format.")


class UploadForm(OneLineEnding, forms.Form):
    file = forms.FileField()


class RaterLinkForm(OneLineEnding, forms.Form):
    name = forms.CharField(max_length=200, help_text="How this rater appears in exports, e.g. an id or initials.")


class BulkLinksForm(OneLineEnding, forms.Form):
    names = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        max_length=200_000,
        help_text="One rater name per line; you get a CSV of name and link to send out.",
    )


class DuplicateForm(OneLineEnding, forms.Form):
    name = forms.CharField(max_length=200, label="Name of the copy")


class DeleteForm(OneLineEnding, forms.Form):
    confirm = forms.CharField(max_length=200, label="Type the study's name to confirm")


class StudySettingsForm(OneLineEnding, forms.ModelForm):
    """The settings page: the study's own fields, and every app's settings row (annotation/study_settings.py),
    one form."""

    public_base_url = forms.URLField(
        required=False,
        max_length=200,
        assume_scheme="https",
        label="Public base URL",
        help_text=Study._meta.get_field("public_base_url").help_text,
    )
    explicit_pairs = forms.MultipleChoiceField(
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Used when the pair mode is 'an explicit list of pairs'.",
    )

    class Meta:
        model = Study
        fields = [
            s.name
            for s in study_settings.STUDY_SETTINGS  # the form's own fields stand for the others
            if not s.form_only and s.name not in ("public_base_url",)
        ]
        widgets = {"instructions": forms.Textarea(attrs={"rows": 4}), "consent_text": forms.Textarea(attrs={"rows": 4})}

    def __init__(self, *args, frozen: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.initial.setdefault("public_base_url", self.instance.public_base_url)
        for group in study_settings.GROUPS.values():
            self.fields.update(forms.fields_for_model(group.model, fields=group.fields))
            row = getattr(self.instance, group.accessor)
            self.initial.update({name: getattr(row, name) for name in group.fields if name not in self.initial})
        systems = planning.systems_with_outputs(self.instance)  # a system still being generated cannot be ticked
        # the form field of Study.baseline, a ForeignKey: a ModelChoiceField
        cast(forms.ModelChoiceField, self.fields["baseline"]).queryset = self.instance.systems.all()
        for setting in study_settings.SETTINGS.values():
            if setting.choices is not None:  # another app's registry supplies them (strategies, metrics)
                self.fields[setting.name] = forms.ChoiceField(choices=setting.choices())
        cast(forms.MultipleChoiceField, self.fields["explicit_pairs"]).choices = [  # declared above
            (f"{a.pk}-{b.pk}", f"{a.name} vs {b.name}") for i, a in enumerate(systems) for b in systems[i + 1 :]
        ]
        self.initial["explicit_pairs"] = sorted(
            f"{min(a, b)}-{max(a, b)}" for a, b in self.instance.comparisons.values_list("system_a_id", "system_b_id")
        )
        if frozen:  # raters have started: the plan is shown but not editable (values come from initial)
            for name in study_settings.frozen_after_start() + ("explicit_pairs",):
                self.fields[name].disabled = True
        for name, field in self.fields.items():
            if name in study_settings.SETTINGS:
                field.label, field.help_text = study_settings.SETTINGS[name].label, study_settings.SETTINGS[name].help
                _within_range(name, field, self.instance)
        self.fields["practice_pairs"].required = False  # empty: no practice (forms and scripts that predate it)
        for name in ("answer_unit", "outputs_shown"):  # absent (forms and scripts that predate them): as saved
            self.fields[name].required = False
        shortage = practice_shortage(self.instance)
        if shortage:
            self.fields["practice_pairs"].help_text += " " + shortage

    def groups(self) -> list[dict]:
        """The settings page: groups by task, each with the settings that apply to the study as saved and,
        apart, those that do not (still in the form), each with its default."""
        study = self.instance

        def stored(name):
            return study_settings.value(study, name)

        out = []
        for anchor, title, intro, names in study_settings.sections():
            shown: list[dict[str, Any]] = []
            others: list[dict[str, Any]] = []
            for name in names:
                entry = {"field": self[name], "default": setting_default(name), "range": setting_ranges.describe(name)}
                (shown if study_settings.applies(name, stored) else others).append(entry)
            out.append({"anchor": anchor, "title": title, "intro": intro, "fields": shown, "others": others})
        missing = [n for n in self.fields if n not in study_settings.SETTINGS]
        if missing:  # a new setting must be declared (study_settings.Setting): fail loudly in tests, never hide it
            raise ImproperlyConfigured(f"settings not on the settings page: {', '.join(missing)}")
        return out

    def setting_names(self) -> list[str]:
        """Every setting the form edits, wherever it is stored."""
        return [name for name in self.fields if name != "explicit_pairs"]

    def clean_practice_pairs(self):
        return self.cleaned_data.get("practice_pairs") or 0

    def clean_answer_unit(self):
        return self.cleaned_data.get("answer_unit") or self.instance.answer_unit

    def clean_outputs_shown(self):
        value = self.cleaned_data.get("outputs_shown")
        return self.instance.outputs_shown if value is None else value

    def clean(self):
        data = super().clean()
        if data.get("allow_tie") and not (data.get("tie_label") or "").strip():
            self.add_error("tie_label", "Give the tie option a label, e.g. 'No preference'.")
        if data.get("neither_option") and not (data.get("neither_label") or "").strip():
            self.add_error("neither_label", "Give the option a label, e.g. 'Both are bad'.")
        if data.get("pair_mode") == Study.PairMode.BASELINE and not data.get("baseline"):
            self.add_error("baseline", "Choose the baseline system.")
        if data.get("pair_mode") == Study.PairMode.EXPLICIT and not data.get("explicit_pairs"):
            self.add_error("explicit_pairs", "Tick at least one system pair.")
        unit = data.get("answer_unit")
        if unit in (Study.AnswerUnit.RANK, Study.AnswerUnit.BEST_WORST):
            systems = self.instance.systems.count()
            if systems < 3:
                self.add_error(
                    "answer_unit", "Rankings and best-worst need three systems or more: with two, ask pairs."
                )
            if unit == Study.AnswerUnit.RANK and systems > MAX_SHOWN:
                self.add_error(
                    "answer_unit",
                    f"A ranking screen shows at most {MAX_SHOWN} outputs and this study has {systems} "
                    "systems: choose best and worst (a few outputs per screen), or ask pairs.",
                )
            if (data.get("further_questions") or "").strip():
                self.add_error(
                    "answer_unit",
                    "Further questions are asked about a pair: a ranking screen has none. Remove them, or ask pairs.",
                )
            # both act on one system pair at a time, where a ranking task holds every pair of its item
            if data.get("selection_method") == "diffuse-iterative":
                self.add_error(
                    "answer_unit",
                    "The live DiffUse loop decides pair by pair: choose another selection method, or ask pairs.",
                )
            if data.get("stop_when_decided"):
                self.add_error(
                    "answer_unit",
                    "A ranking answers every system pair of an item at once, so the study cannot stop buying one "
                    "decided pair: untick “Stop buying decided pairs”, or ask pairs.",
                )
        return data

    def explicit(self) -> list[tuple[int, int]] | None:
        if self.cleaned_data.get("pair_mode") != Study.PairMode.EXPLICIT:
            return None
        # each "a-b", one of the field's choices
        return [(int(a), int(b)) for a, b in (v.split("-") for v in self.cleaned_data["explicit_pairs"])]


def _json_kind(field: forms.Field) -> tuple[tuple[type, ...], str]:
    """The JSON types a settings field takes through the API, and how to name them: a form would read any value as
    text, so ``["a"]`` would be stored as the text "['a']" without this."""
    if isinstance(field, forms.BooleanField):
        return (bool,), "true or false"
    if isinstance(field, forms.FloatField | forms.DecimalField):  # before IntegerField: Django's FloatField is one
        return (int, float), "a number"
    if isinstance(field, forms.IntegerField):
        return (int,), "a whole number"
    if isinstance(field, forms.MultipleChoiceField):
        return (list,), "a list"
    return (str,), "text"


def settings_names() -> list[str]:
    """Every setting the settings page edits (the API's settings too), wherever it is stored."""
    stored = StudySettingsForm.Meta.fields + [f for g in study_settings.GROUPS.values() for f in g.fields]
    return sorted([*stored, "public_base_url", "explicit_pairs"])


def settings_as_json(study: Study) -> dict[str, Any]:
    """Every setting the settings page edits, by name, as the API shows it (``PATCH`` takes the same): the baseline
    by its system's name, the explicit list of system pairs as ``[system_a, system_b]`` name pairs."""
    out: dict[str, Any] = {}
    for name in settings_names():
        if name == "explicit_pairs":
            continue
        value = study_settings.value(study, name)
        if isinstance(value, models.Model):
            value = str(value)
        elif isinstance(value, Decimal):
            value = float(value)
        out[name] = value
    # the pairs compared, whatever the pair mode (as the form shows them), so a GET sent back as a PATCH changes nothing
    out["explicit_pairs"] = [
        [a, b] for a, b in study.comparisons.values_list("system_a__name", "system_b__name").order_by("pk")
    ]
    return dict(sorted(out.items()))


def json_type_problem(field: forms.Field, value: Any) -> str | None:
    """What is wrong with a JSON value's type for a form field (None: nothing): a form would read any value as text."""
    kinds, words = _json_kind(field)
    if value is None:
        return None if not field.required or isinstance(field, forms.ModelChoiceField) else f"Must be {words}."
    if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
        return f"Must be {words}."
    return None


F = TypeVar("F", bound=forms.BaseForm)


def form_from_json(
    make: Callable[..., F],
    body: Any,
    *,
    convert: Callable[[str, Any], Any] | None = None,
    unknown: str = "Not a field here.",
) -> F:
    """A page's form driven by a JSON object (the API's writes): bound to what the unbound form shows (its initial
    values, the stored ones or the defaults) with ``body``'s keys over them, and validated. ``make(data=None)`` builds
    the form; ``convert(name, value)`` turns a key's JSON value into the form's (``ValueError``: its words are the
    refusal). Refused by field name (``FieldErrors``), nothing else done: a key the form does not have, a value of the
    wrong JSON type, a field the form has disabled, and whatever the form itself refuses."""
    if not isinstance(body, dict):
        raise FieldErrors({"non_field_errors": ["Send a JSON object of fields by name."]})
    current = make()
    data = {name: current[name].value() for name in current.fields}
    problems: dict[str, list[str]] = {}
    for name, value in body.items():
        field = current.fields.get(name)
        if field is None:
            problems[name] = [unknown]
            continue
        try:
            value = convert(name, value) if convert is not None else value
        except ValueError as exc:
            problems[name] = [str(exc)]
            continue
        wrong = None if name in CONVERTED else json_type_problem(field, value)
        if wrong:
            problems[name] = [wrong]
        elif field.disabled and value != data[name]:
            problems[name] = ["Raters have already started on this study, so this is frozen."]
        else:
            data[name] = value
    form = make(data=data)
    if not form.is_valid():
        for name, messages in form.errors.items():
            problems.setdefault("non_field_errors" if name == "__all__" else name, []).extend(str(m) for m in messages)
    if problems:
        raise FieldErrors(problems)
    return form


CONVERTED = ("baseline", "explicit_pairs")  # settings the API names by system, converted to the form's values


def settings_form_from_json(study: Study, body: Any, frozen: bool) -> StudySettingsForm:
    """The settings form with ``body``'s changes (a JSON object of setting names, as ``settings_as_json`` gives them)
    over the stored settings, validated (``form_from_json``): the baseline by its system's name, the explicit pairs
    as ``[system, system]`` name pairs."""
    systems = {s.name: s.pk for s in study.systems.all()}

    def convert(name: str, value: Any) -> Any:
        if name == "baseline":
            if value is not None and (not isinstance(value, str) or value not in systems):
                raise ValueError(f"No system of this study is called {value!r}.")
            return systems.get(value) if value is not None else None
        if name == "explicit_pairs":
            ok = isinstance(value, list) and all(
                isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) and x in systems for x in p)
                for p in value
            )
            if not ok:
                raise ValueError("A list of [system, system] pairs, each named as the study names its systems.")
            return sorted(f"{min(systems[a], systems[b])}-{max(systems[a], systems[b])}" for a, b in value)
        return value

    return form_from_json(
        lambda data=None: StudySettingsForm(data, instance=study, frozen=frozen),
        body,
        convert=convert,
        unknown="Not a setting of this study (GET the settings for their names).",
    )


def _within_range(name: str, field: forms.Field, study: Study) -> None:
    """The settings form checks a setting with its declared range, as ``do_update_settings`` does (the error under
    the field), and tells the browser the bounds of a number."""

    def check(value: Any) -> None:
        wrong = None if setting_ranges.unchanged(study, name, value) else setting_ranges.problem(name, value, study)
        if wrong:
            raise forms.ValidationError(wrong[0].upper() + wrong[1:] + ".", code="range")

    # one message: the declared range (and for a URL, setting_ranges' own check of its schemes)
    bounds = (
        validators.MaxLengthValidator,
        validators.MinValueValidator,
        validators.MaxValueValidator,
        validators.URLValidator,
    )
    field.validators = [v for v in field.validators if not isinstance(v, bounds)]
    field.validators.append(check)
    limits = study_settings.SETTINGS[name].limits
    if limits is not None and isinstance(field.widget, forms.NumberInput):
        whole = isinstance(field, forms.IntegerField)
        field.widget.attrs.update(
            min=limits.low if not limits.above else None,
            max=limits.high if not limits.below else None,
            step=field.widget.attrs.get("step", 1 if whole else "any"),
        )
        field.widget.attrs = {k: v for k, v in field.widget.attrs.items() if v is not None}


def practice_shortage(study: Study) -> str:
    """What the settings page says when the study has fewer attention checks than its practice pairs ask for."""
    if not study.pk or not study.practice_pairs:
        return ""
    available = study.gold_pairs.count()
    if available >= study.practice_pairs:
        return ""
    if not available:
        return (
            "This study has no attention checks yet, so there is no practice: add some on the crowd page "
            "(“Attention checks”)."
        )
    return (
        f"This study has only {available} attention check{'s' if available != 1 else ''}, so raters practise on "
        f"{available}: add more on the crowd page."
    )


class RatingForm(OneLineEnding, forms.Form):
    """A rater's submission: which pair, exactly-once key and timing. The answer's own fields belong to the
    study's elicitation mode, which reads and checks them (``annotation/elicitation.py``)."""

    pair = forms.IntegerField()
    key = forms.CharField(max_length=64)
    client_ms = forms.IntegerField(required=False, min_value=0, max_value=MAX_STORED_INT)
    comment = forms.CharField(required=False, max_length=COMMENT_MAX_CHARS, strip=True)


class PracticeForm(forms.Form):
    """A practice answer: which practice pair (the answer's own fields are the elicitation mode's)."""

    gold = forms.IntegerField(min_value=1)


class GoldPairForm(OneLineEnding, forms.Form):
    input = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    good_output = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    bad_output = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), help_text="Deliberately wrong, e.g. off-topic or garbled."
    )


class GenerateGoldForm(OneLineEnding, forms.Form):
    count = forms.IntegerField(min_value=1, max_value=100, initial=5)


def setting_default(name: str):
    """A setting's default as a person reads it, or None (no fixed default)."""
    groups: list[type[models.Model]] = [Study, *(g.model for g in study_settings.GROUPS.values())]
    for model in groups:
        try:
            # a setting is a column of the model that holds it (study_settings), never a relation's other end
            field = cast(models.Field, model._meta.get_field(name))
        except Exception:  # noqa: BLE001 -- not this model's field
            continue
        if not field.has_default() or callable(field.default):
            return None
        default = field.default
        if field.choices:
            default = dict(field.flatchoices).get(default, default)
        return (
            "empty" if default in (None, "") else ("on" if default is True else "off" if default is False else default)
        )
    return None


class EndpointForm(OneLineEnding, forms.ModelForm):
    """What every endpoint's form shares (``models.Endpoint``: an LLM judge's, a generated system's): the base URL,
    the API key environment variable as a choice of the variables the operator allows, and the stored key,
    write-only -- never filled in again, empty keeps it, ``clear_api_key`` removes it. Each form has a ``name`` field
    and an ``owner_name()``: the name shown, fixed once the endpoint exists (a judge's rater, a system)."""

    ENDPOINT_LABELS = {
        "base_url": "Base URL",
        "api_key_env": "API key environment variable",
        "max_concurrency": "Requests at once",
        "request_budget": "Request budget",
        "timeout_seconds": "Timeout per request (s)",
        "max_retries": "Retries",
        "price_input": "Price of prompt tokens ($ / million)",
        "price_output": "Price of completion tokens ($ / million)",
    }

    base_url = forms.URLField(
        max_length=500,
        assume_scheme="https",
        label="Base URL",
        help_text="The endpoint's base URL, e.g. https://api.openai.com/v1 or "
        "http://127.0.0.1:8080/v1 (vLLM, Ollama, llama.cpp).",
    )
    api_key = forms.CharField(
        required=False,
        max_length=500,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        label="API key (stored)",
        help_text="Optional: stored with the study and never shown again. Prefer the "
        "environment variable; leave both empty for a local server that needs "
        "no key.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored key")

    field_order = ["name"]  # the rest in Meta.fields' order

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # only the environment variables the operator allows (SEPLAB_JUDGE_KEY_VARIABLES), each with its hosts
        allowed = key_variables()
        current = self.instance.api_key_env if self.instance.pk else ""
        choices = [("", "None (a stored key, or a server that needs none)")] + [
            (v, key_variable_words(v)) for v in allowed
        ]
        if current and current not in allowed:  # stored before the list: shown, refused on save
            choices.append((current, f"{current} (not allowed on this server)"))
        self.fields["api_key_env"] = forms.ChoiceField(
            choices=choices,
            required=False,
            label="API key environment variable",
            initial=current,  # new: none, as for a local server (the README's first path); pick one for an API
            help_text="Read the key from this environment variable of the worker (the variables this server's "
            "operator allows); each is sent only to the hosts named beside it.",
        )
        if self.instance.pk:
            self.fields["name"].disabled = True
            self.fields["name"].initial = self.owner_name()
            if self.instance.api_key:
                self.fields["api_key"].help_text = (
                    "A key is stored (not shown), for this base URL only. Type a new one to replace it; leave empty "
                    "to keep it. A changed base URL needs the key typed again."
                )
        else:
            del self.fields["clear_api_key"]
        self.fields["api_key"].initial = ""

    def clean(self):
        data = super().clean()
        if data.get("api_key") or data.get("clear_api_key"):
            self.instance.api_key_url = ""  # a new key (or none): for the base URL entered with it
        if self.instance.pk and not data.get("api_key") and not data.get("clear_api_key"):
            data["api_key"] = self.instance.api_key  # empty keeps the stored key, for the URL it was entered for
        if data.get("clear_api_key"):
            data["api_key"] = ""
        return data


class JudgeForm(EndpointForm):
    """A judge's endpoint and how it is asked."""

    name = forms.CharField(max_length=200, help_text="How the judge appears in the report (a rater name).")

    class Meta:
        model = Judge
        fields = [
            "base_url",
            "model",
            "api_key_env",
            "api_key",
            "prompt_template",
            "temperature",
            "max_tokens",
            "logprobs",
            "scope",
            "max_concurrency",
            "request_budget",
            "timeout_seconds",
            "max_retries",
            "price_input",
            "price_output",
        ]
        widgets = {"prompt_template": forms.Textarea(attrs={"rows": 14, "class": "mono"})}
        labels = {
            **EndpointForm.ENDPOINT_LABELS,
            "max_tokens": "Most tokens per reply",
            "logprobs": "Ask for log-probabilities",
            "scope": "Pairs to judge",
        }

    def owner_name(self) -> str:
        return self.instance.rater.external_id

    def clean_prompt_template(self) -> str:
        template = self.cleaned_data["prompt_template"]
        try:
            prompts.check_template(template)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc
        return template


class SystemEndpointForm(EndpointForm):
    """A system generated from an endpoint: where, how its outputs are asked for, how many, how hard and at what
    price."""

    name = forms.CharField(
        max_length=200, help_text="How the system is named in the report and the exports (raters never see it)."
    )

    class Meta:
        model = SystemEndpoint
        fields = [
            "base_url",
            "model",
            "api_key_env",
            "api_key",
            "system_prompt",
            "samples",
            "temperature",
            "max_tokens",
            "seed",
            "max_concurrency",
            "request_budget",
            "timeout_seconds",
            "max_retries",
            "price_input",
            "price_output",
        ]
        widgets = {"system_prompt": forms.Textarea(attrs={"rows": 4})}
        labels = {
            **EndpointForm.ENDPOINT_LABELS,
            "system_prompt": "System prompt",
            "samples": "Outputs per input (K)",
            "max_tokens": "Most tokens per output",
            "seed": "Seed",
        }

    def owner_name(self) -> str:
        return self.instance.system.name

    def endpoint_fields(self) -> dict:
        """The endpoint's fields as entered (``do_add_endpoint_system``'s keywords)."""
        return {name: self.cleaned_data[name] for name in self.Meta.fields}

    def source_changes(self) -> dict:
        """The fields that say where the outputs come from, as entered (``check_same_source``'s keywords)."""
        return {name: self.cleaned_data[name] for name in generating.SOURCE}


class ArenaSettingsForm(OneLineEnding, forms.ModelForm):
    """An arena's own settings (the Arena settings page): the ``Arena`` row's numbers, checked by its validators,
    and its starter prompts and categories typed one a line, each line and their number limited as
    ``arena.setup`` limits them (blank lines and repeats dropped); ``setup.do_update_arena`` stores them."""

    LINES = {  # field -> (what one line is, and more of them, most characters, most lines)
        "starters": ("starter prompt", "starter prompts", arena_setup.MAX_PROMPT_CHARS, arena_setup.MAX_STARTERS),
        "categories": ("category", "categories", arena_setup.MAX_CATEGORY_CHARS, arena_setup.MAX_CATEGORIES),
    }
    starters = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 6}),
        label="Starter prompts",
        help_text=f"One a line, at most {arena_setup.MAX_STARTERS} of at most {arena_setup.MAX_PROMPT_CHARS:,} "
        "characters each; raters may take one instead of writing their own. Blank lines and repeats are dropped.",
    )
    categories = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        label="Categories",
        help_text=f"One a line, at most {arena_setup.MAX_CATEGORIES} of at most {arena_setup.MAX_CATEGORY_CHARS} "
        "characters each; a rater may file a prompt under one, and the board shows a board per category. A category "
        "taken away is no longer offered; battles filed under it keep it.",
    )

    class Meta:
        model = Arena
        fields = list(arena_setup.ARENA_FIELDS)
        labels = {
            "samples": "Background samples per system (K)",
            "max_turns": "Most messages per battle",
            "votes_per_rater_hour": "Most votes per rater per hour",
            "votes_per_network_hour": "Most votes per network per hour",
            "attention_every": "An attention check every n-th battle",
        }
        help_texts = {
            "samples": Arena._meta.get_field("samples").help_text
            + " Fixed once the first battle starts: every prompt's separability rests on the same K.",
            "attention_every": Arena._meta.get_field("attention_every").help_text
            + " The checks are the study's attention checks (Crowdsourcing page); with none, no battle is one.",
        }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in self.LINES:
            self.initial[name] = "\n".join(getattr(self.instance, name) or [])
        for name in ("samples", "max_turns", "votes_per_rater_hour", "votes_per_network_hour", "attention_every"):
            for validator in Arena._meta.get_field(name).validators:  # the row's range, in the browser too
                if isinstance(validator, validators.MinValueValidator):
                    self.fields[name].widget.attrs["min"] = validator.limit_value
                elif isinstance(validator, validators.MaxValueValidator):
                    self.fields[name].widget.attrs["max"] = validator.limit_value

    def _lines(self, name: str) -> list[str]:
        """The field's lines as stored, or a ``ValidationError`` naming each line that cannot be one and how many
        lines are over the most. Left as it was shown, the stored list is kept as it is (a starter prompt of
        several lines, from ``create_arena --starter``, stays whole)."""
        what, whats, most_chars, most = self.LINES[name]
        text = newlines(self.cleaned_data.get(name) or "")
        if text.strip() == str(self.initial.get(name, "")).strip():
            return list(getattr(self.instance, name) or [])
        out: list[str] = []
        problems: list[str] = []
        for number, line in enumerate(text.split("\n"), start=1):
            line = line.strip()
            if not line:
                continue
            if len(line) > most_chars:
                problems.append(f"Line {number} has {len(line):,} characters; a {what} has at most {most_chars:,}.")
            elif UNSTORABLE.search(line):
                problems.append(f"Line {number} holds a character no database can store (NUL or a lone surrogate).")
            elif line not in out:
                out.append(line)
        if not problems and len(out) > most:
            problems.append(f"{len(out)} {whats} (blank lines and repeats dropped); an arena has at most {most}.")
        if problems:
            raise forms.ValidationError(problems)
        return out

    def clean_starters(self) -> list[str]:
        return self._lines("starters")

    def clean_categories(self) -> list[str]:
        return self._lines("categories")

    def changes(self) -> dict[str, Any]:
        """Every field as entered (``setup.do_update_arena``'s keywords)."""
        return {name: self.cleaned_data[name] for name in self.Meta.fields}
