"""Evaluation reports: the JSON record, Markdown tables in the papers' layout, side-by-side comparison,
and the files (JSON, Markdown, PNG/SVG charts) written for one evaluation or a suite of them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from verifier.agent.config import configuration_label
from verifier.benchmarks.datasets import DATASETS
from verifier.evaluation import charts, metrics, outcomes
from verifier.evaluation.configs import SUITE
from verifier.models import Evaluation

# (key in the metrics, heading, kind) — the comparison rows and the efficiency table's columns.
COMPARED = (
    ("accuracy", "Accuracy", "pct"), ("precision", "Precision", "pct"), ("recall", "Recall", "pct"), ("f1", "F1", "pct"),
    ("answer_rate", "Answer rate", "pct"), ("conditional_accuracy", "Conditional accuracy", "pct"),
    ("reliability", "Reliability", "ratio"), ("efficiency.turns", "Turns / triple", "num"),
    ("efficiency.tool_calls", "Tool calls / triple", "num"), ("efficiency.prompt_tokens", "Input tokens / triple", "int"),
    ("efficiency.completion_tokens", "Output tokens / triple", "int"), ("efficiency.cost_usd", "Cost / triple (USD)", "usd"),
    ("efficiency.latency_s", "Latency / triple (s)", "num"), ("efficiency.memories", "Memories used / triple", "num"),
    ("calibration.ece", "ECE", "ratio"),
    ("leakage.runs_with_query_triple", "Runs that saw the query triple", "int"),
    ("leakage.runs_scored_by_a_model_trained_on_it", "Runs scored by a model trained on the triple", "int"),
    ("leakage.triples_used_for_fitting", "Evaluated triples used for fitting", "int"),
)


def accuracy_interval(figures: dict) -> str:
    """The accuracy's 95% Wilson interval, over the triples (repeats of one triple are not independent draws), as
    "75.6–89.9"; "–" without figures. Beside the accuracy it says how far two evaluations of this size may differ
    by chance."""
    triples = figures.get("triples") or 0
    if "accuracy" not in figures or not triples:
        return "–"
    low, high = metrics.wilson_interval(round(figures["accuracy"] * triples), triples)
    return f"{fmt(low)}–{fmt(high)}"


def benchmark_title(evaluation: Evaluation) -> str:
    if (dataset := DATASETS.get(evaluation.benchmark)) is not None:
        title = evaluation.kg.title or dataset.kg_name
        return title if dataset.split == "valid" else f"{title} ({dataset.split} split)"
    return Path(evaluation.benchmark).name


def current_metrics(evaluation: Evaluation) -> dict:
    """The stored figures of a finished evaluation; otherwise computed from the runs so far, once per loaded
    object (a report reads them for every table, section and chart; load the evaluation again for newer runs)."""
    if evaluation.status == Evaluation.Status.FINISHED and evaluation.metrics.get("n") is not None:
        return evaluation.metrics
    if not hasattr(evaluation, "_figures_so_far"):
        evaluation._figures_so_far = outcomes.figures(evaluation)
    return evaluation._figures_so_far


def value(figures: dict, key: str):
    for part in key.split("."):
        figures = figures.get(part) if isinstance(figures, dict) else None
    if isinstance(figures, dict):  # reliability: {"mean": …}
        figures = figures.get("mean")
    return figures


def fmt(number, kind: str = "pct") -> str:
    if number is None:
        return "–"
    return {"pct": f"{number * 100:.1f}", "ratio": f"{number:.3f}", "num": f"{number:.2f}", "int": f"{number:,.0f}",
            "usd": f"{number:.4f}"}[kind]


def signed(delta, kind: str) -> str:
    if delta is None:
        return "–"
    return {"pct": f"{delta * 100:+.1f}", "ratio": f"{delta:+.3f}", "num": f"{delta:+.2f}", "int": f"{delta:+,.0f}",
            "usd": f"{delta:+.4f}"}[kind]


def items(evaluation: Evaluation) -> list[dict]:
    rows = []
    for item in outcomes.latest_items(evaluation):
        task, run = item.task, item.run
        rows.append({
            "position": item.position, "repeat": item.repeat, "task": task.pk,
            "head": task.head.external_id, "relation": task.relation.external_id, "tail": task.tail.external_id,
            "triple": f"{task.head.label} — {task.relation.label} — {task.tail.label}",
            "expected": item.expected_label, "attempts": item.attempts,
            "run": run.pk if run else None,
            "status": run.status if run else "", "verdict": run.verdict if run else "",
            "right": bool(run and run.verdict == ("correct" if item.expected_label else "incorrect")),
        })
    return rows


def summary(evaluation: Evaluation, *, with_items: bool = True) -> dict:
    record = {
        "id": evaluation.pk, "name": evaluation.name, "suite": evaluation.suite, "configuration": evaluation.label,
        "benchmark": evaluation.benchmark, "benchmark_title": benchmark_title(evaluation), "kg": evaluation.kg.name,
        "sample_size": evaluation.sample_size, "seed": evaluation.seed, "mode": evaluation.mode,
        "ablations": evaluation.ablations, "repeats": evaluation.repeats, "config": evaluation.config,
        "dataset": evaluation.dataset, "status": evaluation.status, "metrics": current_metrics(evaluation),
        "created_at": evaluation.created_at.isoformat(),
        "finished_at": evaluation.finished_at.isoformat() if evaluation.finished_at else None,
    }
    if with_items:
        record["items"] = items(evaluation)
    return record


def table_cells(evaluations: Sequence[Evaluation]) -> tuple[list[str], list[str], dict]:
    """(benchmarks in order of appearance, configuration labels in the papers' order, cell lookup)."""
    suite_order = [configuration_label(c.mode, c.ablations) for c in SUITE]
    benchmarks: list[str] = []
    labels: list[str] = []
    cells = {}
    for evaluation in evaluations:
        benchmark, label = benchmark_title(evaluation), evaluation.label
        benchmarks += [benchmark] if benchmark not in benchmarks else []
        labels += [label] if label not in labels else []
        cells[(label, benchmark)] = current_metrics(evaluation)
    first_seen = {label: index for index, label in enumerate(labels)}
    labels.sort(key=lambda lab: (suite_order.index(lab) if lab in suite_order else len(suite_order), first_seen[lab]))
    return benchmarks, labels, cells


def results_table(evaluations: Sequence[Evaluation]) -> str:
    """Accuracy, F1, precision, recall per configuration (rows) and benchmark (column groups), in %."""
    benchmarks, labels, cells = table_cells(evaluations)
    header = "| |" + "".join(f" {b} Acc | F1 | P | R |" for b in benchmarks)
    lines = [header, "|---|" + "---|---|---|---|" * len(benchmarks)]
    unfinished = []
    for label in labels:
        row = f"| {label} |"
        for benchmark in benchmarks:
            figures = cells.get((label, benchmark))
            mark = ""
            if figures and figures.get("pending"):
                unfinished.append(f"{label} on {benchmark}: {figures['n']} of {figures['n'] + figures['pending']}")
                mark = "*"
            row += "".join(f" {fmt(figures.get(k)) + (mark if k == 'accuracy' else '') if figures else ''} |"
                           for k in ("accuracy", "f1", "precision", "recall"))
        lines.append(row)
    if unfinished:
        lines += ["", "\\* unfinished, verifications so far: " + "; ".join(unfinished) + "."]
    return "\n".join(lines)


def efficiency_table(evaluations: Sequence[Evaluation]) -> str:
    columns = [c for c in COMPARED
               if c[0].startswith(("efficiency", "leakage")) or c[0] in ("answer_rate", "reliability", "calibration.ece")]
    lines = ["| configuration | benchmark | n |" + "".join(f" {heading} |" for _, heading, _ in columns),
             "|---|---|---|" + "---|" * len(columns)]
    benchmarks, labels, cells = table_cells(evaluations)
    for label in labels:
        for benchmark in benchmarks:
            figures = cells.get((label, benchmark))
            if figures:
                lines.append(f"| {label} | {benchmark} | {figures['n']} |"
                             + "".join(f" {fmt(value(figures, key), kind)} |" for key, _, kind in columns))
    return "\n".join(lines)


def evaluation_markdown(evaluation: Evaluation) -> str:
    figures = current_metrics(evaluation)
    lines = [f"## {evaluation.label} on {benchmark_title(evaluation)} (`{evaluation.name}`)", "",
             f"{figures['n']} verifications of {figures['triples']} triples ({figures['positives']} true), "
             f"{evaluation.repeats} repeat(s), seed {evaluation.seed}; model {', '.join(figures.get('models') or []) or '?'}; "
             f"status {evaluation.status}.", "",
             *[f"> **Warning:** {warning}" for warning in figures.get("warnings", [])],
             *([""] if figures.get("warnings") else []),
             "| gold \\ verdict | Correct | Incorrect | Not enough evidence | No answer |", "|---|---|---|---|---|"]
    for gold in ("true", "false"):
        counts = figures["confusion"][gold]
        lines.append(f"| {gold} | " + " | ".join(str(counts[a]) for a in metrics.ANSWER_CLASSES) + " |")
    lines += ["", "| relation | n | accuracy (%) |", "|---|---|---|"]
    lines += [f"| {r['relation']} | {r['n']} | {fmt(r['accuracy'])} |" for r in figures["per_relation"]]
    usage = figures["efficiency"]["tool_usage"]
    if usage:
        lines += ["", "| tool | calls | share (%) |", "|---|---|---|"]
        lines += [f"| {tool} | {u['calls']} | {fmt(u['share'])} |" for tool, u in usage.items()]
    return "\n".join(lines + calibration_markdown(figures))


def calibration_rows(calibration: dict | None) -> dict | None:
    """``metrics.calibration``'s figures as the workbench's tables show them; None when no run had a confidence."""
    if not calibration:
        return None
    return {"n": calibration["n"], "ece": fmt(calibration["ece"], "ratio"),
            "mean_confidence": fmt(calibration.get("mean_confidence"), "ratio"),
            "bins": [{"range": f"{b['low']:.1f}–{b['high']:.1f}", "n": b["n"], "confidence": fmt(b["confidence"], "ratio"),
                      "accuracy": fmt(b["accuracy"])} for b in calibration["bins"]],
            "selective": [{"threshold": f"{r['threshold']:.2f}", "n": r["n"], "coverage": fmt(r["coverage"]),
                           "accuracy": fmt(r["accuracy"]) if r["n"] else "–",
                           "interval": f"{fmt(r['low'])}–{fmt(r['high'])}" if r["n"] else "–"}
                          for r in calibration.get("selective") or []]}


def calibration_markdown(figures: dict) -> list[str]:
    """The reliability diagram as a table: per confidence bin, how many verdicts, their mean confidence and
    how many were right; with the expected calibration error (ECE)."""
    calibration = figures.get("calibration")
    if not calibration:
        return []
    lines = ["", f"Calibration of the verdicts' confidence: ECE {fmt(calibration['ece'], 'ratio')} over {calibration['n']} "
                 f"verdicts with a confidence (mean confidence {fmt(calibration.get('mean_confidence'), 'ratio')}).", "",
             "| confidence bin | n | mean confidence | accuracy (%) |", "|---|---|---|---|"]
    lines += [f"| {b['low']:.1f}–{b['high']:.1f} | {b['n']} | {fmt(b['confidence'], 'ratio')} | {fmt(b['accuracy'])} |"
              for b in calibration["bins"]]
    return lines + selective_markdown(calibration)


def selective_markdown(calibration: dict) -> list[str]:
    """What accepting only the verdicts at or above a confidence gives: how many verifications that covers and
    how many of those verdicts were right (with the 95% Wilson interval)."""
    rows = calibration.get("selective") or []
    if not rows:
        return []
    lines = ["", "Verdicts at or above a confidence (accept those, review the rest):", "",
             "| confidence ≥ | verdicts | coverage (%) | accuracy (%) | 95% interval |", "|---|---|---|---|---|"]
    lines += [f"| {r['threshold']:.2f} | {r['n']} | {fmt(r['coverage'])} | {fmt(r['accuracy']) if r['n'] else '–'} | "
              f"{fmt(r['low']) + '–' + fmt(r['high']) if r['n'] else '–'} |" for r in rows]
    return lines


def comparison(a: Evaluation, b: Evaluation) -> dict:
    """Figures side by side (b − a) and, over the triples both verified, who got which right."""
    fa, fb = current_metrics(a), current_metrics(b)
    rows = []
    for key, heading, kind in COMPARED:
        va, vb = value(fa, key), value(fb, key)
        delta = vb - va if isinstance(va, int | float) and isinstance(vb, int | float) else None
        rows.append({"key": key, "heading": heading, "a": fmt(va, kind), "b": fmt(vb, kind),
                     "delta": signed(delta, kind)})
    right_a = {(i["task"], i["repeat"]): i["right"] for i in items(a) if i["status"]}
    right_b = {(i["task"], i["repeat"]): i["right"] for i in items(b) if i["status"]}
    shared = right_a.keys() & right_b.keys()
    triples = {"shared": len(shared),
               "both_right": sum(1 for k in shared if right_a[k] and right_b[k]),
               "only_a": sum(1 for k in shared if right_a[k] and not right_b[k]),
               "only_b": sum(1 for k in shared if right_b[k] and not right_a[k]),
               "both_wrong": sum(1 for k in shared if not right_a[k] and not right_b[k])}
    triples["p"] = metrics.mcnemar_p(triples["only_a"], triples["only_b"])
    return {"rows": rows, "triples": triples}


def paired_line(t: dict) -> str:
    """The comparison over the verifications both made, with the exact McNemar test of their disagreements."""
    if not t["shared"]:
        return "The two share no verification (other triples or another benchmark), so they cannot be paired triple by triple."
    verdict = "the two differ beyond chance" if t["p"] < 0.05 else "a difference this size may be chance"
    return (f"On the {t['shared']} verifications both made: both right {t['both_right']}, only A right {t['only_a']}, "
            f"only B right {t['only_b']}, both wrong {t['both_wrong']}. Exact McNemar test on the "
            f"{t['only_a'] + t['only_b']} that only one got right: {p_text(t['p'])} ({verdict}).")


def p_text(p: float) -> str:
    """A p-value as a report states it: two decimals, three below 0.01, and "p < 0.001" where rounding would say 0."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}" if p < 0.01 else f"p = {p:.2f}"


def comparison_markdown(a: Evaluation, b: Evaluation) -> str:
    data = comparison(a, b)
    lines = [f"| | A: {a.label} ({a.name}) | B: {b.label} ({b.name}) | B − A |", "|---|---|---|---|"]
    lines += [f"| {r['heading']} | {r['a']} | {r['b']} | {r['delta']} |" for r in data["rows"]]
    lines += ["", paired_line(data["triples"])]
    return "\n".join(lines)


def write_reports(evaluations: Sequence[Evaluation], out: Path, *, title: str) -> list[Path]:
    """results.json, results.md and the charts of ``evaluations`` (a suite, or just one) under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    records = [summary(e) for e in evaluations]
    (out / "results.json").write_text(json.dumps({"title": title, "evaluations": records}, indent=2, default=str))
    written.append(out / "results.json")
    sections = [f"# {title}", "", results_table(evaluations), "", efficiency_table(evaluations), ""]
    for evaluation, record in zip(evaluations, records, strict=True):
        sections += [evaluation_markdown(evaluation), ""]
        stem = out / "charts" / evaluation.name
        figures = record["metrics"]
        heading = f"{evaluation.label} — {benchmark_title(evaluation)}"
        written += charts.save(charts.confusion_matrix(figures, heading), Path(f"{stem}-confusion"))
        written += charts.save(charts.tool_usage(figures, f"Tool usage — {heading}"), Path(f"{stem}-tools"))
        written += charts.save(charts.relation_accuracy(figures, f"Accuracy per relation — {heading}"), Path(f"{stem}-relations"))
        if figures.get("calibration"):
            written += charts.save(charts.reliability_diagram(figures, f"Reliability — {heading}"), Path(f"{stem}-reliability"))
    if len(evaluations) > 1:
        written += charts.save(charts.configuration_bars(configuration_groups(evaluations)), out / "charts" / "configurations")
    (out / "results.md").write_text("\n".join(sections))
    written.append(out / "results.md")
    return written


def configuration_groups(evaluations: Sequence[Evaluation]) -> dict[str, list[tuple[str, dict]]]:
    benchmarks, labels, cells = table_cells(evaluations)
    return {b: [(label, cells[(label, b)]) for label in labels if (label, b) in cells] for b in benchmarks}


def suite_evaluations(suite: str) -> list[Evaluation]:
    return list(Evaluation.objects.filter(suite=suite).select_related("kg").order_by("created_at", "id"))

