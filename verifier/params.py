"""Query parameters read one way by the pages and the API: ids, lists of ids, bounded integers, fractions and choices.

A value is an id only when it is written in ASCII digits and fits the database's bigint: ``str.isdigit()`` also
accepts "²" or "١", which ``int()`` then refuses or reads as another number, and a 30-digit id overflows the column.
Anything else raises ``ParameterError`` naming the parameter; the API answers it with a 400 in its error shape
(verifier/api/errors.py), a page with a 400 page saying what is wrong (verifier/web/errors.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from verifier.errors import ApplicationError

MAX_ID = 2**63 - 1  # PostgreSQL bigint, the type of every primary key
MAX_IDS = 1000  # the longest list of ids a parameter may carry: as many as a bulk action or an export takes
MAX_INTEGER_DIGITS = 18  # bounded integers (sequence numbers, sizes) stay well inside bigint


class ParameterError(ApplicationError):
    """A query parameter whose value cannot be used; ``param`` names it."""

    def __init__(self, param: str, message: str):
        self.param = param
        super().__init__(f"{param}: {message}")


def _ascii_digits(value: str, limit: int) -> bool:
    return 0 < len(value) <= limit and value.isascii() and value.isdecimal()


def is_id(value: str) -> bool:
    """Whether ``value`` is an id: ASCII digits within bigint (so "²", "١", "1e3" and " 1" are not)."""
    return _ascii_digits(value, len(str(MAX_ID))) and int(value) <= MAX_ID


def parse_id(value: str, name: str, hint: str = "an id") -> int:
    if not is_id(value):
        raise ParameterError(name, f"{_shown(value)} is not {hint}")
    return int(value)


def _values(params: Mapping, name: str) -> list[str]:
    """All values of a parameter, repeated or comma-separated, blanks dropped."""
    raw = params.getlist(name) if hasattr(params, "getlist") else params.get(name)
    if raw is None:
        return []
    items = raw if isinstance(raw, list | tuple) else [raw]
    return [part.strip() for item in items for part in str(item).split(",") if part.strip()]


def single(params: Mapping, name: str) -> str:
    """The one value of a parameter ("" when absent); several values are refused."""
    values = _values(params, name)
    if len(values) > 1:
        raise ParameterError(name, "give one value")
    return values[0] if values else ""


def get_id(params: Mapping, name: str, *, required: bool = False, hint: str = "an id") -> int | None:
    value = single(params, name)
    if not value:
        if required:
            raise ParameterError(name, f"{hint} is required")
        return None
    return parse_id(value, name, hint)


def get_ids(params: Mapping, name: str, *, limit: int = MAX_IDS) -> list[int]:
    """``?tasks=1,2,3`` (or repeated): the ids in order; at most ``limit`` of them."""
    values = _values(params, name)
    if len(values) > limit:
        raise ParameterError(name, f"at most {limit} ids, not {len(values)}")
    bad = next((value for value in values if not is_id(value)), None)
    if bad is not None:
        raise ParameterError(name, f"{_shown(bad)} is not an id; give a comma-separated list of ids, e.g. 1,2,3")
    return [int(value) for value in values]


def get_int(params: Mapping, name: str, default: int, *, minimum: int = 0, maximum: int = 10**MAX_INTEGER_DIGITS,
            allowed: Iterable[int] | None = None) -> int:
    """A whole number between ``minimum`` and ``maximum`` (or one of ``allowed``); ``default`` when absent."""
    value = single(params, name)
    if not value:
        return default
    if not _ascii_digits(value.removeprefix("-"), MAX_INTEGER_DIGITS) or int(value) < minimum or int(value) > maximum:
        raise ParameterError(name, f"{_shown(value)} is not a whole number from {minimum} to {maximum}")
    number = int(value)
    if allowed is not None and number not in (choices := tuple(allowed)):
        raise ParameterError(name, f"{number} is not one of {', '.join(map(str, choices))}")
    return number


def get_fraction(params: Mapping, name: str) -> float | None:
    """A number from 0 to 1 (``0.75``), or None when absent."""
    value = single(params, name)
    if not value:
        return None
    try:
        number = float(value) if value.isascii() and len(value) <= 32 else None
    except ValueError:
        number = None
    if number is None:
        raise ParameterError(name, f"{_shown(value)} is not a number")
    if not 0.0 <= number <= 1.0:  # NaN fails both comparisons
        raise ParameterError(name, "must be between 0 and 1")
    return number


def get_choice(params: Mapping, name: str, choices: Iterable[str], default: str = "") -> str:
    value = single(params, name)
    if not value:
        return default
    options = tuple(choices)
    if value not in options:
        raise ParameterError(name, f"unknown value {_shown(value)}; use {', '.join(options)}")
    return value


def get_choices(params: Mapping, name: str, choices: Iterable[str]) -> list[str]:
    """Several values, each one of ``choices`` (repeated or comma-separated)."""
    options = tuple(choices)
    values = _values(params, name)
    unknown = [value for value in values if value not in options]
    if unknown:
        raise ParameterError(name, f"unknown value {_shown(unknown[0])}; use {', '.join(options)}")
    return values


def _shown(value: str) -> str:
    """The value as a message quotes it: short, and with anything unprintable escaped."""
    return repr(value if len(value) <= 40 else value[:40] + "…")
