"""Rows for the run-page tests: a small KG, a finished run with cited evidence, a live run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from verifier.models import (
    EMBEDDING_DIMENSIONS,
    Entity,
    KnowledgeGraph,
    MemoryEntry,
    Relation,
    Run,
    RunMemory,
    Step,
    SupportItem,
    VerificationTask,
)

ENTITIES = {"Q42": "Douglas Adams", "Q145": "United Kingdom", "Q350": "Cambridge", "Q142": "France"}
RELATIONS = {"P27": "country of citizenship", "P19": "place of birth", "P17": "country"}


@dataclass
class RunWorld:
    kg: KnowledgeGraph
    entities: dict[str, Entity]
    relations: dict[str, Relation]

    def task(self, head="Q42", relation="P27", tail="Q145", **fields) -> VerificationTask:
        return VerificationTask.objects.create(kg=self.kg, head=self.entities[head], relation=self.relations[relation],
                                               tail=self.entities[tail], **fields)


def make_world() -> RunWorld:
    kg = KnowledgeGraph.objects.create(name="runs-kg", title="Run page KG")
    entities = {eid: Entity.objects.create(kg=kg, external_id=eid, label=label) for eid, label in ENTITIES.items()}
    relations = {rid: Relation.objects.create(kg=kg, external_id=rid, label=label) for rid, label in RELATIONS.items()}
    return RunWorld(kg, entities, relations)


STEPS = [
    ("plan", "=== Initial Impression ===\nCorrect.\n=== Strategic Plan ===\n[Step 1] Use KG_Neighbor.", "", 0, 0),
    ("thought", "I should look at Douglas Adams's facts.", "", 120, 30),
    ("action", "KG_Neighbor(Douglas Adams, P27)", "KG_Neighbor", 0, 0),
    ("observation", "Facts about Douglas Adams:\n[E1] (Douglas Adams) -> [place of birth] -> (Cambridge)\n"
                    "[E4] (Douglas Adams) -> [place of birth] -> (France)", "KG_Neighbor", 0, 0),
    ("action", "KG_Path(Douglas Adams, United Kingdom)", "KG_Path", 0, 0),
    ("observation", "Paths:\n[E2] (Douglas Adams) -[place of birth]-> (Cambridge) -[country]-> (United Kingdom)\n"
                    "[E3] Douglas Adams was an English author.", "KG_Path", 0, 0),
    ("verdict", "[Correct] born in Cambridge, which is in the United Kingdom [E1] [E2] [E3].", "", 80, 20),
]


def make_finished_run(world: RunWorld, task: VerificationTask | None = None) -> Run:
    """A succeeded run whose verdict cites a triple (E1), a path (E2) and a passage (E3); E4 is not cited."""
    task = task or world.task(status=VerificationTask.Status.VERIFIED, source="flagged.csv:2")
    now = timezone.now()
    run = Run.objects.create(task=task, status=Run.Status.SUCCEEDED, verdict="correct", explanation="born in Cambridge",
                             prompt_tokens=200, completion_tokens=50, model="scripted", started_at=now - timedelta(seconds=42),
                             finished_at=now, config={"memory_k": 3})
    steps = {}
    for seq, (kind, content, tool, prompt, completion) in enumerate(STEPS, start=1):
        steps[seq] = Step.objects.create(run=run, seq=seq, kind=kind, content=content, tool=tool, prompt_tokens=prompt,
                                         completion_tokens=completion, duration_ms=15 * seq)
    SupportItem.objects.bulk_create([
        SupportItem(run=run, step=steps[4], key="E1", kind="triple", cited=True, source="runs-kg (3)",
                    text="(Douglas Adams) -> [place of birth] -> (Cambridge)",
                    payload={"head": "Q42", "relation": "P19", "tail": "Q350",
                             "labels": ["Douglas Adams", "place of birth", "Cambridge"]}),
        SupportItem(run=run, step=steps[6], key="E2", kind="path", cited=True, source="runs-kg (3)",
                    text="(Douglas Adams) -[place of birth]-> (Cambridge) -[country]-> (United Kingdom)",
                    payload={"edges": [["Q42", "P19", "Q350"], ["Q350", "P17", "Q145"]],
                             "relations": {"P19": "place of birth", "P17": "country"},
                             "entities": {"Q42": "Douglas Adams", "Q350": "Cambridge", "Q145": "United Kingdom"}}),
        SupportItem(run=run, step=steps[6], key="E3", kind="passage", cited=True,
                    source="https://en.wikipedia.org/wiki/Douglas_Adams", text="Douglas Adams was an English author.",
                    payload={"entities": ["Q42"], "title": "Douglas Adams"}),
        SupportItem(run=run, step=steps[4], key="E4", kind="triple", cited=False, source="runs-kg (3)",
                    text="(Douglas Adams) -> [place of birth] -> (France)",
                    payload={"head": "Q42", "relation": "P19", "tail": "Q142",
                             "labels": ["Douglas Adams", "place of birth", "France"]}),
    ])
    entry = MemoryEntry.objects.create(triple_text="Alan Turing country of citizenship United Kingdom",
                                       trajectory="Thought: …", verdict="correct", embedding=[0.1] * EMBEDDING_DIMENSIONS)
    RunMemory.objects.create(run=run, entry=entry, similarity=0.8734, rank=1)
    return run


def make_live_run(world: RunWorld, task: VerificationTask | None = None) -> Run:
    task = task or world.task("Q42", "P19", "Q350", status=VerificationTask.Status.RUNNING)
    run = Run.objects.create(task=task, status=Run.Status.RUNNING, started_at=timezone.now())
    Step.objects.create(run=run, seq=1, kind="plan", content="=== Initial Impression ===\nCorrect.")
    return run
