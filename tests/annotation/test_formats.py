"""The parsers of docs/interfaces.md: every error kind is reported with its line and field, and valid files parse."""

from __future__ import annotations

import json

import pytest

from annotation.exchange.judgment_files import judgment_key, parse_judgments
from annotation.exchange.rules import FormatError
from annotation.exchange.study_files import parse_study


def jl(*objects) -> bytes:
    return ("\n".join(o if isinstance(o, str) else json.dumps(o) for o in objects) + "\n").encode()


def item(id_="x1", **overrides):
    obj = {"id": id_, "input": "Some input", "outputs": {"a": ["a0", "a1"], "b": ["b0", "b1"]}}
    obj.update(overrides)
    return obj


def problems_of(data: bytes, filename: str = "f.jsonl", **kwargs) -> list[str]:
    with pytest.raises(FormatError) as exc:
        parse_study(data, filename, **kwargs)
    return exc.value.messages()


def test_it_parses_a_valid_jsonl_study():
    parsed = parse_study(jl(item("x1", reference="ref", metadata={"k": 1}), item("x2")), "s.jsonl")
    assert parsed.systems == ["a", "b"]
    assert [i.external_id for i in parsed.items] == ["x1", "x2"]
    assert parsed.items[0].outputs == {"a": ["a0", "a1"], "b": ["b0", "b1"]}
    assert parsed.items[0].reference == "ref" and parsed.items[0].metadata == {"k": 1}


def test_it_reports_malformed_json_with_line_number():
    messages = problems_of(jl(item("x1"), '{"id": "x2", "input": '))
    assert messages == ["line 2: malformed JSON: Expecting value (column 23)"]


def test_it_reports_a_missing_id():
    bad = item()
    del bad["id"]
    assert problems_of(jl(item("x1"), bad)) == ["line 2, field 'id': missing id"]


def test_it_reports_a_duplicate_id_and_where_it_was_first():
    assert problems_of(jl(item("x1"), item("x2"), item("x1"))) == [
        "line 3, field 'id': duplicate id 'x1' (first on line 1)"
    ]


def test_it_reports_a_missing_system():
    short = item("x2", outputs={"a": ["a0"]})
    assert problems_of(jl(item("x1"), short)) == [
        "line 2, field 'outputs': missing system 'b' (other items have outputs from it)"
    ]


def test_a_system_only_a_few_items_use_is_reported_as_unknown_on_those_lines():
    typo = item("x3", outputs={"a": ["a0"], "bb": ["b0"]})
    assert problems_of(jl(item("x1"), item("x2"), typo)) == [
        "line 3, field 'outputs.bb': unknown system 'bb' (most items use: a, b)",
        "line 3, field 'outputs': missing system 'b' (other items have outputs from it)",
    ]


def test_it_needs_two_systems():
    messages = problems_of(jl(item("x1", outputs={"a": ["a0"]})))
    assert messages == ["a study needs outputs of at least two systems; found 1: ['a']"]


def test_an_empty_output_is_real_data_imported_with_a_warning():
    # phi-2 answered one AlpacaEval question with nothing: that loses the comparison, it does not block the study
    parsed = parse_study(jl(item("x0")) + jl(item("x1", outputs={"a": ["a0", "   "], "b": ["b0"]})))
    assert parsed.items[1].outputs["a"] == ["a0", "   "]
    assert [str(w) for w in parsed.warnings] == ["line 2, field 'outputs.a[1]': empty output of item x1"]
    csv_parsed = parse_study(b"item_id,input,system,sample,output\ni1,in,a,0,x\ni1,in,b,0,\n", "s.csv")
    assert [str(w) for w in csv_parsed.warnings] == ["line 2, field 'outputs.b[0]': empty output of item i1"]


def test_it_reports_wrong_encoding_with_the_line():
    data = jl(item("x1")) + '{"id": "x2", "input": "caf\u00e9"}\n'.encode("latin-1")
    messages = problems_of(data)
    assert len(messages) == 1
    assert messages[0].startswith("line 2: wrong encoding: byte 0xe9 at column 27 is not valid UTF-8")


def test_it_rejects_a_file_that_is_too_large():
    data = jl(item("x1"), item("x2"))
    assert problems_of(data, max_bytes=10) == [f"file too large: {len(data) / 1e6:.1f} MB; the limit is 0.0 MB"]


def test_it_lists_every_problem_of_the_file_at_once():
    bad_input = item("x2", input="")
    unknown_field = item("x3", ouputs={})
    messages = problems_of(jl(item("x1"), bad_input, unknown_field, "[1, 2]"))
    assert messages == [
        "line 2, field 'input': empty input",
        "line 3, field 'ouputs': unknown field (allowed: id, input, messages, reference, outputs, metadata)",
        "line 4: each line must be a JSON object, not list",
    ]


