"""What a run of the agent may be asked to do: its mode, its profile and their settings, each bounded; and the names
the results tables, forms and commands give a configuration (its mode's label, the parts switched off).

A run's JSON configuration becomes an ``AgentConfig`` (``from_dict``), which refuses unknown keys, wrong types and
values outside ``BOUNDS`` with a message naming them, before a run exists. What the request leaves open (the profile,
its defaults, the endpoint's grammar) is filled in once, when the run is created (verifier/wiring.py settle_config):
the run keeps the request as given beside the settled ``AgentConfig`` (a ``RunConfig``) and runs with the latter as is.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import NamedTuple

MODES = ("agent", "zero-shot", "cot", "self-consistency", "rag", "embedding", "kge", "rules", "evidence", "reading")


class StructuralBaseline(NamedTuple):
    """A baseline deciding by one tool's calibrated probability: the tool, the evidence field holding it, what it is."""
    tool: str
    field: str
    what: str


# Baselines that decide from one structural tool's calibrated probability, without a language model. `embedding` is
# the embedding classifier alone; `kge` the plausibility (the embedding, the entities' text and the rules weighed
# together).
STRUCTURAL_MODES = {
    "embedding": StructuralBaseline("KG_Plausibility", "embedding_probability", "the embedding classifier's calibrated probability"),
    "kge": StructuralBaseline("KG_Plausibility", "probability", "the calibrated structural probability"),
    "rules": StructuralBaseline("KG_Rules", "probability", "the calibrated structural probability"),
}
MODEL_FREE_MODES = (*STRUCTURAL_MODES, "evidence")
MODEL_ONLY_MODES = ("zero-shot", "cot", "self-consistency")  # the model alone, no tool
PROFILES = ("paper", "compact")


@dataclass(frozen=True)
class AgentConfig:
    mode: str = "agent"
    t_max: int = 10
    memory_k: int = 3
    use_memory: bool = True
    use_planning: bool = True
    kg_tools: bool = True
    external_tools: bool = True
    structural_tools: bool = True  # KG_Plausibility and KG_Rules
    abstain: bool = False
    use_grammar: bool = False  # GBNF-constrained steps, for small local models on llama.cpp
    tool_calling: bool = False  # the endpoint's native tool calls instead of "Action: Tool(args)" text
    # "paper": the method as published (for capable endpoints); "compact": evidence brief, focused reading and a
    # short loop for small local models (verifier/agent/compact.py).
    profile: str = "paper"
    max_step_tokens: int = 384
    # After the answer, one token with log-probabilities: how sure the model is (a weighing feature, for small models
    # that lean Correct in their answers but may still rank claims in their log-odds).
    verdict_probe: bool = False
    # The compact profile's sentence judgments (one call each) are asked only while the weighing in force weighs
    # them; on, they are asked always (to label runs for fitting a weighing that might).
    judge_unweighed: bool = False
    samples: int = 5  # self-consistency
    sample_temperature: float = 0.7

    @property
    def uses_structure(self) -> bool:
        """Whether the structural model bears on the verdict (every mode but the model-only baselines)."""
        return self.structural_tools and self.mode not in MODEL_ONLY_MODES

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown mode {self.mode!r}; one of {', '.join(MODES)}")
        if self.profile not in PROFILES:
            raise ValueError(f"unknown profile {self.profile!r}; one of {', '.join(PROFILES)}")
        for name, spec in self.__dataclass_fields__.items():
            _check_setting(name, getattr(self, name), spec.type)

    @classmethod
    def from_dict(cls, data: dict) -> AgentConfig:
        """The configuration a run's JSON asks for; unknown keys, wrong types and values outside BOUNDS are
        refused with a ValueError that names them."""
        if not isinstance(data, dict):
            raise ValueError('a configuration is a JSON object, e.g. {"t_max": 8}')
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"unknown setting(s) {', '.join(map(str, unknown))}; known: {', '.join(cls.__dataclass_fields__)}")
        return cls(**data)

    def to_dict(self) -> dict:
        """Every setting, as a run stores it (``from_dict`` reads it back)."""
        return asdict(self)


@dataclass(frozen=True)
class RunConfig:
    """A run's configuration, settled once: the request as given and the AgentConfig the run runs with (the request
    with what it left open filled in)."""
    request: dict
    agent: AgentConfig


# What a run may ask for: every setting that spends model calls or tokens is bounded.
BOUNDS = {"t_max": (1, 30), "memory_k": (0, 10), "max_step_tokens": (16, 4096), "samples": (1, 20),
          "sample_temperature": (0.0, 2.0)}


def _check_setting(name: str, value, kind: str) -> None:
    if kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, not {value!r}")
        return
    if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)):
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    if kind == "float" and (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)):
        raise ValueError(f"{name} must be a number, not {value!r}")
    if kind == "str" and not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {value!r}")
    if name in BOUNDS:
        low, high = BOUNDS[name]
        if not low <= value <= high:
            raise ValueError(f"{name} must be between {low} and {high}, not {value!r}")


# Ablation name (command line, tables) → the AgentConfig switch it turns off.
ABLATIONS = {
    "memory": "use_memory",
    "planning": "use_planning",
    "kg-tools": "kg_tools",
    "external-tools": "external_tools",
    "structural-tools": "structural_tools",
}
MODE_LABELS = {
    "agent": "KGV-Agent",
    "zero-shot": "Zero-shot",
    "cot": "CoT",
    "self-consistency": "Self-consistency",
    "rag": "Standard RAG",
    "embedding": "Embedding classifier (the network alone)",
    "kge": "KGE plausibility",
    "rules": "Mined rules",
    "evidence": "Evidence brief, weighed (no LLM)",
    "reading": "Evidence brief + the LLM reading the article, weighed",
}


def parse_ablations(text: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """``"memory,planning"`` → ("memory", "planning") in the canonical order; ValueError names unknown parts."""
    if not text:
        return ()
    parts = [p.strip() for p in text.split(",")] if isinstance(text, str) else [str(p).strip() for p in text]
    unknown = [p for p in parts if p and p not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown ablation {', '.join(unknown)}; choose from {', '.join(ABLATIONS)}")
    return tuple(name for name in ABLATIONS if name in parts)


def configuration_label(mode: str, ablations, *, abstain: bool = False, samples: int | None = None,
                        profile: str | None = None) -> str:
    """How results tables and pages name a configuration: "KGV-Agent − memory (abstain)"."""
    label = MODE_LABELS.get(mode, mode)
    if profile == "compact":
        label += " (compact)"
    if mode == "self-consistency":
        label += f" (k={samples or AgentConfig.samples})"
    for name in parse_ablations(list(ablations or ())):
        label += f" − {name.replace('-', ' ')}"
    return label + (" (abstain)" if abstain else "")
