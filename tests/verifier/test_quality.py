"""Verdict quality signals: computed from a run's evidence, steps and memories, shown on the run page, filtered in
the queue and the API."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from tests.verifier.web.run_pages import make_finished_run, make_world
from verifier.models import MemoryEntry, RunMemory, Step, SupportItem
from verifier.quality import Evidence, compute, signals_of

ENDS = ("Q42", "Douglas Adams", "Q145", "United Kingdom")
ABOUT = Evidence("triple", "(Douglas Adams) -> [place of birth] -> (Cambridge)", {"head": "Q42"}, True)
ELSEWHERE = Evidence("triple", "(Alan Turing) -> [place of birth] -> (London)", {"head": "Q7251"}, True)
SCORE = Evidence("rule", "Taken together the rule evidence gives the claim a probability of 0.29.", {}, True)


def signals(**changes) -> list[str]:
    arguments = {"ends": ENDS, "verdict": "correct", "evidence": [ABOUT], "actions": [("KG_Neighbor", '{"0": "Q42"}')],
                 "memories": [("Douglas Adams place of birth Cambridge", 0.82)], "forced": False, **changes}
    return compute(**arguments)


@pytest.mark.parametrize("changes, expected", [
    ({}, []),
    ({"evidence": [Evidence("triple", ABOUT.text, {}, False)]}, ["cites_nothing"]),
    ({"evidence": [ELSEWHERE]}, ["off_claim"]),
    ({"evidence": [SCORE]}, []),  # a score of the claim itself is about the claim
    ({"forced": True}, ["forced"]),
    ({"actions": [("KG_Neighbor", '{"0": "Q42"}')] * 2}, ["looped"]),
    ({"actions": [("KG_Neighbor", '{"0": "Q42"}'), ("KG_Neighbor", '{"0": "Q145"}')]}, []),
    ({"memories": [("Alan Turing country of citizenship United Kingdom", 0.8)]}, []),  # names the tail
    ({"memories": [("Alan Turing place of birth London", 0.67)]}, ["memory_other"]),
    ({"memories": [("douglas adams educated at St John's", 0.31)]}, ["weak_memory"]),
])
def test_each_signal_and_only_it(changes, expected):
    assert signals(**changes) == expected


@pytest.fixture
def looping_run():
    world = make_world()
    run = make_finished_run(world)
    Step.objects.create(run=run, seq=8, kind="action", content="KG_Path(Douglas Adams, United Kingdom)", tool="KG_Path")
    Step.objects.filter(run=run, seq=5).update(arguments={})  # the same call twice
    Step.objects.create(run=run, seq=9, kind="thought", content="(step limit reached: mandatory judgment)\nIt is correct.")
    entry = MemoryEntry.objects.create(triple_text="Alan Turing place of birth London", trajectory="…", verdict="correct",
                                       embedding=[0.2] * 384)
    RunMemory.objects.create(run=run, entry=entry, similarity=0.41, rank=2)
    run.signals = signals_of(run)
    run.save()
    plain = make_finished_run(world, world.task("Q145", "P17", "Q142"))
    SupportItem.objects.filter(run=plain).update(cited=False)
    plain.signals = signals_of(plain)
    plain.save()
    return run, plain


@pytest.mark.django_db
def test_a_stored_run_reads_its_signals_from_steps_evidence_and_memories(looping_run):
    run, plain = looping_run
    assert run.signals == ["forced", "looped", "memory_other", "weak_memory"]
    assert plain.signals == ["cites_nothing"]


@pytest.mark.django_db
def test_the_run_page_and_the_queue_show_and_filter_the_signals(looping_run, make_user):
    run, plain = looping_run
    client = Client()
    client.force_login(make_user("viewer"))
    page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert 'data-signal="forced"' in page and "⚠ weak memory match" in page
    assert page.count("word for word") == 1 and "repeats step 5 word for word" in page  # the loop folded
    queue = client.get(reverse("queue") + "?signal=looped").content.decode()
    assert f'data-task-id="{run.task_id}"' in queue and f'data-task-id="{plain.task_id}"' not in queue
    assert client.get(reverse("queue") + "?signal=cites_nothing").content.decode().count('data-signal="cites_nothing"') == 1
    none = client.get(reverse("queue") + "?signal=none").content.decode()
    assert f'data-task-id="{run.task_id}"' not in none and f'data-task-id="{plain.task_id}"' not in none
    assert client.get(reverse("queue") + "?signal=sloppy").status_code == 400


@pytest.mark.django_db
def test_the_api_filters_by_signal_and_returns_them(looping_run, make_user):
    run, plain = looping_run
    client = APIClient()
    client.force_login(make_user("viewer"))
    listed = client.get("/api/tasks/?signal=forced,weak_memory").json()["results"]
    assert [task["id"] for task in listed] == [run.task_id] and listed[0]["signals"] == run.signals
    assert [t["id"] for t in client.get("/api/tasks/?signal=any").json()["results"]] == [plain.task_id, run.task_id]
    assert client.get(f"/api/runs/{plain.pk}/").json()["signals"] == ["cites_nothing"]
    refused = client.get("/api/tasks/?signal=sloppy")
    assert refused.status_code == 400 and "signal" in refused.json()["error"]["details"]
