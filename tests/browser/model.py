"""The scripted model of the browser tests: a short, well-formed investigation of whatever claim it is given, and
a claim's triples written as over-eagerly as the embedded 1.5B model wrote them (the triple the claim states and
triples it does not), so the product, not the stand-in, must keep a claim to what it says.

Each call waits a little so a browser can watch the steps arrive one by one; with ``hold`` set to an unset
``threading.Event`` the final answers wait for it, so a test can look at a run in flight."""

from __future__ import annotations

import re
import threading
import time

from tests.openai_server import prompt_text

# What the embedded 1.5B model wrote for these claims: the stated triple and invented ones beside it.
OVER_EAGER = {
    "Douglas Adams was born in Cambridge.": "Douglas Adams || place of birth || Cambridge\n"
                                            "Douglas Adams || country of origin || unknown_1",
    "Paul McCartney is not a singer.": "NOT Paul McCartney || member of sports team || singer\n"
                                       "Paul McCartney || member of political party || American Academy of Arts and Sciences",
    "x": "Marietta Shaginyan || creator || Marietta Shaginyan",
}
HOLD_TIMEOUT = 60.0


class ScriptedInvestigator:
    def __init__(self, *, delay: float = 0.6, verdict: str = "Correct"):
        self.delay, self.verdict = delay, verdict
        self.hold: threading.Event | None = None

    def __call__(self, body: dict) -> str:
        time.sleep(self.delay)
        messages = body.get("messages") or []
        system = messages[0].get("content", "") if messages else ""
        text = prompt_text(body)
        if system.startswith("You rewrite a claim"):
            return self.pseudo_subgraph(messages[-1].get("content", ""))
        match = re.search(r"^In words: <<<claim: (.*)>>>$", text, re.MULTILINE)
        head, *_, tail = match.group(1).split(" — ") if match else ("the head", "the tail")
        if system.startswith("You are a verification strategist"):
            return (f"=== Initial Impression ===\n[{self.verdict}] Because {head} is known to be linked to {tail}.\n"
                    f"=== Strategic Plan ===\n[Step 1] KG_Neighbor({head})\n[Step 2] KG_Path({head}, {tail})")
        done = sum(1 for m in messages if m.get("role") == "assistant")
        if done == 0:
            return f"Thought: First the facts the graph records about {head}.\nAction: KG_Neighbor({head})"
        if done == 1:
            return f"Thought: Now how {head} and {tail} are connected.\nAction: KG_Path({head}, {tail})"
        keys = re.findall(r"\[(E\d+)\]", "\n".join(m.get("content") or "" for m in messages if m.get("role") == "user"))
        cite = f"[{keys[0]}]" if keys else ""
        if self.hold is not None:
            self.hold.wait(HOLD_TIMEOUT)
        return (f"Thought: The evidence {cite} settles it.\n"
                f"Final Answer: [{self.verdict}] Because the retrieved facts {cite} connect {head} and {tail}.")

    @staticmethod
    def pseudo_subgraph(prompt: str) -> str:
        """OVER_EAGER's reply for the claim; otherwise the claim's first two named entities, in the claim's order,
        joined by the first relation offered, and the first of them tied to an unknown by the last relation offered
        (a triple no claim here states)."""
        claim = prompt.rsplit("Claim: ", 1)[-1]
        if claim in OVER_EAGER:
            return OVER_EAGER[claim]
        named = re.search(r"names them: (.*)$", prompt, re.MULTILINE).group(1).split(", ")
        offered = re.findall(r"^- ([^:\n]+)", prompt.split("\n\n", 1)[0], re.MULTILINE)
        first, second = sorted(named, key=claim.find)[:2]
        return f"{first} || {offered[0]} || {second}\n{first} || {offered[-1]} || unknown_1"
