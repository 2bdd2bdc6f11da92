"""The API's JSON parser: DRF's, reading the body through verifier.json_input's bounds, so a body nested 50,000 deep,
``{"task": 1e999}`` or a ``"\\ud800"`` escape is a 400 naming the problem instead of a server error."""

from __future__ import annotations

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from verifier.json_input import parse_json


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            return parse_json(stream.read().decode(encoding))
        except ValueError as exc:  # malformed JSON, not the charset, or refused by the bounds
            raise ParseError(f"JSON parse error: {exc}") from None
