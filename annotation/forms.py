from __future__ import annotations

from django import forms
from django.core.exceptions import ImproperlyConfigured

from annotation import study_settings
from annotation.formats import COMMENT_MAX_CHARS, MAX_STORED_INT
from annotation.models import Judge, Study
from annotation.services import FROZEN_AFTER_START
from selection.core.separability import METRICS
from selection.strategies import STRATEGIES


class StudyCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}), required=False)
    file = forms.FileField(help_text="JSONL (one item per line) or CSV long form; see the README for the format.")


class UploadForm(forms.Form):
    file = forms.FileField()


class RaterLinkForm(forms.Form):
    name = forms.CharField(max_length=200, help_text="How this rater appears in exports, e.g. an id or initials.")


class BulkLinksForm(forms.Form):
    names = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), max_length=200_000,
                            help_text="One rater name per line; you get a CSV of name and link to send out.")


class DuplicateForm(forms.Form):
    name = forms.CharField(max_length=200, label="Name of the copy")


class DeleteForm(forms.Form):
    confirm = forms.CharField(max_length=200, label="Type the study's name to confirm")


class StudySettingsForm(forms.ModelForm):
    """The settings page: the study's own fields, and every app's settings row (annotation/study_settings.py),
    one form."""

    public_base_url = forms.URLField(
        required=False, assume_scheme="https", label="Public base URL",
        help_text=Study._meta.get_field("public_base_url").help_text)
    explicit_pairs = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple,
        help_text="Used when the pair mode is 'an explicit list of pairs'.",
    )

    class Meta:
        model = Study
        fields = [
            "elicitation", "question", "response_set_question", "also_acceptable_question", "allow_tie", "tie_label",
            "neither_option", "neither_label", "allow_skip", "allow_comment", "output_format", "instructions",
            "pairs_per_assignment", "sample_pairing", "raters_per_item", "judgments_per_assignment", "pair_mode",
            "baseline", "scheduling", "seed",
        ]
        widgets = {"instructions": forms.Textarea(attrs={"rows": 4})}

    def __init__(self, *args, frozen: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.initial.setdefault("public_base_url", self.instance.public_base_url)
        for group in study_settings.GROUPS.values():
            self.fields.update(forms.fields_for_model(group.model, fields=group.fields))
            row = getattr(self.instance, group.accessor)
            self.initial.update({name: getattr(row, name) for name in group.fields if name not in self.initial})
        systems = list(self.instance.systems.all())
        self.fields["baseline"].queryset = self.instance.systems.all()
        self.fields["pairs_per_assignment"].widget.attrs.update(min=1, max=50)
        self.fields["raters_per_item"].widget.attrs.update(min=1, max=100)
        self.fields["selection_method"] = forms.ChoiceField(
            choices=[(s.name, s.label) for s in STRATEGIES.values()], label="Selection method",
            help_text=self.fields["selection_method"].help_text)
        self.fields["separability_metric"] = forms.ChoiceField(
            choices=[(m, m) for base in METRICS for m in (base, f"{base}-la")], label="Separability metric",
            help_text=self.fields["separability_metric"].help_text)
        self.fields["explicit_pairs"].choices = [
            (f"{a.pk}-{b.pk}", f"{a.name} vs {b.name}") for i, a in enumerate(systems) for b in systems[i + 1:]
        ]
        self.initial["explicit_pairs"] = [
            f"{a}-{b}" for a, b in self.instance.comparisons.values_list("system_a_id", "system_b_id")
        ]
        if frozen:  # raters have started: the plan is shown but not editable (values come from initial)
            for name in (*FROZEN_AFTER_START, "explicit_pairs"):
                self.fields[name].disabled = True
        for name, (label, help_text) in LABELS.items():
            if name in self.fields:
                self.fields[name].label, self.fields[name].help_text = label, help_text

    def groups(self) -> list[dict]:
        """The settings page: groups by task, each with the settings that apply to the study as saved and,
        apart, those that do not (still in the form), each with its default."""
        study = self.instance

        def stored(name):
            return study_settings.value(study, name)

        out = []
        for anchor, title, intro, names in LAYOUT:
            shown, others = [], []
            for name in names:
                entry = {"field": self[name], "default": setting_default(name)}
                (shown if _applies(name, stored) else others).append(entry)
            out.append({"anchor": anchor, "title": title, "intro": intro, "fields": shown, "others": others})
        listed = {n for *_, names in LAYOUT for n in names}
        missing = [n for n in self.fields if n not in listed]
        if missing:  # a new setting must be placed in a group: fail loudly in tests, never hide it
            raise ImproperlyConfigured(f"settings not on the settings page: {', '.join(missing)}")
        return out

    def setting_names(self) -> list[str]:
        """Every setting the form edits, wherever it is stored."""
        return [name for name in self.fields if name != "explicit_pairs"]

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
        return data

    def explicit(self) -> list[tuple[int, int]] | None:
        if self.cleaned_data.get("pair_mode") != Study.PairMode.EXPLICIT:
            return None
        return [tuple(int(x) for x in v.split("-")) for v in self.cleaned_data["explicit_pairs"]]


class RatingForm(forms.Form):
    """A rater's submission: which pair, exactly-once key and timing. The answer's own fields belong to the
    study's elicitation mode, which reads and checks them (``annotation/elicitation.py``)."""

    pair = forms.IntegerField()
    key = forms.CharField(max_length=64)
    client_ms = forms.IntegerField(required=False, min_value=0, max_value=MAX_STORED_INT)
    comment = forms.CharField(required=False, max_length=COMMENT_MAX_CHARS, strip=True)


class GoldPairForm(forms.Form):
    input = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    good_output = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    bad_output = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}),
                                 help_text="Deliberately wrong, e.g. off-topic or garbled.")


