from __future__ import annotations

from django import forms

from annotation import study_settings
from annotation.formats import COMMENT_MAX_CHARS
from annotation.models import Study
from annotation.services import PLAN_FIELDS
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
            for name in (*PLAN_FIELDS, "explicit_pairs"):
                self.fields[name].disabled = True

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
    client_ms = forms.IntegerField(required=False, min_value=0)
    comment = forms.CharField(required=False, max_length=COMMENT_MAX_CHARS, strip=True)


class GoldPairForm(forms.Form):
    input = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    good_output = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    bad_output = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}),
                                 help_text="Deliberately wrong, e.g. off-topic or garbled.")


class GenerateGoldForm(forms.Form):
    count = forms.IntegerField(min_value=1, max_value=100, initial=5)
