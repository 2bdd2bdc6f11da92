"""Charts of evaluation metrics with matplotlib (Agg, no display): confusion matrix, tool-usage shares,
accuracy per relation, the reliability diagram of the verdicts' confidences, and ablation/baseline bars
across the configurations of a suite.

Each function takes metric dicts (as stored on Evaluation.metrics) and returns a Figure; ``save``
writes it as PNG and SVG, ``svg`` renders it for the workbench.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

from matplotlib.axes import Axes  # noqa: E402 - the backend must be chosen first
from matplotlib.figure import Figure  # noqa: E402

from verifier.evaluation.metrics import ANSWER_CLASSES  # noqa: E402

ANSWER_NAMES = {"correct": "Correct", "incorrect": "Incorrect", "not_enough_evidence": "Not enough\nevidence",
                "no_answer": "No answer"}
MAX_RELATIONS_SHOWN = 25


def _figure(width: float, height: float) -> tuple[Figure, Axes]:
    figure = Figure(figsize=(width, height), layout="constrained")
    return figure, figure.add_subplot()


def confusion_matrix(figures: dict, title: str = "") -> Figure:
    table = figures["confusion"]
    values = [[table[gold][answer] for answer in ANSWER_CLASSES] for gold in ("true", "false")]
    figure, axes = _figure(6.4, 3.0)
    image = axes.imshow(values, cmap="Blues", vmin=0)
    axes.set_xticks(range(len(ANSWER_CLASSES)), [ANSWER_NAMES[a] for a in ANSWER_CLASSES])
    axes.set_yticks([0, 1], ["True triple", "False triple"])
    axes.set_xlabel("Verdict")
    peak = max(max(row) for row in values) or 1
    for y, row in enumerate(values):
        for x, value in enumerate(row):
            axes.text(x, y, str(value), ha="center", va="center", color="white" if value > peak / 2 else "black")
    figure.colorbar(image, ax=axes, shrink=0.8)
    axes.set_title(title or "Confusion matrix")
    return figure


def tool_usage(figures: dict, title: str = "") -> Figure:
    usage = figures["efficiency"]["tool_usage"]
    tools = list(usage)[::-1]
    figure, axes = _figure(6.4, 0.5 + 0.45 * max(len(tools), 1))
    if tools:
        shares = [usage[t]["share"] * 100 for t in tools]
        axes.barh(tools, shares, color="#2457c5")
        for y, (tool, share) in enumerate(zip(tools, shares, strict=True)):
            axes.text(share, y, f" {share:.1f}% ({usage[tool]['calls']})", va="center")
        axes.set_xlim(0, 115)
    else:
        axes.text(0.5, 0.5, "no tool calls", ha="center", va="center", transform=axes.transAxes)
    axes.set_xlabel("share of tool calls (%)")
    axes.set_title(title or "Tool usage")
    return figure


def relation_accuracy(figures: dict, title: str = "") -> Figure:
    rows = figures["per_relation"][:MAX_RELATIONS_SHOWN][::-1]
    figure, axes = _figure(7.5, 0.6 + 0.32 * max(len(rows), 1))
    labels = [f"{r['relation'][:45]} (n={r['n']})" for r in rows]
    axes.barh(labels, [r["accuracy"] * 100 for r in rows], color="#1a7f37")
    axes.set_xlim(0, 100)
    axes.set_xlabel("accuracy (%)")
    axes.set_title(title or "Accuracy per relation")
    return figure


def reliability_diagram(figures: dict, title: str = "", right: str = "right") -> Figure:
    """Accuracy against confidence per confidence bin (``figures["calibration"]["bins"]``), with the
    diagonal a perfectly calibrated confidence would follow and each bin's count on its bar."""
    calibration = figures.get("calibration") or {}
    bins = calibration.get("bins") or []
    figure, axes = _figure(5.2, 4.9)
    axes.plot([0, 1], [0, 1], linestyle="--", color="#8a94a0", linewidth=1, label="perfect calibration")
    if bins:
        lefts = [b["low"] for b in bins]
        widths = [b["high"] - b["low"] for b in bins]
        bars = axes.bar(lefts, [b["accuracy"] for b in bins], widths, align="edge", color="#2457c5", alpha=0.75,
                        edgecolor="white", label="accuracy")
        axes.bar_label(bars, labels=[f"n={b['n']}" for b in bins], fontsize=7)
        axes.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], "o", color="#c62828", markersize=4,
                  label="mean confidence of the bin")
    else:
        axes.text(0.5, 0.5, "no run has a confidence", ha="center", va="center", transform=axes.transAxes)
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.1)
    axes.set_xlabel("confidence that the verdict is right")
    axes.set_ylabel(f"share of verdicts that were {right}")
    figure.legend(loc="outside lower center", ncols=3, fontsize=7, frameon=False)  # below the axes: bars fill any corner
    ece = calibration.get("ece")
    suffix = f" (ECE {ece:.3f}, n={calibration.get('n', 0)})" if isinstance(ece, int | float) else ""
    axes.set_title((title or "Reliability diagram") + suffix, fontsize=10)
    return figure


def configuration_bars(groups: dict[str, Sequence[tuple[str, dict]]], metric: str = "accuracy", title: str = "") -> Figure:
    """Grouped bars: for each benchmark (group), ``metric`` of each configuration (agent, ablations, baselines)."""
    labels: list[str] = []
    for rows in groups.values():
        labels += [label for label, _ in rows if label not in labels]
    figure, axes = _figure(max(6.4, 1.1 * len(labels) + 2), 4.2)
    width = 0.8 / max(len(groups), 1)
    for index, (benchmark, rows) in enumerate(groups.items()):
        values = dict(rows)
        xs = [i + index * width for i in range(len(labels))]
        heights = [values[label][metric] * 100 if label in values else 0 for label in labels]
        bars = axes.bar(xs, heights, width, label=benchmark)
        axes.bar_label(bars, fmt="%.0f", fontsize=7)
    axes.set_xticks([i + width * (len(groups) - 1) / 2 for i in range(len(labels))], labels, rotation=30, ha="right")
    axes.set_ylim(0, 105)
    axes.set_ylabel(f"{metric} (%)")
    axes.legend()
    axes.set_title(title or f"{metric.capitalize()}: the agent, its ablations and the baselines")
    return figure


def save(figure: Figure, path_stem: Path) -> list[Path]:
    """Write ``<stem>.png`` and ``<stem>.svg``."""
    path_stem.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix in (".png", ".svg"):
        target = path_stem.with_suffix(suffix)
        figure.savefig(target, dpi=130)
        written.append(target)
    return written


def svg(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="svg")
    return buffer.getvalue()


CHARTS = {"confusion": confusion_matrix, "tools": tool_usage, "relations": relation_accuracy,
          "reliability": reliability_diagram}
