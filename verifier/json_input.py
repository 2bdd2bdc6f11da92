"""JSON that comes from outside — request bodies (verifier/api/parsers.py) and every imported file (claims, memory
bank, KG sources) — parsed within bounds, so a hostile document is refused with a message instead of a crash:

- nesting deeper than MAX_DEPTH arrays and objects (Python's parser, and everything that walks the result
  afterwards — serializers, renderers, the database — recurse, and 50,000 levels overflow the stack). The depth
  is measured before parsing, by a scan of the brackets outside strings, without recursion;
- numbers the database cannot hold: integers outside 64 bits (a 5,000-digit one is past Python's own limit),
  decimals whose literal is over MAX_NUMBER_CHARS, and ``1e999``, ``NaN`` or ``Infinity`` (no finite value);
- text holding a NUL character (``\\u0000``) or an unpaired surrogate (``\\ud800``): neither can be stored in
  PostgreSQL, encoded as UTF-8 or rendered back.

Every refusal is a ``JSONRefused`` (a ValueError, like ``json.JSONDecodeError`` for malformed JSON).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from verifier.errors import ApplicationError

MAX_DEPTH = 64
MAX_INTEGER = 2**63 - 1
MAX_NUMBER_CHARS = 40

_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_UNSTORABLE_ESCAPE = re.compile(r"\\u(?:0000|d[89a-f])", re.IGNORECASE)  # how JSON text writes those characters


class JSONRefused(ApplicationError):
    """JSON that parses, or would, but holds what KGV refuses to take (the message says what)."""


def nesting_depth(text: str, *, stop_above: int = MAX_DEPTH) -> int:
    """How deeply arrays and objects nest in ``text`` (brackets inside strings do not count); the scan stops as soon
    as it passes ``stop_above``."""
    depth = deepest = 0
    for bracket in _BRACKET.finditer(_STRING.sub('""', text)):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > stop_above:
                break
    return deepest


def _integer(literal: str) -> int:
    if len(literal.lstrip("-")) > len(str(MAX_INTEGER)) or abs(value := int(literal)) > MAX_INTEGER:
        raise JSONRefused(f"the number {_shown(literal)} is too large: whole numbers are limited to 64 bits")
    return value


def _decimal(literal: str) -> float:
    value = float(literal) if len(literal) <= MAX_NUMBER_CHARS else math.inf
    if not math.isfinite(value):
        raise JSONRefused(f"the number {_shown(literal)} has no finite value KGV can store")
    return value


def _constant(name: str):
    raise JSONRefused(f"{name} is not a number JSON allows")


def _shown(literal: str) -> str:
    return literal if len(literal) <= 24 else f"{literal[:12]}…({len(literal)} characters)"


def _check_text(data: Any) -> None:
    """Every string (keys included) free of NUL characters and unpaired surrogates; an explicit stack, no recursion."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and (found := _UNSTORABLE.search(item)):
            if found.group() == "\x00":
                raise JSONRefused("the text holds a NUL character (\\u0000), which no text field accepts")
            raise JSONRefused(f"the text holds an unpaired surrogate (\\u{ord(found.group()):04x}), which is no character")


def parse_json(text: str | bytes) -> Any:
    """``json.loads`` within the bounds of the module docstring: JSONRefused for what it refuses,
    json.JSONDecodeError for what is not JSON (UnicodeDecodeError for bytes that are not UTF-8)."""
    if isinstance(text, bytes | bytearray):
        text = text.decode("utf-8")
    if nesting_depth(text) > MAX_DEPTH:
        raise JSONRefused(f"arrays and objects nest more than {MAX_DEPTH} deep")
    data = json.loads(text, parse_int=_integer, parse_float=_decimal, parse_constant=_constant)
    if _UNSTORABLE.search(text) or _UNSTORABLE_ESCAPE.search(text):  # else no string can hold one
        _check_text(data)
    return data
