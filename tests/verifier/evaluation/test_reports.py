"""Evaluation reports and pages on the calibration of the verdicts' confidence: the reliability diagram
(PNG + SVG with the other charts, and on the evaluation page) and the ECE in the Markdown tables."""

from __future__ import annotations

import pytest
from django.test import Client

from verifier.evaluation import metrics, reports
from verifier.evaluation.metrics import Outcome
from verifier.models import Evaluation, KnowledgeGraph

pytestmark = pytest.mark.django_db


def _outcomes(with_confidence: bool) -> list[Outcome]:
    """Ten verdicts: confident ones mostly right, unsure ones half right."""
    rows = [(True, "correct", 0.95), (True, "correct", 0.92), (False, "incorrect", 0.91), (False, "correct", 0.88),
            (True, "correct", 0.85), (False, "incorrect", 0.55), (True, "incorrect", 0.52), (False, "correct", 0.51),
            (True, "correct", 0.58), (False, "incorrect", 0.15)]
    return [Outcome(triple=index, relation="P27", expected=expected, verdict=verdict,
                    confidence=confidence if with_confidence else None)
            for index, (expected, verdict, confidence) in enumerate(rows)]


def _evaluation(name: str, *, with_confidence: bool = True) -> Evaluation:
    kg, _ = KnowledgeGraph.objects.get_or_create(name="report-kg", defaults={"version": 1})
    figures = {**metrics.compute(_outcomes(with_confidence)), "pending": 0, "models": ["scripted"]}
    return Evaluation.objects.create(name=name, suite="reports", kg=kg, benchmark="labelled.tsv", sample_size=10, mode="agent",
                                     status=Evaluation.Status.FINISHED, metrics=figures)


def test_the_reliability_diagram_is_written_with_the_other_charts(tmp_path):
    calibrated, plain = _evaluation("calibrated"), _evaluation("no-confidence", with_confidence=False)
    written = {path.name for path in reports.write_reports([calibrated, plain], tmp_path, title="Reports")}
    assert {"calibrated-reliability.png", "calibrated-reliability.svg"} <= written
    assert not any(name.startswith("no-confidence-reliability") for name in written)  # no confidence, no diagram
    assert (tmp_path / "charts" / "calibrated-reliability.png").read_bytes()[:4] == b"\x89PNG"
    svg = (tmp_path / "charts" / "calibrated-reliability.svg").read_text()
    assert "<svg" in svg and "perfect calibration" in svg and "n=3" in svg and "n=2" in svg  # each bar carries its count


def test_the_markdown_reports_the_ece_and_the_reliability_bins(tmp_path):
    evaluation = _evaluation("calibrated")
    ece = evaluation.metrics["calibration"]["ece"]
    reports.write_reports([evaluation], tmp_path, title="Reports")
    text = (tmp_path / "results.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| configuration | benchmark | n |"))
    assert " ECE |" in header
    assert f"Calibration of the verdicts' confidence: ECE {ece:.3f} over 10 verdicts with a confidence" in text
    assert "| confidence bin | n | mean confidence | accuracy (%) |" in text
    assert "| 0.9–1.0 | 3 | 0.927 | 100.0 |" in text and "| 0.1–0.2 | 1 | 0.150 | 100.0 |" in text


def test_the_comparison_has_an_ece_row():
    a, b = _evaluation("calibrated"), _evaluation("no-confidence", with_confidence=False)
    table = reports.comparison_markdown(a, b)
    assert f"| ECE | {a.metrics['calibration']['ece']:.3f} | – | – |" in table


def test_the_evaluation_page_shows_the_calibration_and_its_diagram(make_user):
    evaluation, plain = _evaluation("calibrated"), _evaluation("no-confidence", with_confidence=False)
    client = Client()
    client.force_login(make_user("viewer"))
    page = client.get(f"/evaluations/{evaluation.pk}/").content.decode()
    assert f'<strong id="ece">{evaluation.metrics["calibration"]["ece"]:.3f}</strong> over 10 verdicts' in page
    assert f'src="/evaluations/{evaluation.pk}/charts/reliability.svg"' in page and 'id="reliability-bins"' in page
    chart = client.get(f"/evaluations/{evaluation.pk}/charts/reliability.svg")
    assert chart.status_code == 200 and chart["Content-Type"] == "image/svg+xml" and b"perfect calibration" in chart.content
    assert "No run of this evaluation has a confidence." in client.get(f"/evaluations/{plain.pk}/").content.decode()
    assert client.get(f"/evaluations/{plain.pk}/charts/reliability.svg").status_code == 404
