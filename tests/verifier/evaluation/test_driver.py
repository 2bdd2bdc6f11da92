"""An evaluation from file to figures: tasks and items, runs queued with a concurrency cap, a failed run
retried once, metrics from the stored runs, report files and the workbench pages.

Runs are executed in this process against a scripted OpenAI-compatible server; queueing through a
real worker and resuming after a killed one are in test_resume.py.
"""

from collections import Counter

import pytest

from tests.openai_server import ErrorReply, ScriptedOpenAIServer
from verifier.agent.llm import OpenAICompatibleLLM
from verifier.evaluation import reports
from verifier.evaluation.driver import EvaluationError, EvaluationSpec, finish, prepare, refresh_metrics, step
from verifier.models import Evaluation, EvaluationItem, Run, VerificationTask
from verifier.runner import execute_run

pytestmark = pytest.mark.django_db

DATASET = "\n".join([
    "Q42\tP27\tQ145\ttrue",  # Douglas Adams — citizen of the UK: answered Correct (right)
    "Q42\tP19\tQ350\ttrue",  # born in Cambridge: the endpoint fails every time (no answer)
    "Q42\tP27\tQ142\tfalse",  # citizen of France: answered Correct (wrong)
    "Q90\tP17\tQ145\tfalse",  # Paris in the UK: unparsable on repeat 0, Incorrect on repeat 1
]) + "\n"


def scripted(body):
    prompt = body["messages"][-1]["content"]
    if "place of birth" in prompt:
        return ErrorReply(500)
    if "Paris" in prompt:
        scripted.paris += 1
        return "I would rather not say." if scripted.paris == 1 else "Final Answer: [Incorrect] Because Paris is in France."
    return "Final Answer: [Correct] Because that is what I recall."


@pytest.fixture
def dataset(tmp_path, world_kg):
    path = tmp_path / "world.tsv"
    path.write_text(DATASET)
    return path


def evaluate_in_process(evaluation, server, *, concurrency):
    """Drive like the evaluation driver does, executing each queued run here instead of on a worker."""
    llm = OpenAICompatibleLLM(server.url, "test", "scripted", max_retries=0, backoff=0.01)
    retries, rounds = Counter(), []
    while True:
        state = step(evaluation, retries, concurrency=concurrency)
        rounds.append(state)
        if state.done == state.total:
            return rounds
        queued = Run.objects.filter(evaluation_items__evaluation=evaluation, status=Run.Status.QUEUED)
        assert queued.count() <= concurrency
        for run in queued:
            execute_run(run.pk, llm=llm)