def test_it_rejects_an_empty_file():
    assert problems_of(b"\n\n") == ["the file contains no items"]


def test_it_accepts_a_byte_order_mark_and_integer_ids():
    parsed = parse_study(b"\xef\xbb\xbf" + jl(item(7)), "s.jsonl")
    assert parsed.items[0].external_id == "7"


CSV_OK = (
    "item_id,input,system,sample,output\n"
    'i1,"An input, with a comma",a,0,"a zero"\n'
    'i1,"An input, with a comma",a,1,a one\n'
    'i1,"An input, with a comma",b,0,b zero\n'
    'i1,"An input, with a comma",b,1,"b one\nover two lines"\n'
)


def test_it_parses_the_long_csv_form():
    parsed = parse_study(CSV_OK.encode(), "s.csv")
    assert parsed.systems == ["a", "b"]
    assert parsed.items[0].outputs == {"a": ["a zero", "a one"], "b": ["b zero", "b one\nover two lines"]}


def test_csv_problems_carry_line_and_column():
    data = "item_id,input,system,sample,output\ni1,in,a,0,x\ni1,in,a,two,y\ni1,in,b,0,\n,in,b,1,z\ni1,in,a,0,again\n"
    assert problems_of(data.encode(), "s.csv") == [
        # the empty output would import with a warning, listed with the problems (named at its item's first line)
        "line 2, field 'outputs.b[0]': empty output of item i1 (a warning only: this alone would import)",
        "line 3, field 'sample': sample must be a whole number from 0 to 2147483647, not 'two'",
        "line 5, field 'item_id': missing id",
        "line 6, field 'sample': duplicate sample 0 of 'a' for item 'i1' (first on line 2)",
    ]


def test_csv_needs_its_columns():
    messages = problems_of(b"item_id,input,system,output\ni1,in,a,x\n", "s.csv")
    assert messages == ["line 1, field 'sample': missing column (required: item_id, input, system, sample, output)"]


def test_csv_samples_must_not_have_gaps():
    data = "item_id,input,system,sample,output\ni1,in,a,0,x\ni1,in,a,2,y\ni1,in,b,0,z\n"
    assert problems_of(data.encode(), "s.csv") == [
        "line 2, field 'sample': samples of 'a' for item 'i1' are [0, 2]; expected 0..1 without gaps"
    ]


# ---- judgments --------------------------------------------------------------------------------

SAMPLES = {"x1": {"a": 2, "b": 2}}


def judgment(**overrides):
    obj = {
        "item": "x1",
        "system_a": "a",
        "sample_a": 0,
        "system_b": "b",
        "sample_b": 1,
        "shown_first": "b",
        "rater": "w1",
        "rater_kind": "human",
        "choice": "a",
        "response_set": ["a", "b"],
        "probability_a": None,
        "created": "2026-01-01T12:00:00Z",
    }
    obj.update(overrides)
    return obj


def judgment_problems(*objects) -> list[str]:
    with pytest.raises(FormatError) as exc:
        parse_judgments(jl(*objects), "j.jsonl", SAMPLES)
    return exc.value.messages()


def test_it_parses_a_judgment_into_model_coordinates():
    [parsed] = parse_judgments(jl(judgment(note="kept")), "j.jsonl", SAMPLES)
    assert (parsed.choice, parsed.response_set, parsed.shown_first) == ("a", ["a", "b"], "b")
    assert parsed.extra == {"note": "kept"}
    assert parsed.created.isoformat() == "2026-01-01T12:00:00+00:00"


def test_judgment_problems_name_the_field():
    assert judgment_problems(
        judgment(item="nope"),
        judgment(system_b="c"),
        judgment(sample_b=2),
        judgment(shown_first="c"),
        judgment(choice="c"),
        judgment(response_set=["a", "a"]),
        judgment(probability_a=1.5),
        judgment(choice=None, response_set=None),
        judgment(created="2026-01-01T12:00:00"),
        judgment(rater_kind="robot"),
        judgment(strength=3),
        judgment(choice="tie", strength=2),
        judgment(comment=["not", "text"]),
    ) == [
        "line 1, field 'item': unknown item 'nope'",
        "line 2, field 'system_b': unknown system 'c'",
        "line 2, field 'shown_first': shown_first must be system_a or system_b",
        "line 2, field 'response_set': response_set must be a list of distinct systems of the pair ([] when neither "
        "is acceptable), or null",
        "line 3, field 'sample_b': item 'x1' has 2 sample(s) of 'b'; 2 is out of range",
        "line 4, field 'shown_first': shown_first must be system_a or system_b",
        "line 5, field 'choice': choice must be system_a, system_b, 'tie' or null",
        "line 6, field 'response_set': response_set must be a list of distinct systems of the pair ([] when neither "
        "is acceptable), or null",
        "line 7, field 'probability_a': probability_a must be a number from 0 to 1, or null",
        "line 8: a judgment needs a choice, a response_set or a probability_a",
        "line 9, field 'created': created needs a time zone, e.g. 2026-01-01T12:00:00Z",
        "line 10, field 'rater_kind': rater_kind must be 'human' or 'judge'",
        "line 11, field 'strength': strength must be 1 (better), 2 (much better) or null",
        "line 12, field 'strength': strength needs a choice of system_a or system_b",
        "line 13, field 'comment': comment must be text of at most 2000 characters, or null",
    ]


