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


@pytest.mark.slow
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


def test_selective_verdicts_count_coverage_and_accuracy_above_each_confidence():
    from scipy.stats import binomtest

    rows = {r["threshold"]: r for r in metrics.compute(_outcomes(True))["calibration"]["selective"]}
    # ≥ 0.9: the three most confident verdicts, all right; ≥ 0.6 … 0.8: five verdicts, one of them (0.88) wrong
    assert (rows[0.9]["n"], rows[0.9]["coverage"], rows[0.9]["accuracy"]) == (3, 0.3, 1.0)
    assert (rows[0.8]["n"], rows[0.8]["coverage"], rows[0.8]["accuracy"]) == (5, 0.5, 0.8)
    assert rows[0.6]["n"] == rows[0.7]["n"] == 5 and rows[0.95]["n"] == 1
    expected = binomtest(4, 5).proportion_ci(method="wilson")
    assert rows[0.8]["low"] == pytest.approx(expected.low) and rows[0.8]["high"] == pytest.approx(expected.high)


def test_selective_verdicts_share_the_whole_evaluation_as_their_denominator():
    outcomes = _outcomes(True) + [Outcome(triple=99, relation="P27", expected=True, verdict="no_answer", confidence=None)]
    rows = {r["threshold"]: r for r in metrics.compute(outcomes)["calibration"]["selective"]}
    assert rows[0.9]["coverage"] == pytest.approx(3 / 11)  # a failed run without a confidence is not covered


@pytest.mark.slow
def test_the_report_and_the_page_show_the_selective_verdicts(tmp_path, make_user):
    evaluation = _evaluation("calibrated")
    reports.write_reports([evaluation], tmp_path, title="Reports")
    text = (tmp_path / "results.md").read_text()
    assert "| confidence ≥ | verdicts | coverage (%) | accuracy (%) | 95% interval |" in text
    assert "| 0.90 | 3 | 30.0 | 100.0 | 43.9–100.0 |" in text and "| 0.80 | 5 | 50.0 | 80.0 | 37.6–96.4 |" in text
    client = Client()
    client.force_login(make_user("viewer"))
    page = client.get(f"/evaluations/{evaluation.pk}/").content.decode()
    assert 'id="selective-verdicts"' in page
    assert "<td>0.90</td><td class=\"num\">3</td><td class=\"num\">30.0</td><td class=\"num\">100.0</td>" in page


def test_the_evaluate_command_headline_states_the_calibration_and_the_confident_share():
    from verifier.management.commands.evaluate import headline

    line = headline(_evaluation("calibrated"))
    assert "ECE" in line and "over 10 verdicts with a confidence" in line
    assert "confidence ≥ 0.90: 30.0% of verifications, 100.0% right (43.9–100.0)" in line
    assert "ECE" not in headline(_evaluation("no-confidence", with_confidence=False))


def test_the_list_and_the_page_give_the_accuracys_interval_over_the_triples_and_the_ece(make_user):
    from scipy.stats import binomtest

    evaluation = _evaluation("calibrated")  # ten triples, one verdict each, 7 right
    figures = evaluation.metrics
    expected = binomtest(round(figures["accuracy"] * 10), 10).proportion_ci(method="wilson")
    interval = f"{expected.low * 100:.1f}–{expected.high * 100:.1f}"
    assert reports.accuracy_interval(figures) == interval
    # repeats of a triple are not independent draws: the interval counts triples, so it is wider than over runs
    repeated = {**figures, "n": 40, "triples": 10}
    assert reports.accuracy_interval(repeated) == interval
    assert reports.accuracy_interval({}) == "–"
    client = Client()
    client.force_login(make_user("viewer"))
    listing = client.get("/evaluations/").content.decode()
    assert f'<td class="num muted">{interval}</td>' in listing
    assert f'<td class="num">{figures["calibration"]["ece"]:.3f}</td>' in listing
    page = client.get(f"/evaluations/{evaluation.pk}/").content.decode()
    assert f"<tr><th>Accuracy, 95% interval (over the triples)</th><td class=\"num\">{interval}</td></tr>" in page


def test_the_paired_line_tests_the_disagreements_and_says_when_there_is_nothing_to_pair():
    line = reports.paired_line({"shared": 128, "both_right": 0, "only_a": 73, "only_b": 55, "both_wrong": 0,
                                "p": metrics.mcnemar_p(73, 55)})
    assert line.endswith("Exact McNemar test on the 128 that only one got right: p = 0.13 (a difference this size may be chance).")
    assert [reports.p_text(p) for p in (metrics.mcnemar_p(121, 57), 0.0042, 0.3)] == ["p < 0.001", "p = 0.004", "p = 0.30"]
    assert "differ beyond chance" in reports.paired_line({"shared": 30, "both_right": 5, "only_a": 20, "only_b": 3,
                                                          "both_wrong": 2, "p": metrics.mcnemar_p(20, 3)})
    assert "share no verification" in reports.paired_line({"shared": 0, "both_right": 0, "only_a": 0, "only_b": 0,
                                                           "both_wrong": 0, "p": 1.0})
