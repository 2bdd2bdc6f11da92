"""Template helpers shared by the workbench pages: the signed-in user's role, the current area of the
navigation, query strings that keep the page's filters, readable evidence kinds, and report cells."""

from __future__ import annotations

import json
import re
from urllib.parse import unquote, urlsplit

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from verifier import roles
from verifier.models import SupportItem

register = template.Library()

# Navigation areas by path prefix; the queue is the home page, and a run or task is opened from it.
SECTIONS = (("/memory/", "memory"), ("/evaluations/", "evaluations"), ("/audit/", "audit"), ("/webhooks/", "webhooks"),
            ("/entities/", "entities"), ("/claims/", "claims"), ("/kg-audits/", "kg-audits"), ("/kgs/", "kg-audits"),
            ("/reviewers/", "reviewers"), ("/confidence/", "confidence"),
            ("/api/", "api"), ("/runs/", "queue"), ("/tasks/", "queue"), ("/import/", "queue"))


@register.filter
def role(user) -> str:
    """The user's highest role, or "" (no role)."""
    return roles.role_of(user) or ""


@register.filter
def has_role(user, needed: str) -> bool:
    return roles.has_role(user, needed)


@register.filter
def section(path: str) -> str:
    """The navigation area a path belongs to ("queue", "memory", …)."""
    if path == "/":
        return "queue"
    return next((name for prefix, name in SECTIONS if path.startswith(prefix)), "")


@register.simple_tag(takes_context=True)
def query_with(context, **changes) -> str:
    """The current query string with ``changes`` applied (None or "" removes a parameter); a change of any
    filter other than the page itself goes back to page 1."""
    params = context["request"].GET.copy()
    if any(name != "page" for name in changes):
        params.pop("page", None)
    for name, value in changes.items():
        if value in (None, ""):
            params.pop(name, None)
        else:
            params[name] = value
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"


@register.simple_tag(takes_context=True)
def sort_toggle(context, key: str) -> str:
    """The query string that sorts by ``key``, descending first, ascending when already descending."""
    current = context["request"].GET.get("sort", "-created")
    return query_with(context, sort=key if current == f"-{key}" else f"-{key}")


@register.filter
def as_json(value) -> str:
    """A stored JSON value as compact JSON text (audit before/after values)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


KIND_LABELS = dict(SupportItem.Kind.choices)
RULE_ROLES = {"for": "for the claim", "against": "against the claim"}


@register.filter
def kind_label(kind: str) -> str:
    """A support item's kind as people read it ("plausibility" → "Structural plausibility")."""
    return KIND_LABELS.get(kind, kind)


@register.filter
def evidence_kind(item) -> str:
    """The kind of a support item with what its payload adds: the probability of a plausibility score,
    which side of the claim a rule is on."""
    label = kind_label(item.kind)
    payload = item.payload if isinstance(item.payload, dict) else {}
    if item.kind == SupportItem.Kind.PLAUSIBILITY and isinstance(payload.get("probability"), int | float):
        return f"{label} · P(true) {payload['probability']:.2f}"
    if item.kind == SupportItem.Kind.RULE and payload.get("role") in RULE_ROLES:
        return f"{label} · {RULE_ROLES[payload['role']]}"
    return label


# A KG backend's cache version in an evidence source: "codex-s (local:codex-s#1:v1@1796451280)" names the KG codex-s.
BACKEND_VERSION = re.compile(r"\s*\((?:local|sparql):[^)]*\)")


@register.filter
def source_label(source: str) -> str:
    """An evidence item's source as a curator reads it: a KG by its name, without the version string the tools record
    for their caches (the page keeps the whole source in the cell's title)."""
    return BACKEND_VERSION.sub("", source or "")


URL_LABEL_CHARS = 40


@register.filter
def url_label(url: str) -> str:
    """A link's text for a long URL: its host and path, shortened to URL_LABEL_CHARS with an ellipsis (the link and its
    title keep the whole URL), so that a narrow column wraps at spaces instead of breaking the URL letter by letter."""
    parts = urlsplit(url or "")
    text = unquote(parts.netloc.removeprefix("www.") + parts.path.rstrip("/")) or (url or "")
    return text if len(text) <= URL_LABEL_CHARS else text[:URL_LABEL_CHARS - 1] + "…"


LONG_TOKEN = re.compile(r"\S{24,}")


@register.filter
def report_text(value) -> str:
    """Text for a report cell, escaped, its lines kept, and every long unbroken token (a URL, an id path, a
    hash) marked as breakable anywhere: PDF layout wraps only at spaces and would run such a token off the page."""
    escaped = str(escape(value if value is not None else ""))
    wrapped = LONG_TOKEN.sub(lambda m: f'<span class="long">{m.group(0)}</span>', escaped)
    return mark_safe(wrapped.replace("\r\n", "\n").replace("\n", "<br>"))  # noqa: S308 — escaped above
