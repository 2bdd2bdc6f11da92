"""Configurations under evaluation: the agent, its ablations and the baselines of the same model, as the rows of
the results table and the AgentConfig dict each run receives (their names: verifier/agent/config.py)."""

from __future__ import annotations

from dataclasses import dataclass

from verifier.agent.config import ABLATIONS, MODES, AgentConfig
from verifier.agent.weighing import BRIEF_MODES

# What the brief modes (evidence, reading: no planner, no memory) can be run without: the parts of their brief.
TOOL_ABLATIONS = ("kg-tools", "external-tools", "structural-tools")


@dataclass(frozen=True)
class Configuration:
    mode: str
    ablations: tuple[str, ...] = ()

    @property
    def slug(self) -> str:
        return "-".join([self.mode, *(f"no-{a}" for a in self.ablations)])


# The rows of the papers' results table, in their order: the agent, one ablation at a time, the baselines.
SUITE = (
    Configuration("agent"),
    *(Configuration("agent", (name,)) for name in ABLATIONS),
    Configuration("zero-shot"),
    Configuration("cot"),
    Configuration("self-consistency"),
    Configuration("rag"),
    Configuration("embedding"),
    Configuration("kge"),
    Configuration("rules"),
    Configuration("evidence"),
    # What the weighed verdict owes to each part of the brief, in minutes rather than hours of agent runs.
    *(Configuration("evidence", (name,)) for name in TOOL_ABLATIONS),
    Configuration("reading"),
)


def run_config(mode: str, ablations: tuple[str, ...] = (), *, abstain: bool = False, t_max: int | None = None,
               samples: int | None = None, profile: str | None = None) -> dict:
    """The config dict of every run of an evaluation (keys of AgentConfig); validated here. Without a
    profile, each run gets the one its worker's model calls for (compact on the embedded model)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; one of {', '.join(MODES)}")
    if ablations and mode not in ("agent", *BRIEF_MODES):
        raise ValueError(f"ablations switch off parts of the agent or of its evidence brief; they apply to --mode agent, "
                         f"{' and '.join(BRIEF_MODES)} only")
    if mode in BRIEF_MODES and set(ablations) - set(TOOL_ABLATIONS):
        raise ValueError(f"--mode {mode} asks no planner and recalls no memory: only {', '.join(TOOL_ABLATIONS)} can be "
                         "switched off")
    config: dict = {"mode": mode, "abstain": abstain}
    config.update({ABLATIONS[name]: False for name in ablations})
    if mode == "agent" and profile:
        config["profile"] = profile
    if t_max is not None:
        config["t_max"] = t_max
    if samples is not None:
        config["samples"] = samples
    AgentConfig.from_dict(config)
    return config
