"""The tool registry: each tool is declared once, with ``@tool``, as a plain function.

A tool's name, description and argument schema come from its signature and docstring, and serve the
text ReAct prompt and OpenAI tool-calling alike. Calls are validated against the signature; an unknown
tool or bad arguments come back as an observation listing what is valid, so the model can correct
itself instead of the run failing. Results are cached (see verifier/tools/cache.py).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import logging
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from verifier.evidence.base import EvidenceError
from verifier.kg.base import BackendError
from verifier.tools.base import ToolContext, ToolResult
from verifier.tools.cache import ToolCache, cache_key

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Parameter:
    name: str
    description: str
    required: bool


@dataclass(frozen=True)
class ToolSpec:
    name: str
    summary: str
    parameters: tuple[Parameter, ...]
    function: Callable[..., ToolResult]
    category: str  # "kg", "structural" or "external": what the ablation switches turn off
    code_hash: str  # of the tool's module: a changed tool does not answer from old cache entries

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(p.name if p.required else p.name + '?' for p in self.parameters)})"

    def json_schema(self) -> dict:
        return {
            "type": "object",
            "properties": {p.name: {"type": "string", "description": p.description} for p in self.parameters},
            "required": [p.name for p in self.parameters if p.required],
            "additionalProperties": False,
        }

    def openai_tool(self) -> dict:
        return {"type": "function", "function": {"name": self.name, "description": self.summary, "parameters": self.json_schema()}}


TOOLS: dict[str, ToolSpec] = {}


def _docstring_parts(function: Callable) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(function) or ""
    summary, _, rest = doc.partition("\nArgs:\n")
    arguments = {}
    for line in rest.splitlines():
        match = re.match(r"\s*(\w+):\s*(.+)", line)
        if match:
            arguments[match.group(1)] = match.group(2).strip()
    return " ".join(summary.split()), arguments


def _is_optional(annotation) -> bool:
    return isinstance(annotation, types.UnionType) and type(None) in typing.get_args(annotation)


def tool(name: str, *, category: str) -> Callable:
    """Register ``function(ctx, arg, …) -> ToolResult`` as the tool ``name``. Every argument after the
    context must be a ``str`` (or ``str | None`` with a default) documented under ``Args:``."""

    def register(function: Callable[..., ToolResult]) -> Callable[..., ToolResult]:
        summary, documented = _docstring_parts(function)
        hints = typing.get_type_hints(function)
        parameters = []
        for parameter in list(inspect.signature(function).parameters.values())[1:]:
            annotation = hints.get(parameter.name)
            if annotation is not str and not _is_optional(annotation):
                raise TypeError(f"{name}: argument {parameter.name} must be typed str or str | None")
            if parameter.name not in documented:
                raise TypeError(f"{name}: argument {parameter.name} is not described under Args:")
            parameters.append(Parameter(parameter.name, documented[parameter.name], parameter.default is inspect.Parameter.empty))
        if name in TOOLS:
            raise ValueError(f"tool {name} is declared twice")
        module_source = inspect.getsource(sys.modules[function.__module__])
        code_hash = hashlib.sha256(module_source.encode()).hexdigest()[:12]
        TOOLS[name] = ToolSpec(name, summary, tuple(parameters), function, category, code_hash)
        return function

    return register


def _load_tools() -> None:
    # Importing the tool modules runs their @tool declarations. Here, at the first use of the registry, not at the
    # top: each tool module imports this one for its decorator.
    from verifier.tools import (  # noqa: F401
        kg_definition,
        kg_neighbor,
        kg_path,
        kg_plausibility,
        kg_rules,
        read_sentences,
        web_evidence,
        wiki_evidence,
    )


def available(*, kg_tools: bool = True, external_tools: bool = True, structural_tools: bool = True) -> list[ToolSpec]:
    _load_tools()
    allowed = {"kg": kg_tools, "external": external_tools, "structural": structural_tools}
    return [spec for spec in TOOLS.values() if allowed[spec.category]]


def describe(specs: Sequence[ToolSpec]) -> str:
    """The tool list as written into a text ReAct prompt."""
    lines = []
    for spec in specs:
        arguments = "; ".join(f"{p.name}: {p.description}" for p in spec.parameters)
        lines.append(f"- {spec.signature}: {spec.summary} Arguments: {arguments}")
    return "\n".join(lines)


class Toolbox:
    """The tools available to one run, bound to its context and caches."""

    def __init__(self, context: ToolContext, *, specs: Sequence[ToolSpec] | None = None,
                 shared_cache: ToolCache | None = None):
        self.context = context
        self.specs = {s.name: s for s in (specs if specs is not None else available())}
        self.run_cache: dict[str, dict] = {}
        self.shared_cache = shared_cache

    @property
    def names(self) -> list[str]:
        return list(self.specs)

    def describe(self) -> str:
        return describe(list(self.specs.values()))

    def openai_tools(self) -> list[dict]:
        return [spec.openai_tool() for spec in self.specs.values()]

    def relation_schema(self) -> str:
        query = self.context.query
        profile = self.context.kg.relation(query.relation) if query is not None else None
        return profile.text() if profile else ""

    def call(self, name: str, arguments: Mapping[str, str] | Sequence[str]) -> ToolResult:
        spec = self._find(name)
        if spec is None:
            return ToolResult(f"Unknown tool {name!r}. Valid tools:\n{describe(list(self.specs.values()))}", ok=False)
        bound, problem = _bind(spec, arguments)
        if problem:
            return ToolResult(f"{problem}. Usage: {spec.signature} — " + "; ".join(
                f"{p.name}: {p.description}" for p in spec.parameters), ok=False)
        key = cache_key(self.context.kg.version, f"{spec.name}@{spec.code_hash}", bound, self.context.exclude)
        # Structural answers depend on the KG's model and its calibration, which change without the KG's version
        # (a retraining, a recalibration); they take milliseconds, so they are cached within a run only.
        shared = self.shared_cache if spec.category != "structural" else None
        cached = self.run_cache.get(key) or (shared.get(key) if shared else None)
        if cached is not None:
            self.run_cache[key] = cached
            return ToolResult.from_dict(cached, cached=True)
        try:
            result = spec.function(self.context, **bound)
        except (BackendError, EvidenceError) as exc:
            # Not cached: an endpoint that is down now may answer on the next call.
            return ToolResult(f"{spec.name} could not get an answer: {exc}", ok=False)
        data = result.to_dict()
        self.run_cache[key] = data
        if shared is not None and result.ok:
            shared.set(key, data)
        return result

    def _find(self, name: str) -> ToolSpec | None:
        if name in self.specs:
            return self.specs[name]
        folded = {n.lower().replace("_", ""): s for n, s in self.specs.items()}
        return folded.get(name.lower().replace("_", "").replace(" ", ""))


def _bind(spec: ToolSpec, arguments: Mapping[str, str] | Sequence[str]) -> tuple[dict[str, str], str]:
    names = [p.name for p in spec.parameters]
    if isinstance(arguments, str):
        arguments = [arguments]
    if isinstance(arguments, Mapping):
        unknown = [k for k in arguments if k not in names]
        if unknown:
            return {}, f"{spec.name} has no argument {', '.join(map(repr, unknown))}"
        bound = {k: v for k, v in arguments.items()}
    else:
        if len(arguments) > len(names):
            return {}, f"{spec.name} takes at most {len(names)} argument(s), got {len(arguments)}"
        bound = dict(zip(names, arguments, strict=False))
    bound = {k: (v if isinstance(v, str) else json.dumps(v) if v is not None else None) for k, v in bound.items()}
    bound = {k: v.strip() for k, v in bound.items() if v is not None and v.strip()}
    missing = [p.name for p in spec.parameters if p.required and p.name not in bound]
    if missing:
        return {}, f"{spec.name} needs {', '.join(missing)}"
    return bound, ""