@pytest.mark.slow
def test_an_evaluation_from_file_to_figures_reports_and_pages(dataset, world_kg, client, make_user, tmp_path):
    scripted.paris = 0
    spec = EvaluationSpec(benchmark=str(dataset), kg_name=world_kg.name, n=4, mode="zero-shot", repeats=2, concurrency=3,
                          suite="world-table")
    evaluation, created = prepare(spec)
    assert created and evaluation.name == "world-table-world-zero-shot-n4-s0-k2"
    assert evaluation.items.count() == 8
    tasks = VerificationTask.objects.filter(evaluation_items__evaluation=evaluation).distinct()
    assert tasks.count() == 4 and all(t.source.startswith(f"evaluation:{evaluation.name} (world.tsv:") for t in tasks)
    assert sorted(tasks.values_list("expected_label", flat=True)) == [False, False, True, True]

    with ScriptedOpenAIServer(scripted) as server:
        rounds = evaluate_in_process(evaluation, server, concurrency=3)
    assert rounds[0].in_flight == 3  # the cap holds from the first round
    finish(evaluation, 0.0)
    evaluation.refresh_from_db()

    # The place-of-birth items failed, got one fresh run each, failed again, and count as wrong.
    birth = EvaluationItem.objects.filter(evaluation=evaluation, task__relation__external_id="P19")
    assert [item.attempts for item in birth] == [2, 2] and {item.run.status for item in birth} == {"failed"}
    assert Run.objects.filter(task=birth[0].task).count() == 4
    assert set(EvaluationItem.objects.exclude(task__relation__external_id="P19").values_list("attempts", flat=True)) == {1}

    figures = evaluation.metrics
    # Right: UK ×2, Paris repeat 1 → 3 of 8. Predicted Correct: UK ×2 (true), France ×2 (false).
    assert evaluation.status == Evaluation.Status.FINISHED and figures["n"] == 8 and figures["pending"] == 0
    assert figures["accuracy"] == pytest.approx(3 / 8)
    assert figures["precision"] == pytest.approx(2 / 4) and figures["recall"] == pytest.approx(2 / 4)
    assert figures["answer_rate"] == pytest.approx(5 / 8) and figures["conditional_accuracy"] == pytest.approx(3 / 5)
    assert figures["confusion"]["true"] == {"correct": 2, "incorrect": 0, "not_enough_evidence": 0, "no_answer": 2}
    assert figures["confusion"]["false"] == {"correct": 2, "incorrect": 1, "not_enough_evidence": 0, "no_answer": 1}
    assert figures["failed_runs"] == 2 and figures["models"] == ["scripted"]
    # Paris answered differently over its two repeats (H = 1 bit, K = 4 classes → 1 − 1/2); the other three alike (→ 1).
    assert figures["reliability"]["mean"] == pytest.approx(3.5 / 4)
    assert figures["leakage"] == {"runs_checked": 8, "runs_with_query_triple": 0, "runs_scored_by_a_model_trained_on_it": 0,
                                      "triples_used_for_fitting": 0}
    assert figures["efficiency"]["turns"] == pytest.approx(6 / 8)  # failed runs stored no thought

    # The same command again finds the evaluation; other parameters under the same name are refused.
    assert prepare(spec) == (evaluation, False)
    with pytest.raises(EvaluationError, match="exists with other parameters"):
        prepare(EvaluationSpec(benchmark=str(dataset), kg_name=world_kg.name, n=4, mode="cot", repeats=2, name=evaluation.name))

    # Files: JSON, the Markdown table in the papers' layout, charts as PNG and SVG.
    other, _ = prepare(EvaluationSpec(benchmark=str(dataset), kg_name=world_kg.name, n=4, mode="cot", suite="world-table"))
    written = reports.write_reports([evaluation, other], tmp_path / "out", title="World")
    names = {path.name for path in written}
    assert {"results.json", "results.md", "configurations.png", "configurations.svg",
            f"{evaluation.name}-confusion.svg", f"{evaluation.name}-tools.png", f"{evaluation.name}-relations.svg"} <= names
    table = (tmp_path / "out" / "results.md").read_text()
    assert "| | world.tsv Acc | F1 | P | R |" in table and "| Zero-shot | 37.5 | 50.0 | 50.0 | 50.0 |" in table
    assert (tmp_path / "out" / "charts" / f"{evaluation.name}-confusion.png").read_bytes()[:4] == b"\x89PNG"

    # Pages: viewers read; each verification links to its run.
    client.force_login(make_user("viewer"))
    listing = client.get("/evaluations/")
    assert listing.status_code == 200 and evaluation.name.encode() in listing.content
    detail = client.get(f"/evaluations/{evaluation.pk}/").content.decode()
    for item in evaluation.items.all():
        assert f'href="/runs/{item.run_id}/"' in detail
    assert "37.5" in detail and "No run saw the triple under test" in detail
    chart = client.get(f"/evaluations/{evaluation.pk}/charts/confusion.svg")
    assert chart["Content-Type"] == "image/svg+xml" and b"<svg" in chart.content
    compare = client.get(f"/evaluations/compare/?a={evaluation.pk}&b={other.pk}").content.decode()
    assert "Zero-shot" in compare and "CoT" in compare and "37.5" in compare
    assert f'<p id="paired">{reports.paired_line(reports.comparison(evaluation, other)["triples"])}</p>' in compare
    suite = client.get("/evaluations/suite/world-table/")
    assert suite.status_code == 200 and b"configurations.svg" in suite.content
    # The API gives the same figures, and each verification with its run and gold label.
    listed = client.get("/api/evaluations/?suite=world-table").json()["results"]
    assert [e["name"] for e in listed] == [other.name, evaluation.name]
    assert listed[1]["configuration"] == "Zero-shot" and listed[1]["metrics"]["accuracy"] == pytest.approx(3 / 8)
    detail = client.get(f"/api/evaluations/{evaluation.pk}/").json()
    assert len(detail["items"]) == 8 and sum(item["right"] for item in detail["items"]) == 3
    paris = [item for item in detail["items"] if item["head"] == "Q90"]
    assert [item["verdict"] for item in paris] == ["", "incorrect"] and not paris[0]["expected"]
    assert client.get("/api/evaluations/?status=done").status_code == 400
    client.logout()
    client.force_login(make_user(None))
    assert client.get(f"/evaluations/{evaluation.pk}/").status_code == 403


