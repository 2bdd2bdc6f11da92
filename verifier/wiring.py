"""Wiring: the tools of a run, bound to the KG backend, text sources and caches this deployment has."""

from __future__ import annotations

import functools

from django.conf import settings

from kgv_web.embedded_llm import MODELS
from verifier.agent.config import MODEL_FREE_MODES, AgentConfig, RunConfig
from verifier.agent.llm import OpenAICompatibleLLM, PriceTable
from verifier.agent.steps import Claim
from verifier.evidence.corpus import PostgresCorpus
from verifier.evidence.mediawiki import MediaWikiSource
from verifier.evidence.web import provider_from_env
from verifier.kg.base import KGBackend
from verifier.kg.sparql import SparqlBackend
from verifier.kg.store import PostgresKG
from verifier.models import KnowledgeGraph
from verifier.structure.evidence import StructuralEvidence
from verifier.tools.base import ToolContext
from verifier.tools.cache import DjangoToolCache
from verifier.tools.names import Resolved, resolve_entity, resolve_relation
from verifier.tools.registry import Toolbox, available


def backend_for(kg: KnowledgeGraph) -> KGBackend:
    if kg.kind == KnowledgeGraph.Kind.SPARQL:
        return SparqlBackend(
            kg.endpoint_url or settings.WIKIDATA_SPARQL_URL,
            user_agent=settings.KGV_USER_AGENT,
            timeout=settings.SPARQL_TIMEOUT_SECONDS,
            data_version=str(kg.version),
        )
    return PostgresKG(kg)


def query_triple(kg: KnowledgeGraph, head: str, relation: str, tail: str) -> Claim:
    """The triple under verification, by ids, from ids or names; ValueError says which part is unclear."""
    context = ToolContext(kg=backend_for(kg))
    parts = [resolve_entity(context, head), resolve_relation(context, relation), resolve_entity(context, tail)]
    problems = [p.message for p in parts if not isinstance(p, Resolved)]
    if problems:
        raise ValueError("; ".join(problems))
    h, r, t = parts
    return Claim(h.id, r.id, t.id, h.label, r.label, t.label)


def build_toolbox(kg: KnowledgeGraph, query: Claim | None = None, *, kg_tools: bool = True,
                  external_tools: bool = True, structural_tools: bool = True, shared_cache: bool = True) -> Toolbox:
    encyclopedia = None
    if settings.WIKIPEDIA_API_URL:
        encyclopedia = MediaWikiSource(settings.WIKIPEDIA_API_URL, user_agent=settings.KGV_USER_AGENT)
    context = ToolContext(
        kg=backend_for(kg),
        corpus=PostgresCorpus(kg) if kg.kind == KnowledgeGraph.Kind.LOCAL else None,
        encyclopedia=encyclopedia,
        web=provider_from_env(settings.WEB_SEARCH),
        query=query,
        wiki_alpha=settings.KGV_WIKI_ALPHA,
        structure=StructuralEvidence(kg) if kg.kind == KnowledgeGraph.Kind.LOCAL else None,
    )
    # A tool with nothing behind it (no web search configured) is not offered: the model would only
    # spend steps learning that it answers nothing.
    specs = [spec for spec in available(kg_tools=kg_tools, external_tools=external_tools, structural_tools=structural_tools)
             if not (spec.name == "Web_Evidence" and context.web is None)
             and not (spec.category == "structural" and context.structure is None)]
    return Toolbox(
        context,
        specs=specs,
        shared_cache=DjangoToolCache() if shared_cache else None,
    )


# What each profile runs with unless a run's config says otherwise.
# The verdict probe is off: on the embedded model it costs 2–20 s a run (llama-cpp-python re-reads the context to
# return log-probabilities) and the fitted weighing gave its log-odds no weight.
COMPACT_DEFAULTS = {"t_max": 4, "memory_k": 2, "max_step_tokens": 160, "verdict_probe": False}


