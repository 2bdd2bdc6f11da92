"""JSON from outside parsed within bounds (verifier/json_input.py): what it refuses, and what it keeps as it is."""

import json

import pytest

from verifier.json_input import MAX_DEPTH, JSONRefused, nesting_depth, parse_json


@pytest.mark.parametrize("text, refusal", [
    ("[" * 50_000 + "]" * 50_000, "nest more than 64 deep"),
    ('{"config": ' + '{"a":' * 5_000 + "1" + "}" * 5_000 + "}", "nest more than 64 deep"),
    ('{"task": 1e999}', "1e999 has no finite value"),
    ('{"task": -1e999}', "no finite value"),
    ('{"task": ' + "1" * 5_000 + "}", "too large: whole numbers are limited to 64 bits"),
    ('{"task": 9223372036854775808}', "too large"),
    ('{"task": NaN}', "NaN is not a number JSON allows"),
    ('[Infinity]', "Infinity is not a number"),
    ('{"task": 1627, "config": {"\\ud800": 1}}', "unpaired surrogate (\\ud800)"),
    ('["\\udfff and more"]', "unpaired surrogate (\\udfff)"),
    ('{"text": "a\\u0000b"}', "NUL character"),
])
def test_hostile_json_is_refused_naming_what_is_wrong(text, refusal):
    with pytest.raises(JSONRefused, match=refusal.replace("(", r"\(").replace(")", r"\)").replace("\\u", r"\\u")):
        parse_json(text)


def test_ordinary_json_parses_as_the_standard_library_parses_it():
    text = json.dumps({"task": 12, "config": {"t_max": 10, "alpha": 0.5, "names": ["[{", "\\\"]}", "Zoë 😀"]},
                       "nested": [[[[1]]]], "big": 2**63 - 1, "small": -(2**63) + 1})
    assert parse_json(text) == json.loads(text) and parse_json(text.encode()) == json.loads(text)
    assert parse_json('"\\ud83d\\ude00"') == "😀"  # a surrogate pair is a character
    assert parse_json('"\\\\ud800"') == "\\ud800"  # an escaped backslash, then letters


def test_depth_is_counted_outside_strings_only():
    assert nesting_depth('{"a": "[[[[[[", "b": [{"c": []}]}') == 4
    assert nesting_depth("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)) == MAX_DEPTH + 1
    assert parse_json("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


def test_malformed_json_is_still_a_decode_error_with_its_position():
    with pytest.raises(json.JSONDecodeError) as error:
        parse_json('{"a": 1,\n "b": }')
    assert error.value.lineno == 2
