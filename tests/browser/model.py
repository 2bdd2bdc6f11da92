"""The scripted model of the browser tests: a short, well-formed investigation of whatever claim it is given, and
a claim's triples written as over-eagerly as the embedded 1.5B model wrote them (the triple the claim states and
triples it does not), so the product, not the stand-in, must keep a claim to what it says.

Each call waits a little so a browser can watch the steps arrive one by one; a test can hold the calls about a claim
(``hold``/``release``) to keep a worker slot busy for as long as it needs."""

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
HOLD_SECONDS = 120  # a held claim is let go after this, whatever the test does: no call hangs for ever


class ScriptedInvestigator:
    def __init__(self, *, delay: float = 0.6, verdict: str = "Correct"):
        self.delay, self.verdict = delay, verdict
        self._held: dict[str, threading.Event] = {}

    def hold(self, claim: str) -> None:
        """Hold every call about ``claim`` (its "In words" line: "Paris — country — France") until ``release``: a
        run of it keeps its worker slot busy, as a long investigation does."""
        self._held[claim] = threading.Event()

    def release(self, claim: str | None = None) -> None:
        """Let the calls about ``claim`` (None: every held claim) go on."""
        for name in [claim] if claim else list(self._held):
            if event := self._held.pop(name, None):
                event.set()

    def __call__(self, body: dict) -> str:
        time.sleep(self.delay)
        messages = body.get("messages") or []
        system = messages[0].get("content", "") if messages else ""
        text = prompt_text(body)
        if system.startswith("You rewrite a claim"):
            return self.pseudo_subgraph(messages[-1].get("content", ""))
        match = re.search(r"^In words: <<<claim: (.*)>>>$", text, re.MULTILINE)
        if match and (held := self._held.get(match.group(1).strip())) is not None:
            held.wait(HOLD_SECONDS)
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