def default_profile(llm=None) -> str:
    """KGV_AGENT_PROFILE, where "auto" means compact on the embedded local model and paper elsewhere (the model
    is ``llm`` when given, else the configured endpoint)."""
    if settings.KGV_AGENT_PROFILE != "auto":
        return settings.KGV_AGENT_PROFILE
    base_url, model = (getattr(llm, "base_url", None), getattr(llm, "model", None)) if llm is not None else llm_endpoint()
    return "compact" if not base_url or is_embedded(base_url, model) else "paper"


def is_embedded(base_url: str, model: str) -> bool:
    """Whether the endpoint is the embedded local model (one of its models, served on loopback)."""
    return model in MODELS and "127.0.0.1" in base_url


def settle_config(request: dict | None, llm=None) -> RunConfig:
    """A run's configuration, validated and settled once, when the run is created: the request as given and the
    AgentConfig it runs with, where what the request left open is filled in from the model that will answer (``llm``,
    else the configured endpoint): an agent run's profile and that profile's defaults (the other modes get the paper
    defaults), whether the endpoint takes a grammar (``build_llm``'s rule) and whether it calls tools natively.
    ValueError names what the request gets wrong (AgentConfig.from_dict)."""
    request = {} if request is None else request
    asked = AgentConfig.from_dict(request)
    if asked.mode != "agent":
        filled = {**profile_defaults("paper"), **request}
    else:
        profile = request.get("profile") or default_profile(llm)
        filled = {**profile_defaults(profile), **request, "profile": profile}
    grammar = False  # a model-free mode asks no model
    if asked.mode not in MODEL_FREE_MODES:
        grammar = getattr(llm, "supports_grammar", False) if llm is not None else takes_grammar(llm_endpoint()[0])
    agent = AgentConfig.from_dict({"use_grammar": grammar, "tool_calling": settings.LLM_TOOL_CALLING, **filled})
    return RunConfig(request=dict(request), agent=agent)


def profile_defaults(profile: str) -> dict:
    if profile == "compact":
        return dict(COMPACT_DEFAULTS)
    return {"t_max": settings.KGV_T_MAX, "memory_k": settings.KGV_MEMORY_K}


# The embedded model serves one request at a time on a shared CPU: a call that times out is still being
# computed, so a retry would only queue the same work behind it. It gets a long timeout and no retry.
EMBEDDED_TIMEOUT_SECONDS = 900.0


@functools.lru_cache(maxsize=8)
def _llm(base_url: str, model: str, grammar: bool):
    embedded = is_embedded(base_url, model)
    return OpenAICompatibleLLM(
        base_url,
        settings.LLM_API_KEY,
        model,
        temperature=settings.LLM_TEMPERATURE,
        timeout=max(settings.LLM_TIMEOUT_SECONDS, EMBEDDED_TIMEOUT_SECONDS) if embedded else settings.LLM_TIMEOUT_SECONDS,
        max_retries=0 if embedded else settings.LLM_MAX_RETRIES,
        prices=PriceTable.from_env(settings.LLM_PRICES),
        supports_grammar=grammar,
    )


def llm_endpoint() -> tuple[str, str]:
    """(base URL, model name) of the configured endpoint (settings; the embedded model's, once this process started
    it: kgv_web.embedded_llm.provide_local_llm); the URL is empty when none is configured."""
    return settings.LLM_BASE_URL, settings.LLM_MODEL


def build_llm(*, use_grammar: bool | None = None):
    """The configured OpenAI-compatible endpoint (``llm_endpoint``) as the agent's LLM port, one client per process."""
    base_url, model = llm_endpoint()
    if not base_url:
        raise RuntimeError("no LLM endpoint: set LLM_BASE_URL, or start the embedded local model (make demo)")
    return _llm(base_url, model, bool(use_grammar if use_grammar is not None else takes_grammar(base_url)))


def takes_grammar(base_url: str) -> bool:
    """Whether steps are asked under a grammar by default: LLM_GRAMMAR, else for a model served on loopback (a
    llama.cpp server, the embedded model)."""
    return settings.LLM_LOCAL_GRAMMAR or "127.0.0.1" in base_url