class GenerateGoldForm(forms.Form):
    count = forms.IntegerField(min_value=1, max_value=100, initial=5)


# The settings page, grouped by task. Each setting: (human label, one line on what it does). A setting shows
# in its group when it applies to the study as saved (``applies``); the others sit in a closed "not used now"
# list of the same group, still in the form, so saving never loses them.
LABELS: dict[str, tuple[str, str]] = {
    "elicitation": ("How raters answer", "Forced choice: one answer. Response set: every acceptable output. Paired: "
                    "both, in that order. 5-point scale: which is better and by how much."),
    "question": ("Question", "Shown above each pair."),
    "response_set_question": ("Question (response set)", "Shown above each pair when raters mark every acceptable "
                              "output."),
    "also_acceptable_question": ("Follow-up question (paired)", "Asked after the forced choice."),
    "allow_tie": ("Offer a tie", "A third option besides the two outputs."),
    "tie_label": ("Tie label", "What the tie option says."),
    "neither_option": ("Offer “both are bad”", "Counted as a tie in ratings and as no acceptable output in the "
                       "judge metrics."),
    "neither_label": ("“Both are bad” label", "What that option says."),
    "allow_skip": ("Let raters skip an item", "With a reason; the item goes back to the queue."),
    "allow_comment": ("Comment box", "An optional free-text comment per pair, exported with the judgment."),
    "output_format": ("Show outputs as", "Rendered Markdown (code highlighted, raw HTML shown as text) or plain text."),
    "instructions": ("Instructions", "Shown before the first pair and on demand while rating (Markdown)."),
    "pairs_per_assignment": ("Sampled pairs per item (N)", "A rater judges N pairs of one item's sampled outputs; "
                             "N ≥ 2 measures how consistent they are. N = 1 is a plain pairwise study."),
    "sample_pairing": ("How the N pairs are drawn", "One-to-one shows each sample once (the paper); the grid allows "
                       "N larger than the samples."),
    "judgments_per_assignment": ("Pairs per assignment", "Whole items are bundled up to this many pairs, with one "
                                 "completion code (what a crowd site pays for)."),
    "raters_per_item": ("Raters per item", "How many different raters judge each selected item."),
    "pair_mode": ("Which system pairs", "All pairs, each system against a baseline, or a list you tick."),
    "baseline": ("Baseline system", "Every other system is compared with it."),
    "explicit_pairs": ("System pairs to compare", "Tick the pairs."),
    "scheduling": ("Scheduling", "How system pairs and display orders are spread over items."),
    "seed": ("Random seed", "The same file, settings and seed give the same plan, selection and bootstrap."),
    "selection_method": ("Selection method", "Which items of each system pair raters see when there is a budget."),
    "budget": ("Budget (items per system pair)", "Empty: every item. For iterative DiffUse, the most items it may "
               "release."),
    "separability_metric": ("Separability metric", "How distinguishable two systems' outputs are, per item "
                            "(cosine-la: length-adjusted embedding similarity, the default)."),
    "separability_threshold": ("Separability threshold", "Threshold methods keep items whose separability reaches "
                               "this (0 to 1)."),
    "risk": ("Stopping risk", "Iterative DiffUse stops once the chance of naming the wrong winner is at most this."),
    "min_n": ("Items judged first", "Iterative DiffUse: representatives judged before the first stopping check."),
    "stopping_ties_in_n": ("Ties count as decided items", "In the stopping test a tie never helps the leader "
                           "(conservative)."),
    "sep_threshold_t": ("Separability midpoint (T)", "sep-ELO and separability-weighted selection give half weight "
                        "here: K·α / (1 + exp(−β(δ − T)))."),
    "sep_alpha": ("Weight scale (α)", "The largest weight is α times the ELO K."),
    "sep_beta": ("Weight steepness (β)", "How sharply the weight rises around T."),
    "elo_k": ("ELO K factor", "How far one battle moves a rating."),
    "bootstrap_rounds": ("Bootstrap rounds", "Resamples behind the leaderboards' 95 % intervals."),
    "rating_aggregation": ("Which judgments are battles", "Every judgment, the majority per pair, or one sampled "
                           "per item and system pair."),
    "estimate_target": ("Win-rate estimates are for", "Items like these: the intervals also count that the study "
                        "holds only some of the items it stands for. These items: the study's own items only, so "
                        "judging all of them gives the exact answer."),
    "indeterminacy_beta": ("Human sensitivity β (forced choice only)", "The share of raters who chose one output "
                           "but would accept the other, for judge metrics when humans gave forced choices only."),
    "max_assignments_per_rater": ("Most assignments per rater", "Empty: no limit."),
    "first_answer_minutes": ("First answer within (minutes)", "A crowd worker or open-link visitor with no answer by "
                             "then loses the places they took, so invented ids cannot hold the study's places."),
    "assignment_timeout_minutes": ("Assignment timeout (minutes)", "Unanswered this long, an assignment expires and "
                                   "its places return to the queue."),
    "gold_rate": ("Attention checks per pair", "E.g. 0.2 adds one gold pair per five pairs."),
    "min_seconds_per_pair": ("Minimum seconds per pair", "Faster answers are refused with a reminder (0: off)."),
    "screen_min_gold": ("Gold answers before screening", "A rater's accuracy is judged after this many."),
    "screen_accuracy": ("Gold accuracy bar", "Raters below it are screened out (no more work)."),
    "public_base_url": ("Public base URL", "The address raters reach this server at; every link of the study is "
                        "built on it (empty: the address you are browsing)."),
}

