"""Reading the text files a curator hands over (KG files, flagged triples): one rule for decoding them.

UTF-8, with or without the byte-order mark a spreadsheet writes. A line that is not UTF-8, or that holds
a NUL byte (a binary file renamed), is a problem named by its line number, never a crash.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_ID_CHARS = 255  # the longest entity or relation id (or IRI) the KG stores
MAX_LABEL_CHARS = 500  # the longest label or alias it stores; a longer one is cut, with an ellipsis
NUL_PROBLEM = "holds a NUL byte: this is not a text file"  # every importer's word for it (claims too)


@dataclass(frozen=True)
class Problem:
    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def clipped(text: str) -> str:
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"


def text_lines(path: Path, problems: list[Problem]) -> Iterator[tuple[int, str]]:
    """(line number, text without its line break) of each line, streamed; a line that is not UTF-8 or holds
    a NUL byte is added to ``problems`` and skipped."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as exc:
                problems.append(Problem(path, number, f"not UTF-8 (byte 0x{raw[exc.start]:02x}); save the file as UTF-8"))
                continue
            if "\x00" in line:
                problems.append(Problem(path, number, NUL_PROBLEM))
                continue
            yield number, line.rstrip("\r\n")


def read_text(path: Path) -> tuple[str | None, Problem | None]:
    """The file as text: UTF-8, with or without the byte-order mark a spreadsheet writes; otherwise the
    problem, naming the first line that is not UTF-8 or that holds a NUL byte (a binary file)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        return None, Problem(path, 0, f"cannot read the file: {exc.strerror}")
    data = data.removeprefix(b"\xef\xbb\xbf")  # decoded without the mark, so error offsets index ``data``
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return None, Problem(path, line, f"line {line} is not UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8")
    if "\x00" in text:
        line = text[: text.index("\x00")].count("\n") + 1
        return None, Problem(path, line, f"line {line} {NUL_PROBLEM}")
    return text, None
