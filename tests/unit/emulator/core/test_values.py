"""emulator/core/values.py: booleans and integers as CloudFormation and the APIs pass them."""

import pytest

from emulator.core.values import parse_bool, parse_int


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        ("true", True),
        (" TRUE ", True),
        ("True", True),
        (False, False),
        ("false", False),
        ("yes", False),
        (None, False),
        (1, False),
        ("", False),
    ],
)
def test_parse_bool(value, expected):
    assert parse_bool(value) is expected


@pytest.mark.parametrize(
    ("value", "expected"), [(None, 7), ("", 7), ("10", 10), (-1, -1), ("-1", -1)]
)
def test_parse_int_takes_numbers_and_strings_and_defaults_when_unset(value, expected):
    assert parse_int(value, 7) == expected


@pytest.mark.parametrize("value", ["ten", "1.5", [], {}])
def test_parse_int_refuses_what_is_not_an_integer(value):
    with pytest.raises(ValueError, match="not an integer"):
        parse_int(value, 0)
