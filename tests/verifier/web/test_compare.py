"""Re-verification side by side: two runs of one task on the page and in the API."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tests.verifier.web.run_pages import RunWorld, make_finished_run, make_world
from verifier import services
from verifier.comparison import NotComparable, compare_runs
from verifier.models import Entity, Relation, Step, SupportItem

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(make_user):
    """Run ``older`` cites E1–E3; ``newer`` (same task) dropped E4, found a new passage, changed its last action and
    its verdict, and a reviewer overrode it."""
    world = make_world()
    older = make_finished_run(world)
    newer = make_finished_run(world, older.task)
    newer.support_items.filter(key="E4").delete()
    SupportItem.objects.create(run=newer, key="E5", kind="passage", cited=True, source="https://example.org/adams",
                               text="Adams held British citizenship all his life.")
    Step.objects.filter(run=newer, seq=5).update(tool="KG_Rules", arguments={"head": "Q42"})
    Step.objects.filter(run=newer, seq=5).update(content="KG_Rules(Douglas Adams)")
    newer.verdict, newer.confidence = "incorrect", 0.61
    newer.save()
    older.confidence = 0.9
    older.save()
    services.review_run(run=newer, reviewer=make_user("reviewer"), decision="override", reason="he was British",
                        verdict="correct")
    return older, newer


def run_of_another_task(run):
    world = RunWorld(run.task.kg, {e.external_id: e for e in Entity.objects.filter(kg=run.task.kg)},
                     {r.external_id: r for r in Relation.objects.filter(kg=run.task.kg)})
    return make_finished_run(world, world.task("Q145", "P17", "Q142"))


def test_what_a_re_verification_changed_is_counted_item_by_item(runs):
    older, newer = runs
    comparison = compare_runs(older, newer)
    assert comparison.verdict_changed and not comparison.final_verdict_changed  # overridden back to correct
    assert comparison.after.final_verdict == "correct" and comparison.after.verdict == "incorrect"
    assert comparison.confidence_change == pytest.approx(-0.29)
    assert [item.key_after for item in comparison.added] == ["E5"]
    assert [(item.key_before, item.key_after) for item in comparison.dropped] == [("E4", "")]
    assert sorted(item.key_before for item in comparison.kept) == ["E1", "E2", "E3"]
    assert comparison.first_divergent_step == 5
    assert comparison.steps[4].after == "action: KG_Rules(head=Q42)"


def test_runs_of_different_tasks_or_one_run_twice_are_refused(runs):
    older, _ = runs
    other = run_of_another_task(older)
    with pytest.raises(NotComparable, match="only runs of one task"):
        compare_runs(older, other)
    with pytest.raises(NotComparable, match="compared with itself"):
        compare_runs(older, older)


def test_the_compare_page_shows_the_older_run_first_whatever_the_url_order(runs, make_user):
    older, newer = runs
    client = Client()
    client.force_login(make_user("viewer"))
    page = client.get(reverse("run-compare", args=[newer.pk, older.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert f"What changed from run {older.pk} to run {newer.pk}" in html
    assert "The verdict changed" in html and "1 evidence item added, 1 dropped, 3 kept" in html
    assert "Adams held British citizenship all his life." in html
    assert "The investigations part at step 5" in html
    # the run page links to the comparison from its list of other runs
    run_page = client.get(reverse("run-detail", args=[newer.pk])).content.decode()
    assert reverse("run-compare", args=[older.pk, newer.pk]) in run_page


def test_the_compare_page_explains_a_refusal(runs, make_user):
    older, _ = runs
    other = run_of_another_task(older)
    client = Client()
    client.force_login(make_user("viewer"))
    page = client.get(reverse("run-compare", args=[older.pk, other.pk]))
    assert page.status_code == 400 and "only runs of one task can be compared" in page.content.decode()


def test_the_api_compares_two_runs_and_answers_bad_pairs_with_its_error_shape(runs, make_user):
    older, newer = runs
    client = APIClient()
    client.force_login(make_user("viewer"))
    body = client.get(f"/api/runs/{newer.pk}/compare/{older.pk}/").json()
    assert body["before"]["id"] == older.pk and body["after"]["id"] == newer.pk
    assert body["verdict_changed"] is True and body["after"]["final_verdict"] == "correct"
    assert [item["key_after"] for item in body["added"]] == ["E5"]
    assert body["first_divergent_step"] == 5
    other = run_of_another_task(older)
    refused = client.get(f"/api/runs/{older.pk}/compare/{other.pk}/")
    assert refused.status_code == 400 and "only runs of one task" in refused.json()["error"]["message"]
    assert client.get(f"/api/runs/{older.pk}/compare/999999/").status_code == 404
    assert APIClient().get(f"/api/runs/{older.pk}/compare/{newer.pk}/").status_code in (401, 403)