def test_a_rater_keeps_one_kind():
    assert judgment_problems(judgment(), judgment(rater_kind="judge", choice="b")) == [
        "line 2, field 'rater_kind': rater 'w1' is already a human, not a judge"
    ]


def test_identical_lines_without_id_are_reported():
    assert judgment_problems(judgment(), judgment()) == [
        "line 2, field 'id': same judgment as line 1 (give each a distinct id)"
    ]


def test_the_key_is_the_id_or_a_content_hash():
    assert judgment_key({"id": "abc"}) == "abc"
    key = judgment_key(judgment())
    assert key.startswith("sha256:") and len(key) == 64
    assert judgment_key(dict(reversed(list(judgment().items())))) == key


def test_a_null_sample_index_is_a_problem_not_a_crash():
    line = {
        "item": "i1",
        "system_a": "a",
        "sample_a": None,
        "system_b": "b",
        "sample_b": 0,
        "shown_first": "a",
        "rater": "r",
        "rater_kind": "human",
        "choice": "a",
    }
    with pytest.raises(FormatError) as exc:
        parse_judgments((json.dumps(line) + "\n").encode(), "j.jsonl", {"i1": {"a": 1, "b": 1}})
    assert "line 1, field 'sample_a': sample_a must be a whole number from 0 to 2147483647" in str(exc.value)


def test_a_text_longer_than_the_limit_is_refused_with_its_line_and_field():
    """A study once took outputs of 10 MB (and a million "[" tied up its preview for a minute): an input, reference
    or output is at most SEPLAB_MAX_TEXT_CHARS characters, each one over it named."""
    long = "x" * 101
    messages = problems_of(
        jl(item("x1"), item("x2", input=long, reference=long, outputs={"a": ["ok", long], "b": ["b0", "b1"]})),
        max_text_chars=100,
    )
    assert messages == [
        "line 2, field 'input': input is 101 characters long; the limit is 100 (SEPLAB_MAX_TEXT_CHARS): "
        "shorten it or leave the item out",
        "line 2, field 'reference': reference is 101 characters long; the limit is 100 (SEPLAB_MAX_TEXT_CHARS): "
        "shorten it or leave the item out",
        "line 2, field 'outputs.a[1]': output is 101 characters long; the limit is 100 (SEPLAB_MAX_TEXT_CHARS): "
        "shorten it or leave the item out",
    ]
    assert parse_study(jl(item("x1", input="x" * 100)), "s.jsonl", max_text_chars=100).items[0].input == "x" * 100


def test_a_csv_text_longer_than_the_limit_is_refused_with_its_line_and_field():
    rows = "item_id,input,system,sample,output\nq,in,a,0,fine\nq,in,b,0," + "y" * 101 + "\n"
    assert problems_of(rows.encode(), "s.csv", max_text_chars=100)[0] == (
        "line 3, field 'output': output is 101 characters long; the limit is 100 (SEPLAB_MAX_TEXT_CHARS): "
        "shorten it or leave the item out"
    )
    inputs = "item_id,input\nq," + "z" * 101 + "\n"
    assert problems_of(inputs.encode(), "s.csv", max_text_chars=100) == [
        "line 2, field 'input': input is 101 characters long; the limit is 100 (SEPLAB_MAX_TEXT_CHARS): "
        "shorten it or leave the item out"
    ]


def test_the_browser_refuses_a_ten_megabyte_output(researcher_client):
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.urls import reverse

    from annotation.models import Study

    big = jl(item("x1"), item("x2", outputs={"a": ["[" * 10_000_000], "b": ["b0"]}))
    response = researcher_client.post(
        reverse("study_create"), {"name": "huge", "file": SimpleUploadedFile("h.jsonl", big)}
    )
    assert response.status_code == 400 and not Study.objects.exists()
    assert "line 2, field &#x27;outputs.a[0]&#x27;: output is 10,000,000 characters long; the limit is 100,000" in (
        response.content.decode()
    )
