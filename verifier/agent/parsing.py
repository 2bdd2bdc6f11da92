"""Reading what the model wrote: the plan, a ReAct step, a final answer. Lenient about form (quotes,
keyword arguments, stray text, markdown, a model that writes its own Observation), strict about meaning."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_VERDICT = re.compile(r"\[?\s*\**\s*\b(not\s+correct|incorrect|correct|not enough evidence)\b\s*\**\s*\]?", re.IGNORECASE)
# Markers count only at the start of a line (after optional bold): "Final Answer:" inside a quoted passage or
# mid-sentence is text, not the model's answer. Where several appear, the model's own is the last one.
_FINAL = re.compile(r"^[ \t>*_-]*final\s+answer\s*\**\s*[:：]\**", re.IGNORECASE | re.MULTILINE)
_ACTION = re.compile(r"^[ \t>*_-]*action\s*(?:\d+)?\s*\**\s*[:：]\**", re.IGNORECASE | re.MULTILINE)
_THOUGHT = re.compile(r"thought\s*(?:\d+)?\s*[:：]\s*", re.IGNORECASE)
_CALL = re.compile(r"^\s*`*\s*([A-Za-z_][\w ]*?)\s*\((.*)\)\s*`*\s*\.?\s*$", re.DOTALL)
_KEY = re.compile(r"\bE(\d+)\b")


class ParseError(ValueError):
    """The model's text has no usable action or answer; the message is fed back to the model."""


@dataclass
class Plan:
    impression: str  # "correct" | "incorrect" | "" when the model gave none
    reason: str
    steps: str
    raw: str


@dataclass
class FinalAnswer:
    verdict: str  # "correct" | "incorrect" | "not_enough_evidence"
    explanation: str
    cited: list[str] = field(default_factory=list)
    # The language model wrote the explanation (its words are checked before they are shown), not the product (a
    # vote's count, a tool's probability, a fallback's reason).
    by_model: bool = True


@dataclass
class ParsedStep:
    thought: str
    tool: str = ""
    arguments: list[str] | dict[str, str] = field(default_factory=list)
    final: FinalAnswer | None = None


def _verdict_word(text: str) -> str:
    match = _VERDICT.search(text)
    if match is None:
        return ""
    word = " ".join(match.group(1).lower().split())
    return "incorrect" if word == "not correct" else word.replace(" ", "_")


def _after_verdict(text: str) -> str:
    """The words after the verdict token, without the punctuation and "Because" that join them."""
    match = _VERDICT.search(text)
    rest = text[match.end():] if match else text
    rest = re.sub(r"^[\s\]*.:,;-]*", "", rest)
    return re.sub(r"^because\b[\s,:]*", "", rest, flags=re.IGNORECASE).strip()


def cited_keys(text: str) -> list[str]:
    return list(dict.fromkeys(f"E{n}" for n in _KEY.findall(text)))


def parse_plan(text: str) -> Plan:
    """``=== Initial Impression === / [Correct] Because … / === Strategic Plan === / [Step 1 …]``, or
    anything close to it: headers may be missing, the verdict may be bold or unbracketed."""
    parts = re.split(r"=+\s*strategic\s+plan\s*=+", text, maxsplit=1, flags=re.IGNORECASE)
    if len(parts) == 2:
        impression_part, plan_part = parts
    else:
        header = re.search(r"strategic\s+plan\s*:?", text, re.IGNORECASE)
        impression_part, plan_part = (text[: header.start()], text[header.end():]) if header else (text, "")
    impression_part = re.sub(r"=+\s*initial\s+impression\s*=+", "", impression_part, flags=re.IGNORECASE).strip()
    verdict = _verdict_word(impression_part)
    if verdict == "not_enough_evidence":  # an impression must take a side
        verdict = ""
    reason = _after_verdict(impression_part)
    return Plan(impression=verdict, reason=reason, steps=(plan_part or impression_part).strip(), raw=text)


def _last(pattern: re.Pattern, text: str) -> re.Match | None:
    matches = list(pattern.finditer(text))
    return matches[-1] if matches else None


def parse_final(text: str) -> FinalAnswer | None:
    """The last line-anchored ``Final Answer: [Verdict] Because …`` of ``text``, or None."""
    match = _last(_FINAL, text)
    if match is None:
        return None
    body = text[match.end():].strip()
    verdict = _verdict_word(body[:80])
    if not verdict:
        return None
    explanation = _after_verdict(body)
    return FinalAnswer(verdict=verdict, explanation=explanation.strip() or body, cited=cited_keys(body))


def split_arguments(raw: str) -> list[str] | dict[str, str]:
    """``"A, B"``, ``A, "B, C"``, ``entity='A, Inc.', relation=B`` → a positional list or a keyword dict.
    Commas inside single or double quotes do not split."""
    parts, current, quote = [], [], ""
    for char in raw:
        if quote:
            if char == quote:
                quote = ""
            current.append(char)
        elif char in "'\"" and (not current or "".join(current).rstrip().endswith("=") or not "".join(current).strip()):
            quote = char
            current.append(char)
        elif char == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    parts = [p.strip() for p in parts if p.strip()]
    keyword = [re.match(r"^(\w+)\s*=\s*(.*)$", p, re.DOTALL) for p in parts]
    if parts and all(keyword):
        return {m.group(1): _unquote(m.group(2)) for m in keyword}
    return [_unquote(p) for p in parts]


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse_step(text: str) -> ParsedStep:
    """One ReAct step. Anything after a self-written "Observation" is the model imagining, and dropped."""
    text = re.split(r"\n\s*\[?observation\]?\s*\d*\s*[:：]", "\n" + text, maxsplit=1, flags=re.IGNORECASE)[0].strip()
    thought_match = _THOUGHT.search(text)
    body = text[thought_match.end():] if thought_match else text
    final_match, action_match = _last(_FINAL, body), _last(_ACTION, body)
    markers = [m for m in (final_match, action_match) if m]
    cut = min(m.start() for m in markers) if markers else len(body)
    thought = body[:cut].strip()
    if final_match is not None and (action_match is None or final_match.start() > action_match.start()):
        final = parse_final(body)
        if final is None:
            raise ParseError("Could not read the Final Answer. Write 'Final Answer: [Correct] or [Incorrect] Because …' "
                             "citing evidence keys such as [E1].")
        return ParsedStep(thought=thought, final=final)
    if action_match is None:
        raise ParseError("No action found. Write one 'Action: ToolName(arguments)' line, or "
                         "'Final Answer: [Correct] or [Incorrect] Because …' citing evidence keys such as [E1].")
    action_line = (body[action_match.end():].strip().splitlines() or [""])[0].strip()
    call = _CALL.match(action_line)
    if call is None:
        raise ParseError(f"Could not read the action {action_line!r}. Write it as ToolName(argument, …), "
                         "for example KG_Neighbor(Douglas Adams, country of citizenship).")
    return ParsedStep(thought=thought, tool=call.group(1).strip(), arguments=split_arguments(call.group(2)))