def test_metrics_follow_the_runs_when_recomputed(dataset, world_kg):
    scripted.paris = 0
    evaluation, _ = prepare(EvaluationSpec(benchmark=str(dataset), kg_name=world_kg.name, n=4, mode="zero-shot"))
    with ScriptedOpenAIServer(scripted) as server:
        evaluate_in_process(evaluation, server, concurrency=4)
    before = refresh_metrics(evaluation)["accuracy"]
    item = evaluation.items.get(task__head__external_id="Q90")  # its unparsable answer, read back as a right one
    Run.objects.filter(pk=item.run_id).update(verdict="incorrect")
    assert refresh_metrics(evaluation)["accuracy"] == pytest.approx(before + 1 / 4)


def test_a_triple_another_evaluation_is_verifying_waits_for_that_run(dataset, world_kg):
    """Two evaluations that drew the same triples share their tasks; one run in flight per task holds across them."""
    first, _ = prepare(EvaluationSpec(benchmark=str(dataset), kg_name=world_kg.name, n=4, mode="zero-shot", name="first"))
    second, _ = prepare(EvaluationSpec(benchmark=str(dataset), kg_name=world_kg.name, n=4, mode="kge", name="second"))
    step(first, Counter(), concurrency=4)  # all four tasks now have a queued run of the first evaluation
    state = step(second, Counter(), concurrency=4)  # none is started twice, and nothing is raised
    assert state.in_flight == 0 and not second.items.exclude(run=None).exists()
    Run.objects.filter(evaluation_items__evaluation=first).update(status=Run.Status.SUCCEEDED, verdict="correct")
    assert step(second, Counter(), concurrency=4).in_flight == 4


@pytest.mark.slow
def test_an_evaluation_whose_driver_went_silent_is_marked_interrupted_with_how_to_resume(world_kg, make_user):
    from datetime import timedelta

    from django.utils import timezone

    from tests.verifier.web.workbench import client_for
    from verifier.evaluation.driver import ABANDONED_SECONDS
    from verifier.tasks import sweep_stalled

    now = timezone.now()
    made = {name: Evaluation.objects.create(name=name, kg=world_kg, benchmark="codex-s", sample_size=2,
                                            status=Evaluation.Status.RUNNING, heartbeat_at=beat)
            for name, beat in (("killed", now - timedelta(seconds=ABANDONED_SECONDS + 5)), ("alive", now - timedelta(seconds=2)),
                               ("never-beat", None))}
    assert sweep_stalled() == 2  # the beat's sweep: no run is stalled, two evaluations lost their driver
    status = dict(Evaluation.objects.values_list("name", "status"))
    assert status == {"killed": "interrupted", "alive": "running", "never-beat": "interrupted"}
    page = client_for(make_user, "admin").get(f"/evaluations/{made['killed'].pk}/").content.decode()
    assert "Interrupted" in page and "Resume (or <code>manage.py evaluate --resume killed</code>) verifies the rest" in page
    page = client_for(make_user, "viewer").get(f"/evaluations/{made['killed'].pk}/").content.decode()
    assert "Interrupted" in page and "Resume verifies the rest" in page and "manage.py" not in page  # commands: admins


def test_an_evaluation_of_a_mode_that_decides_only_by_weighing_waits_for_a_confidence_model(dataset, world_kg):
    """The evidence and reading modes have no answer of their own: without a confidence model every verification
    would end without a verdict and score 0%. A new evaluation of them is refused with what to do, unless its runs
    only label triples for a fit."""
    from verifier import confidence

    spec = EvaluationSpec(benchmark=str(dataset), n=4, kg_name=world_kg.name, mode="evidence")
    with pytest.raises(EvaluationError, match=r"the evidence mode decides only through a confidence model, and none is "
                                              r"in force for world: .*manage.py calibrate --import verifier/data/"
                                              r"confidence_model.json\) or fit one on each such KG \(manage.py calibrate "
                                              r"--kg world --calibration-triples\)"):
        prepare(spec)
    assert not Evaluation.objects.exists() and not VerificationTask.objects.exists()
    labelling, created = prepare(EvaluationSpec(benchmark=str(dataset), n=4, kg_name=world_kg.name, mode="reading",
                                                name="labels", for_fit=True))
    assert created and labelling.items.count() == 4
    assert prepare(EvaluationSpec(benchmark=str(dataset), n=4, kg_name=world_kg.name, mode="agent"))[1]  # its own answers
    confidence.import_model(confidence.SEED_MODEL, fallback=True)
    evaluation, created = prepare(spec)
    assert created and evaluation.mode == "evidence"