THRESHOLD_METHODS = ("separability-threshold", "diffuse-threshold")
LIVE_METHOD = "diffuse-iterative"


def _applies(name: str, s) -> bool:
    """Whether a setting does anything for the study as saved (``s`` reads a setting by name)."""
    mode = s("elicitation")
    rules = {
        "question": mode != "response_set",
        "response_set_question": mode == "response_set",
        "also_acceptable_question": mode == "paired",
        "tie_label": s("allow_tie"),
        "neither_label": s("neither_option"),
        "baseline": s("pair_mode") == Study.PairMode.BASELINE,
        "explicit_pairs": s("pair_mode") == Study.PairMode.EXPLICIT,
        "sample_pairing": s("pairs_per_assignment") > 1,
        "separability_threshold": s("selection_method") in THRESHOLD_METHODS,
        "risk": s("selection_method") == LIVE_METHOD,
        "min_n": s("selection_method") == LIVE_METHOD,
        "screen_min_gold": s("gold_rate") > 0,
        "screen_accuracy": s("gold_rate") > 0,
    }
    return bool(rules.get(name, True))


LAYOUT = [
    ("raters-see", "What raters see", "The question, the answer options and how much one assignment holds.",
     ["elicitation", "question", "response_set_question", "also_acceptable_question", "allow_tie", "tie_label",
      "neither_option", "neither_label", "allow_skip", "allow_comment", "output_format", "instructions",
      "pairs_per_assignment", "sample_pairing", "judgments_per_assignment"]),
    ("who-rates", "Who rates", "How many raters, crowd work and quality control, and the address links use.",
     ["raters_per_item", "max_assignments_per_rater", "assignment_timeout_minutes", "first_answer_minutes", "gold_rate",
      "min_seconds_per_pair", "screen_min_gold", "screen_accuracy", "public_base_url"]),
    ("selection", "Which items", "Which system pairs are compared and which of their items raters judge.",
     ["pair_mode", "baseline", "explicit_pairs", "scheduling", "selection_method", "budget", "separability_metric",
      "separability_threshold", "risk", "min_n", "seed"]),
    ("analysis", "How results are computed", "The report's leaderboards, stopping test, judge metrics and win-rate "
     "estimates.",
     ["elo_k", "bootstrap_rounds", "rating_aggregation", "sep_threshold_t", "sep_alpha", "sep_beta",
      "stopping_ties_in_n", "indeterminacy_beta", "estimate_target"]),
]


