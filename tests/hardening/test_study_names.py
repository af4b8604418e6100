"""Security pass, L6: study names are unique per researcher, so creating one reveals nothing about another
researcher's studies; the command line says whose study it means with OWNER/NAME."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotation.exchange import rules
from annotation.studies import creation
from tests.conftest import study_jsonl


def test_two_researchers_may_use_the_same_name_without_learning_of_each_other(researcher, other_researcher):
    mine = creation.do_create_study(researcher, "pilot", study_jsonl(2), "s.jsonl")
    theirs = creation.do_create_study(other_researcher, "pilot", study_jsonl(2), "s.jsonl")
    assert mine.pk != theirs.pk
    with pytest.raises(rules.FormatError, match="you already have a study named 'pilot'"):
        creation.do_create_study(researcher, "pilot", study_jsonl(2), "s.jsonl")


def test_the_command_line_asks_whose_study_when_a_name_is_shared(researcher, other_researcher):
    creation.do_create_study(researcher, "pilot", study_jsonl(2), "s.jsonl")
    creation.do_create_study(other_researcher, "pilot", study_jsonl(2), "s.jsonl")
    with pytest.raises(CommandError, match="say whose, as --study OWNER/NAME \\(alice/pilot, bob/pilot\\)"):
        call_command("export_judgments", "--study", "pilot", stdout=StringIO(), stderr=StringIO())
    err = StringIO()
    call_command("export_judgments", "--study", "bob/pilot", stdout=StringIO(), stderr=err)
    assert "Exported 0 judgments of 'pilot'" in err.getvalue()
