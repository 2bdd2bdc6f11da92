"""Importing flagged triples from a file on the queue page: what it queues and says, bad rows, previews, and the
runs chosen at import."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from tests.verifier.web.run_pages import make_world
from tests.verifier.web.workbench import client_for, fast_password_hashing, upload  # noqa: F401  (autouse fixture)
from verifier import services
from verifier.agent.weighing import FEATURES
from verifier.models import AuditEvent, ConfidenceModel, KnowledgeGraph, Run, VerificationTask
from verifier.web.forms import run_kinds

pytestmark = pytest.mark.django_db


GOOD_FILE = "head,relation,tail,label\nDouglas Adams,country of citizenship,France,false\nQ350,P17,Q142,true\n"
BAD_FILE = "Douglas Adams,country of citizenship,France\nNobody Known,place of birth,Cambridge\nQ42,P19,Q350,maybe\nQ42,P27\n"


def test_import_queues_the_rows_of_a_file_and_says_how_many(make_user):
    world = make_world()
    client = client_for(make_user, "curator")
    response = client.post(reverse("queue-import"), {"kg": world.kg.pk, "file": upload("flagged.csv", GOOD_FILE)}, follow=True)
    tasks = VerificationTask.objects.filter(kg=world.kg).order_by("source")
    assert [(t.head.label, t.relation.label, t.tail.label, t.expected_label, t.source) for t in tasks] == [
        ("Douglas Adams", "country of citizenship", "France", False, "flagged.csv:2"),
        ("Cambridge", "country", "France", True, "flagged.csv:3")]
    assert "2 triple(s) queued on runs-kg from 2 row(s)." in response.content.decode()
    assert AuditEvent.objects.get(action="tasks.import").after["created"] == 2
    again = client.post(reverse("queue-import"), {"kg": world.kg.pk, "file": upload("flagged.csv", GOOD_FILE)}, follow=True)
    assert "0 triple(s) queued on runs-kg from 2 row(s); 2 were already queued." in again.content.decode()


def test_the_import_page_counts_each_kgs_work_queue_not_the_triples_evaluations_drew(make_user):
    world = make_world()
    world.task("Q42", "P27", "Q145", source="flagged.csv:2")
    world.task("Q42", "P19", "Q350", source="evaluation:codex-kge-400")
    world.task("Q42", "P19", "Q142", source="evaluation:codex-kge-400")
    page = client_for(make_user, "curator").get(reverse("queue-import"))
    [graph] = page.context["graphs"]
    assert graph.task_count == 1


def test_import_can_weigh_the_evidence_of_each_triple_queued_now(make_user, monkeypatch, shipped_weighing):
    world = make_world()
    world.task("Q42", "P27", "Q142")  # the first row is already queued: it keeps its task and gets no run
    client = client_for(make_user, "curator")
    response = client.post(reverse("queue-import"), {"kg": world.kg.pk, "file": upload("flagged.csv", GOOD_FILE),
                                                     "then": "evidence"}, follow=True)
    page = response.content.decode()
    assert "1 triple(s) queued on runs-kg from 2 row(s); 1 were already queued." in page
    assert "1 run(s) weighing the evidence only queued" in page
    run = Run.objects.get()
    assert run.request == {"mode": "evidence"} and run.task.source == "flagged.csv:3"
    monkeypatch.setattr(services, "MAX_BULK", 1)
    more = "head,relation,tail\nQ145,P17,Q142\nQ142,P17,Q145\n"
    page = client.post(reverse("queue-import"), {"kg": world.kg.pk, "file": upload("more.csv", more), "then": "agent"},
                       follow=True).content.decode()
    assert "Runs were started for the first 1 of the 2 triples; the queue&#x27;s bulk run" in page
    assert [r.request for r in Run.objects.filter(task__source__startswith="more.csv")] == [{}]


def test_the_import_says_which_graphs_cannot_weigh_the_evidence_yet(make_user):
    """The import's "then" names the KGs that no confidence model weighs, as the run forms do; a run of the KG
    that has one is offered plainly, and with none in force anywhere the option says what it needs."""
    world = make_world()
    other = KnowledgeGraph.objects.create(name="unweighed-kg")
    client = client_for(make_user, "curator")
    assert "Weigh the evidence only (needs a confidence model)" in client.get(reverse("queue-import")).content.decode()
    ConfidenceModel.objects.create(kg=world.kg, features=FEATURES, coefficients=[0.0] * len(FEATURES), intercept=0.0)
    assert [(kind.value, kind.label, kind.disabled) for kind in run_kinds([world.kg.pk, other.pk])] == [
        ("agent", "Investigate", False), ("evidence", "Weigh the evidence only (not for unweighed-kg)", False)]
    assert [kind.label for kind in run_kinds([world.kg.pk])] == ["Investigate", "Weigh the evidence only"]
    assert run_kinds([other.pk])[1].disabled
    assert "Weigh the evidence only (not for unweighed-kg)" in client.get(reverse("queue-import")).content.decode()


def test_a_previewed_import_keeps_the_run_chosen_for_its_confirmation(make_user, settings, tmp_path, shipped_weighing):
    settings.KGV_CACHE_DIR = tmp_path
    world = make_world()
    client = client_for(make_user, "curator")
    page = client.post(reverse("queue-import"), {"kg": world.kg.pk, "file": upload("flagged.csv", GOOD_FILE),
                                                 "step": "preview", "then": "evidence"}).content.decode()
    assert "Queue 2 triples and weigh their evidence</button>" in page
    token = re.search(r'name="confirm" value="(\w+)"', page).group(1)
    client.post(reverse("queue-import"), {"confirm": token})
    assert [run.request for run in Run.objects.order_by("task__source")] == [{"mode": "evidence"}] * 2


def test_import_of_a_tsv_file(make_user):
    world = make_world()
    response = client_for(make_user, "curator").post(
        reverse("queue-import"), {"kg": world.kg.pk, "file": upload("flags.tsv", "Q42\tP19\tQ142\n")})
    assert response.status_code == 302
    assert VerificationTask.objects.get(kg=world.kg).source == "flags.tsv:1"


def test_import_rejects_a_file_with_bad_rows_listing_every_one_and_keeps_nothing(make_user):
    world = make_world()
    response = client_for(make_user, "curator").post(reverse("queue-import"), {"kg": world.kg.pk, "file": upload("bad.csv", BAD_FILE)})
    assert response.status_code == 400
    page = response.content.decode()
    problems = page.split('id="import-problems"')[1].split("</section>")[0]
    assert "bad.csv was not imported" in problems and "3 rows could not be used" in problems
    lines = [int(cell) for cell in re.findall(r'<td class="num">(\d+)</td>', problems)]
    assert lines == [2, 3, 4]
    assert "Nobody Known" in problems and "maybe" in problems and "expected 3 or 4 columns" in problems
    assert not VerificationTask.objects.exists() and not AuditEvent.objects.filter(action="tasks.import").exists()


def test_import_refuses_a_file_that_is_not_csv_or_tsv(make_user):
    world = make_world()
    response = client_for(make_user, "curator").post(reverse("queue-import"), {"kg": world.kg.pk, "file": upload("flags.xlsx", "x")})
    assert response.status_code == 400 and "Upload a .csv or .tsv file (got .xlsx)." in response.content.decode()


# ---- audit log --------------------------------------------------------------------------------------


def test_a_preview_shows_what_an_import_would_queue_and_queues_it_on_confirmation(make_user, settings, tmp_path):
    settings.KGV_CACHE_DIR = tmp_path
    world = make_world()
    world.task("Q42", "P27", "Q142")  # the first row is already queued
    client = client_for(make_user, "curator")
    shown = client.post(reverse("queue-import"), {"kg": world.kg.pk, "file": upload("flagged.csv", GOOD_FILE), "step": "preview"})
    page = shown.content.decode()
    assert shown.status_code == 200 and 'id="import-preview"' in page
    assert "2 rows: 2 resolved, <strong>1 new</strong>, 1 already in the queue. Nothing is queued yet." in page
    assert "Cambridge" in page and "Queue 1 triple</button>" in page
    assert VerificationTask.objects.filter(kg=world.kg).count() == 1  # nothing queued yet
    token = re.search(r'name="confirm" value="(\w+)"', page).group(1)

    done = client.post(reverse("queue-import"), {"confirm": token}, follow=True).content.decode()
    assert "1 triple(s) queued on runs-kg from 2 row(s); 1 were already queued." in done
    assert VerificationTask.objects.filter(kg=world.kg).count() == 2
    assert not any((tmp_path / "import-previews").iterdir())  # the kept file is gone
    stale = client.post(reverse("queue-import"), {"confirm": token}, follow=True).content.decode()
    assert "That preview is no longer available" in stale and VerificationTask.objects.filter(kg=world.kg).count() == 2


def test_a_preview_counts_a_repeated_row_and_a_triple_an_evaluation_drew_as_the_import_does(make_user, settings, tmp_path):
    settings.KGV_CACHE_DIR = tmp_path
    world = make_world()
    world.task("Q42", "P27", "Q142", source="evaluation:codex-kge-400")  # not in the work queue: the import moves it in
    repeated = GOOD_FILE + "Q42,P27,Q142,false\n"
    client = client_for(make_user, "curator")
    page = client.post(reverse("queue-import"), {"kg": world.kg.pk, "file": upload("flagged.csv", repeated),
                                                 "step": "preview"}).content.decode()
    counts = re.sub(r"\s+", " ", re.search(r'id="preview-counts">(.*?)</p>', page, re.S).group(1))
    assert counts == "3 rows: 3 resolved, <strong>2 new</strong>, 1 repeating an earlier row. Nothing is queued yet."
    assert "already in the queue</td>" not in page
    token = re.search(r'name="confirm" value="(\w+)"', page).group(1)
    done = client.post(reverse("queue-import"), {"confirm": token}, follow=True).content.decode()
    assert "2 triple(s) queued on runs-kg from 3 row(s)" in done


def test_an_unknown_relation_gets_the_closest_relations_by_spelling_word_or_meaning(make_user, settings, tmp_path):
    from tests.world import ENTITIES, PASSAGES, RELATIONS, TRIPLES  # a KG loaded as any is: its relation labels embedded
    from verifier.kg.loader import load_source
    from verifier.kg.sources import KGSource

    kg = load_source(KGSource("world", "World", "", triples=lambda: iter(TRIPLES), entities=ENTITIES, relations=RELATIONS,
                              passages=PASSAGES)).kg
    flagged = ("head,relation,tail\nDouglas Adams,born in,Cambridge\nDouglas Adams,citizenship,United Kingdom\n"
               "Douglas Adams,contry,United Kingdom\nDouglas Adams,zzqx,Cambridge\n")
    page = client_for(make_user, "curator").post(reverse("queue-import"), {"kg": kg.pk, "file": upload("flagged.csv", flagged)})
    problems = dict(re.findall(r'<td class="num">(\d+)</td><td>(.*?)</td>', page.content.decode()))
    assert problems["2"].startswith("&#x27;born in&#x27; is not in the KG — did you mean place of birth (P19)")  # meaning
    assert "did you mean country of citizenship (P27)" in problems["3"]  # a shared word
    assert "did you mean country (P17)" in problems["4"]  # spelling
    assert problems["5"] == "&#x27;zzqx&#x27; is not in the KG"  # nothing close: no guess


def test_a_preview_of_a_file_with_bad_rows_lists_them_and_offers_no_confirmation(make_user, settings, tmp_path):
    settings.KGV_CACHE_DIR = tmp_path
    world = make_world()
    page = client_for(make_user, "curator").post(
        reverse("queue-import"), {"kg": world.kg.pk, "file": upload("bad.csv", BAD_FILE), "step": "preview"}).content.decode()
    assert 'id="preview-problems"' in page and "Nobody Known" in page and 'id="confirm-import"' not in page
    assert not VerificationTask.objects.exists()
