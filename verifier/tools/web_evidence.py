"""Web_Evidence: the top web search snippets for a question, re-ranked by meaning."""

from __future__ import annotations

from verifier.evidence.web import rerank
from verifier.memory import encoder
from verifier.tools.base import EvidenceItem, ToolContext, ToolResult
from verifier.tools.registry import tool

TOP_K = 5
RAW_HITS = 10


@tool("Web_Evidence", category="external")
def web_evidence(ctx: ToolContext, question: str) -> ToolResult:
    """Search the web and return the 5 most relevant snippets with their sources.

    Args:
        question: a short natural-language question or claim to search for
    """
    if ctx.web is None:
        return ToolResult("Web search is not configured for this workbench (set SEARXNG_URL or BRAVE_API_KEY), "
                          "so no web evidence is available; use the KG and encyclopedia tools instead.", ok=False)
    hits = ctx.web.search(question, limit=RAW_HITS)
    if not hits:
        return ToolResult(f"The web search for {question!r} returned nothing.")
    top = rerank(question, hits, encode=encoder.encode, limit=TOP_K)
    shown = [f"- {h.title}: {h.snippet} [{h.url}]" for h in top]
    items = [EvidenceItem("web", f"{h.title}: {h.snippet}", {"url": h.url, "provider": h.source}, h.url, display=line)
             for h, line in zip(top, shown, strict=True)]
    lines = [f"Web results for {question!r} ({ctx.web.name}):", *shown]
    return ToolResult("\n".join(lines), items)