def setting_default(name: str):
    """A setting's default as a person reads it, or None (no fixed default)."""
    groups = [Study, *(g.model for g in study_settings.GROUPS.values())]
    for model in groups:
        try:
            field = model._meta.get_field(name)
        except Exception:  # noqa: BLE001 -- not this model's field
            continue
        if not field.has_default() or callable(field.default):
            return None
        default = field.default
        if field.choices:
            default = dict(field.flatchoices).get(default, default)
        return "empty" if default in (None, "") else ("on" if default is True else "off" if default is False
                                                        else default)
    return None


class JudgeForm(forms.ModelForm):
    """A judge's endpoint and how it is asked. The stored API key is write-only: the field is never filled in
    again, and leaving it empty keeps the key (``clear_api_key`` removes it)."""

    name = forms.CharField(max_length=200, help_text="How the judge appears in the report (a rater name).")
    base_url = forms.URLField(max_length=500, assume_scheme="https", label="Base URL",
                              help_text="The endpoint's base URL, e.g. https://api.openai.com/v1 or "
                                        "http://127.0.0.1:8080/v1 (vLLM, Ollama, llama.cpp).")
    api_key = forms.CharField(
        required=False, max_length=500, widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        label="API key (stored)", help_text="Optional: stored with the study and never shown again. Prefer the "
                                            "environment variable; leave both empty for a local server that needs "
                                            "no key.")
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored key")

    class Meta:
        model = Judge
        fields = ["base_url", "model", "api_key_env", "api_key", "prompt_template", "temperature", "max_tokens",
                  "logprobs", "scope", "max_concurrency", "request_budget", "timeout_seconds", "max_retries",
                  "price_input", "price_output"]
        widgets = {"prompt_template": forms.Textarea(attrs={"rows": 14, "class": "mono"})}
        labels = {"base_url": "Base URL", "api_key_env": "API key environment variable",
                  "max_tokens": "Most tokens per reply", "logprobs": "Ask for log-probabilities",
                  "scope": "Pairs to judge", "max_concurrency": "Requests at once",
                  "request_budget": "Request budget", "timeout_seconds": "Timeout per request (s)",
                  "max_retries": "Retries", "price_input": "Price of prompt tokens ($ / million)",
                  "price_output": "Price of completion tokens ($ / million)"}

    field_order = ["name"]  # the rest in Meta.fields' order

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # only the environment variables the operator allows (SEPLAB_JUDGE_KEY_VARIABLES), as a choice
        from annotation.models import key_variables

        allowed = key_variables()
        current = self.instance.api_key_env if self.instance.pk else ""
        choices = [("", "None (a stored key, or a server that needs none)")] + [(v, v) for v in allowed]
        if current and current not in allowed:  # stored before the list: shown, refused on save
            choices.append((current, f"{current} (not allowed on this server)"))
        self.fields["api_key_env"] = forms.ChoiceField(
            choices=choices, required=False, label="API key environment variable",
            initial=current if self.instance.pk else (allowed[0] if allowed else ""),
            help_text="Read the key from this environment variable of the worker (the variables this server's "
                      "operator allows).")
        if self.instance.pk:
            self.fields["name"].disabled = True
            self.fields["name"].initial = self.instance.rater.external_id
            if self.instance.api_key:
                self.fields["api_key"].help_text = ("A key is stored (not shown). Type a new one to replace it; "
                                                    "leave empty to keep it.")
        else:
            del self.fields["clear_api_key"]
        self.fields["api_key"].initial = ""

    def clean_prompt_template(self) -> str:
        from annotation import judging

        template = self.cleaned_data["prompt_template"]
        try:
            judging.check_template(template)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc
        return template

    def clean(self):
        data = super().clean()
        if self.instance.pk and not data.get("api_key") and not data.get("clear_api_key"):
            data["api_key"] = self.instance.api_key  # empty keeps the stored key
        if data.get("clear_api_key"):
            data["api_key"] = ""
        return data
