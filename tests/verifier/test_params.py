"""Query parameters read one way (verifier/params.py): ids only in ASCII digits within bigint, bounded integers,
choices; anything else a ParameterError naming the parameter."""

import pytest
from django.http import QueryDict

from verifier.params import MAX_ID, ParameterError, get_choice, get_fraction, get_id, get_ids, get_int, is_id


@pytest.mark.parametrize("value", ["1", "42", str(MAX_ID)])
def test_ascii_digits_within_bigint_are_ids(value):
    assert is_id(value) and get_id(QueryDict(f"kg={value}"), "kg") == int(value)


@pytest.mark.parametrize("value", ["²", "١٢", "𝟙", "1e3", " 1", "-1", "0x10", str(MAX_ID + 1), "9" * 400, ""])
def test_anything_else_is_not_an_id(value):
    assert not is_id(value)


def test_a_parameter_that_is_not_an_id_is_refused_naming_it_and_the_value():
    with pytest.raises(ParameterError, match=r"^kg: '²' is not a knowledge-graph id$") as refused:
        get_id(QueryDict("kg=%C2%B2"), "kg", hint="a knowledge-graph id")
    assert refused.value.param == "kg"
    with pytest.raises(ParameterError, match="give one value"):
        get_id(QueryDict("kg=1&kg=2"), "kg")
    with pytest.raises(ParameterError, match="is required"):
        get_id(QueryDict(""), "kg", required=True)
    assert get_id(QueryDict(""), "kg") is None


def test_lists_of_ids_are_comma_separated_or_repeated_and_bounded():
    assert get_ids(QueryDict("tasks=1,2&tasks=3"), "tasks") == [1, 2, 3]
    with pytest.raises(ParameterError, match="'١' is not an id"):
        get_ids(QueryDict("tasks=1,%D9%A1"), "tasks")
    with pytest.raises(ParameterError, match="at most 3 ids"):
        get_ids(QueryDict("tasks=1,2,3,4"), "tasks", limit=3)


def test_integers_fractions_and_choices_are_bounded():
    assert get_int(QueryDict("after=7"), "after", 0) == 7 and get_int(QueryDict(""), "after", 5) == 5
    for query in ("after=%C2%B2", "after=-1", "after=" + "9" * 30):
        with pytest.raises(ParameterError, match="^after: "):
            get_int(QueryDict(query), "after", 0)
    with pytest.raises(ParameterError, match="not one of 25, 50"):
        get_int(QueryDict("per_page=30"), "per_page", 50, allowed=(25, 50))
    assert get_fraction(QueryDict("confidence_min=0.5"), "confidence_min") == 0.5
    for value in ("nan", "2", "½", "١"):
        with pytest.raises(ParameterError):
            get_fraction({"confidence_min": value}, "confidence_min")
    assert get_choice(QueryDict("status=done"), "status", ("done", "open")) == "done"
    with pytest.raises(ParameterError, match="unknown value 'x'"):
        get_choice(QueryDict("status=x"), "status", ("done", "open"))
