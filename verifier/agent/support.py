"""The support set of a run: every evidence item retrieved gets a short key, stable within the run
(the same item retrieved twice keeps its first key); citations are checked against it."""

from __future__ import annotations

from verifier.agent.port import EvidenceItem, ToolResult
from verifier.agent.steps import KeyedItem


class SupportSet:
    def __init__(self) -> None:
        self.items: dict[str, KeyedItem] = {}
        self._by_hash: dict[str, str] = {}

    def add(self, item: EvidenceItem) -> KeyedItem:
        digest = item.content_hash
        if digest in self._by_hash:
            return self.items[self._by_hash[digest]]
        key = f"E{len(self.items) + 1}"
        keyed = KeyedItem(key, item.kind, item.text, dict(item.payload), item.source, digest)
        self.items[key] = keyed
        self._by_hash[digest] = key
        return keyed

    def observe(self, result: ToolResult) -> tuple[str, list[KeyedItem]]:
        """The observation text with each item's line prefixed by its key, and the keyed items."""
        lines = result.text.splitlines()
        keyed_items = []
        for item in result.items:
            keyed = self.add(item)
            keyed_items.append(keyed)
            shown = item.display or item.text
            for index, line in enumerate(lines):
                if line == shown:
                    lines[index] = f"[{keyed.key}] {line}"
                    break
            else:
                lines.append(f"[{keyed.key}] {item.text}")
        return "\n".join(lines), keyed_items

    def check(self, cited: list[str]) -> tuple[list[str], list[str]]:
        """(valid, unknown) keys among those cited."""
        valid = [k for k in cited if k in self.items]
        return valid, [k for k in cited if k not in self.items]

    def keys_text(self) -> str:
        return ", ".join(self.items) or "(none retrieved)"
