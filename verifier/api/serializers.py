"""API representations of tasks, runs, steps, support items, reviews, memory entries, evaluations and audit events,
and the validated inputs of the write endpoints (which then call verifier.services)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from verifier.agent.config import ABLATIONS, RunConfig
from verifier.agent.loop import MODES
from verifier.agent.prompts import LESSON_CHARS
from verifier.benchmarks.datasets import TYPE_SCHEMES, BenchmarkError
from verifier.evaluation import control, reports
from verifier.evaluation.driver import EvaluationSpec
from verifier.memory.bank import trajectory_of
from verifier.models import (
    Agreement,
    AuditEvent,
    Evaluation,
    KnowledgeGraph,
    MemoryEntry,
    Review,
    Run,
    RunMemory,
    Step,
    SupportItem,
    Verdict,
    VerificationTask,
)
from verifier.roles import CURATOR, has_role
from verifier.services import MAX_BULK, MEMORY_BULK_ACTIONS, REASON_CHARS
from verifier.wiring import settle_config


class UserRefSerializer(serializers.Serializer):
    id = serializers.IntegerField(read_only=True)
    username = serializers.CharField(read_only=True)


class TermSerializer(serializers.Serializer):
    """An entity or relation of a triple."""

    id = serializers.IntegerField(read_only=True)
    external_id = serializers.CharField(read_only=True)
    label = serializers.CharField(read_only=True)


# ------------------------------------------------------------------------------------------------- tasks
class TaskSerializer(serializers.ModelSerializer):
    """A queued triple with its latest run, verdict and reviewer agreement (queue_filters.annotate_latest)."""

    kg_name = serializers.CharField(source="kg.name", read_only=True)
    head = TermSerializer(read_only=True)
    relation = TermSerializer(read_only=True)
    tail = TermSerializer(read_only=True)
    assignee = UserRefSerializer(read_only=True, allow_null=True)
    latest_run_id = serializers.IntegerField(read_only=True, allow_null=True)
    latest_run_status = serializers.CharField(read_only=True, allow_null=True)
    verdict = serializers.CharField(read_only=True, allow_null=True, help_text="verdict of the latest run with one")
    confidence = serializers.FloatField(read_only=True, allow_null=True,
                                        help_text="calibrated probability that the latest verdict is right")
    disputed = serializers.BooleanField(read_only=True, allow_null=True,
                                        help_text="the structural evidence disputes the latest verdict (null: no verdict yet)")
    agreement = serializers.SerializerMethodField(help_text="agree / disagree with the latest reviewer decision, or unreviewed")
    signals = serializers.ListField(child=serializers.CharField(), read_only=True, allow_null=True,
                                    help_text="verdict quality signals of the latest verdict (null: no verdict yet)")

    class Meta:
        model = VerificationTask
        fields = ["id", "kg", "kg_name", "head", "relation", "tail", "status", "assignee", "source", "expected_label",
                  "latest_run_id", "latest_run_status", "verdict", "confidence", "disputed", "signals", "agreement",
                  "created_at", "updated_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.ChoiceField(choices=Agreement.values))
    def get_agreement(self, task) -> str:
        return getattr(task, "agreement", None) or Agreement.UNREVIEWED


class TaskImportSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="CSV or TSV: head, relation, tail[, label]; ids, labels or aliases")
    kg = serializers.PrimaryKeyRelatedField(queryset=KnowledgeGraph.objects.all())
    skip_invalid = serializers.BooleanField(default=False, help_text="queue the good rows and report the bad ones")

    def validate_file(self, upload):
        if upload.size > settings.KGV_MAX_UPLOAD_BYTES:
            raise serializers.ValidationError(f"the file is larger than {settings.KGV_MAX_UPLOAD_BYTES // (1024 * 1024)} MB")
        return upload


class ImportRowSerializer(serializers.Serializer):
    line = serializers.IntegerField()
    message = serializers.CharField()


class TaskImportResultSerializer(serializers.Serializer):
    created = serializers.IntegerField()
    already_queued = serializers.IntegerField()
    stated = serializers.IntegerField(help_text="triples the KG states (scored at once, each by the structural network "
                                                "that never learnt it)")
    lines = serializers.IntegerField()
    skipped = ImportRowSerializer(many=True, help_text="the rows left out (skip_invalid), the first 100")
    skipped_count = serializers.IntegerField(help_text="how many rows were left out")


class ConfigField(serializers.JSONField):
    """An agent configuration: a JSON object (keys of verifier.agent.loop.AgentConfig), settled here, once, into the
    RunConfig the service stores (wiring.settle_config)."""

    def to_internal_value(self, data) -> RunConfig:
        value = super().to_internal_value(data)
        try:
            return settle_config(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class TaskBulkSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=["run", "assign", "accept"])
    ids = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1, max_length=MAX_BULK)
    assignee = serializers.PrimaryKeyRelatedField(queryset=get_user_model().objects.filter(is_active=True),
                                                  allow_null=True, required=False, default=None)
    config = ConfigField(required=False, default=dict)

    def validate_assignee(self, user):
        if user is not None and not has_role(user, CURATOR):
            raise serializers.ValidationError(f"{user.get_username()} cannot work on tasks (needs the curator role)")
        return user

    def validate_ids(self, ids):
        ids = list(dict.fromkeys(ids))
        found = set(VerificationTask.objects.filter(pk__in=ids).values_list("pk", flat=True))
        if missing := [pk for pk in ids if pk not in found]:
            raise serializers.ValidationError(f"no such task: {', '.join(map(str, missing))}")
        return ids


class TaskBulkResultSerializer(serializers.Serializer):
    action = serializers.CharField()
    changed = serializers.IntegerField(help_text="tasks assigned (assign)", required=False)
    runs = serializers.ListField(child=serializers.IntegerField(), help_text="runs queued (run)", required=False)
    busy = serializers.ListField(child=serializers.IntegerField(), required=False,
                                 help_text="tasks left alone because a run of theirs is already queued or running (run)")
    reviews = serializers.ListField(child=serializers.IntegerField(), required=False,
                                    help_text="the accept reviews recorded, one per task (accept)")
    left = serializers.IntegerField(required=False, help_text="tasks without a finished verdict or already reviewed (accept)")


# -------------------------------------------------------------------------------------------------- runs
class StepSerializer(serializers.ModelSerializer):
    class Meta:
        model = Step
        fields = ["id", "seq", "kind", "content", "tool", "arguments", "prompt_tokens", "completion_tokens", "cost_usd",
                  "duration_ms", "created_at"]
        read_only_fields = fields


class SupportItemSerializer(serializers.ModelSerializer):
    step_seq = serializers.IntegerField(source="step.seq", read_only=True, allow_null=True)

    class Meta:
        model = SupportItem
        fields = ["key", "kind", "text", "payload", "source", "content_hash", "cited", "step_seq"]
        read_only_fields = fields


class ReviewSerializer(serializers.ModelSerializer):
    reviewer = UserRefSerializer(read_only=True)

    class Meta:
        model = Review
        fields = ["id", "run", "reviewer", "decision", "verdict", "reason", "created_at"]
        read_only_fields = fields


class ReviewCreateSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=Review.Decision.choices)
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=10_000)
    verdict = serializers.ChoiceField(choices=[Verdict.CORRECT, Verdict.INCORRECT], required=False, allow_blank=True,
                                      default="", help_text="the verdict an override sets (default: the other one)")


class RunMemorySerializer(serializers.ModelSerializer):
    triple_text = serializers.CharField(source="entry.triple_text", read_only=True)
    verdict = serializers.CharField(source="entry.verdict", read_only=True)
    status = serializers.CharField(source="entry.status", read_only=True)

    class Meta:
        model = RunMemory
        fields = ["entry", "rank", "similarity", "triple_text", "verdict", "status"]
        read_only_fields = fields


class StructuralModelRefSerializer(serializers.Serializer):
    """The knowledge-graph embedding model that scored a run's triple."""

    id = serializers.IntegerField(read_only=True)
    description = serializers.CharField(read_only=True, help_text='e.g. "ComplEx model #4 of codex-s v2"')


class TrainingRefSerializer(serializers.Serializer):
    """A structural model's training that a queued run waits for before it starts."""

    id = serializers.IntegerField(read_only=True)
    status = serializers.CharField(read_only=True, help_text="queued, training, ready or failed")
    progress = serializers.FloatField(read_only=True, help_text="0–1, of the whole job")
    stage = serializers.CharField(read_only=True)


class AssessmentSerializer(serializers.Serializer):
    """What a run's confidence was computed from; ``{}`` on runs older than the confidence model."""

    p_true = serializers.FloatField(required=False, allow_null=True, help_text="combined calibrated probability that the triple is true")
    agent_verdict = serializers.CharField(
        required=False, help_text="the language model's own answer (correct or incorrect), shown beside the verdict and not the "
        "verdict: weighed only when `unweighed` leaves it out; \"\" when no model answered or its answer was withheld")
    withheld_answer = serializers.DictField(
        required=False, help_text='{"answer", "reason"}: the language model\'s answer that was not taken, and why (it repeated '
        "an instruction found in the data, or the data it read held one)")
    decided_by = serializers.CharField(required=False, help_text="what the verdict is: the language model's answer (model, the "
                                       "paper profile) or the weighed evidence (evidence)")
    structural_probability = serializers.FloatField(required=False, allow_null=True,
                                                    help_text="the KG-embedding model's calibrated P(true)")
    rule_probability = serializers.FloatField(required=False, allow_null=True)
    reading = serializers.DictField(child=serializers.IntegerField(), required=False,
                                    help_text='{"supports": n, "contradicts": n, "silent": n}')
    confidence_model = serializers.IntegerField(required=False, allow_null=True, help_text="the ConfidenceModel whose weights applied")
    disputed_reason = serializers.CharField(required=False, allow_blank=True)
    structural_model = serializers.IntegerField(required=False, allow_null=True, help_text="id of the model that scored the triple")
    keys = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False,
                                 help_text="feature → the evidence keys it was read from")
    unweighed = serializers.ListField(child=serializers.CharField(), required=False,
                                      help_text="signals the run has that the confidence model gives no weight "
                                                "(e.g. agent_verdict, supports, contradicts): shown, not part of the verdict")


class RunSerializer(serializers.ModelSerializer):
    """A run in lists: status, verdict, confidence and cost, with the triple's labels."""

    triple = serializers.SerializerMethodField()
    created_by = UserRefSerializer(read_only=True, allow_null=True)
    assessment = serializers.SerializerMethodField()
    structural_model = StructuralModelRefSerializer(read_only=True, allow_null=True)
    awaiting_model = TrainingRefSerializer(read_only=True, allow_null=True,
                                           help_text="a queued run waits for this structural model's training to start")

    class Meta:
        model = Run
        fields = ["id", "task", "triple", "status", "verdict", "confidence", "disputed", "signals", "assessment", "structural_model",
                  "awaiting_model", "model", "config", "prompt_tokens", "completion_tokens", "cost_usd", "error", "created_by",
                  "created_at", "started_at", "finished_at"]
        read_only_fields = fields
        extra_kwargs = {"verdict": {"help_text": "the verdict curators review: the weighed evidence's (compact profile, evidence "
                                                 "modes) or the language model's answer (paper profile), never an answer "
                                                 "withheld; \"\" until the run ends"}}

    def get_triple(self, run) -> str:
        task = run.task
        return f"({task.head.label}, {task.relation.label}, {task.tail.label})"

    @extend_schema_field(AssessmentSerializer)
    def get_assessment(self, run) -> dict:
        return run.assessment if isinstance(run.assessment, dict) else {}


class RunDetailSerializer(RunSerializer):
    """A run with its explanation, the memories it used, its evidence, its reviews and its trajectory."""

    memories_used = RunMemorySerializer(many=True, read_only=True)
    support_items = SupportItemSerializer(many=True, read_only=True)
    reviews = ReviewSerializer(many=True, read_only=True)
    step_count = serializers.IntegerField(source="steps.count", read_only=True)
    trajectory = serializers.SerializerMethodField(help_text="the text a promotion copies into the memory bank (editable)")

    class Meta(RunSerializer.Meta):
        fields = [*RunSerializer.Meta.fields, "explanation", "step_count", "memories_used", "support_items", "reviews",
                  "trajectory"]
        read_only_fields = fields
        extra_kwargs = {**RunSerializer.Meta.extra_kwargs,
                        "explanation": {"help_text": "why the verdict: the weighed evidence with its keys, or those of the "
                                                     "language model's sentences the evidence they cite holds; never its "
                                                     "unchecked words"}}

    def get_trajectory(self, run) -> str:
        return trajectory_of(run)


class RunCreateSerializer(serializers.Serializer):
    task = serializers.PrimaryKeyRelatedField(queryset=VerificationTask.objects.all())
    config = ConfigField(required=False, default=dict)


class PromoteSerializer(serializers.Serializer):
    trajectory = serializers.CharField(required=False, allow_blank=True, max_length=100_000,
                                       help_text="an edited trajectory; default: the run's own")
    triple_text = serializers.CharField(required=False, max_length=2000, help_text='default: "head relation tail"')


# ------------------------------------------------------------------------------------------------ memory
class MemoryRetireSerializer(serializers.Serializer):
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000,
                                   help_text=f"why, at most {REASON_CHARS} characters once whitespace is collapsed "
                                   "(the audit log records it; a bootstrapped entry's provenance too)")


class MemoryBulkReviewSerializer(serializers.Serializer):
    ids = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1, max_length=MAX_BULK)
    action = serializers.ChoiceField(choices=list(MEMORY_BULK_ACTIONS.items()),
                                     help_text="keep: mark those awaiting review reviewed, with their lessons; "
                                     "retire: retire the active ones")
    reason = serializers.CharField(required=False, allow_blank=True, max_length=2000,
                                   help_text=f"retire: why, at most {REASON_CHARS} characters once whitespace is collapsed")


class MemoryBulkSkipSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    reason = serializers.CharField(help_text="why the entry was left as it was")


class MemoryBulkReviewResultSerializer(serializers.Serializer):
    done = serializers.ListField(child=serializers.IntegerField(), help_text="the entries kept or retired")
    skipped = MemoryBulkSkipSerializer(many=True)


class MemoryReviewSerializer(serializers.Serializer):
    lesson = serializers.CharField(max_length=2000, help_text="what a small model's plan is shown of this case "
                                   f"(at most {LESSON_CHARS} characters once whitespace is collapsed)")


class MemoryEntrySerializer(serializers.ModelSerializer):
    promoted_by = UserRefSerializer(read_only=True, allow_null=True)
    awaits_review = serializers.BooleanField(read_only=True, help_text="bootstrapped, and no curator has reviewed it yet")
    use_count = serializers.IntegerField(read_only=True, help_text="runs this entry guided")
    similarity = serializers.FloatField(read_only=True, allow_null=True, required=False,
                                        help_text="cosine similarity to the `similar` text (only with that parameter)")

    class Meta:
        model = MemoryEntry
        fields = ["id", "kg", "kg_name", "triple_text", "relation_label", "trajectory", "lesson", "verdict", "status", "source_run",
                  "promoted_by", "provenance", "awaits_review", "use_count", "similarity", "created_at", "updated_at"]
        read_only_fields = fields


class MemoryUseSerializer(serializers.ModelSerializer):
    """A run that retrieved the entry, at what similarity and rank."""

    task = serializers.IntegerField(source="run.task_id", read_only=True)
    run_status = serializers.CharField(source="run.status", read_only=True)
    run_verdict = serializers.CharField(source="run.verdict", read_only=True)
    run_created_at = serializers.DateTimeField(source="run.created_at", read_only=True)

    class Meta:
        model = RunMemory
        fields = ["run", "task", "similarity", "rank", "run_status", "run_verdict", "run_created_at"]
        read_only_fields = fields


class MemoryEntryDetailSerializer(MemoryEntrySerializer):
    uses = MemoryUseSerializer(many=True, read_only=True)

    class Meta(MemoryEntrySerializer.Meta):
        fields = [*MemoryEntrySerializer.Meta.fields, "uses"]
        read_only_fields = fields


# ------------------------------------------------------------------------------------------- evaluations
class EvaluationSerializer(serializers.ModelSerializer):
    configuration = serializers.CharField(source="label", read_only=True, help_text='e.g. "KGV-Agent − memory"')
    kg = serializers.CharField(source="kg.name", read_only=True)
    metrics = serializers.SerializerMethodField(help_text="every figure (docs/reference/evaluation.md), from the runs so far")
    waiting_for_worker = serializers.BooleanField(read_only=True, help_text="handed to the worker, which has not begun "
                                                                            "it yet (it drives one evaluation at a time)")

    class Meta:
        model = Evaluation
        fields = ["id", "name", "suite", "configuration", "benchmark", "kg", "sample_size", "seed", "mode", "ablations",
                  "repeats", "config", "dataset", "status", "waiting_for_worker", "metrics", "created_at", "started_at",
                  "finished_at"]
        read_only_fields = fields

    @extend_schema_field(serializers.DictField())
    def get_metrics(self, evaluation: Evaluation) -> dict:
        return reports.current_metrics(evaluation)


class EvaluationStartSerializer(serializers.Serializer):
    """An evaluation for the worker to verify, drawn from a dataset benchmark whose KG is loaded here (the same
    parameters as an existing evaluation resume it)."""

    benchmark = serializers.CharField(help_text="a dataset benchmark whose KG is loaded, e.g. codex-s or fb15k-237")
    mode = serializers.ChoiceField(MODES, default="evidence", help_text="the agent as configured, or a baseline")
    n = serializers.IntegerField(min_value=2, max_value=control.MAX_TRIPLES, default=200,
                                 help_text="triples, half true and half false")
    seed = serializers.IntegerField(min_value=0, default=0, help_text="the same seed draws the same triples")
    ablations = serializers.ListField(child=serializers.ChoiceField(list(ABLATIONS)), default=list,
                                      help_text="parts of the configuration to run without")
    types = serializers.ChoiceField(TYPE_SCHEMES, default="auto", help_text="how negatives keep the entity types")
    name = serializers.SlugField(max_length=200, required=False, help_text="default: from the parameters")

    def validate_benchmark(self, value: str) -> str:
        try:
            return control.check_benchmark(value)
        except BenchmarkError as exc:
            raise serializers.ValidationError(str(exc)) from None

    def spec(self) -> EvaluationSpec:
        data = self.validated_data
        return EvaluationSpec(benchmark=data["benchmark"], n=data["n"], seed=data["seed"], mode=data["mode"],
                              ablations=tuple(data["ablations"]), types=data["types"], name=data.get("name"))


class EvaluationHandedSerializer(EvaluationSerializer):
    outcome = serializers.CharField(help_text="started, resumed, stopped or withdrawn; or, for a start of an evaluation "
                                              "that exists already, its status (running, finished)")

    class Meta(EvaluationSerializer.Meta):
        fields = ["outcome", *EvaluationSerializer.Meta.fields]
        read_only_fields = fields


class EvaluationItemSerializer(serializers.Serializer):
    """One verification of the evaluation: the labelled triple, its run and whether the verdict was right."""

    position = serializers.IntegerField()
    repeat = serializers.IntegerField()
    task = serializers.IntegerField()
    head = serializers.CharField()
    relation = serializers.CharField()
    tail = serializers.CharField()
    expected = serializers.BooleanField(help_text="the gold label")
    run = serializers.IntegerField(allow_null=True)
    status = serializers.CharField(help_text="of the run; empty while none is queued")
    verdict = serializers.CharField()
    right = serializers.BooleanField()
    attempts = serializers.IntegerField()


class EvaluationDetailSerializer(EvaluationSerializer):
    items = serializers.SerializerMethodField()

    class Meta(EvaluationSerializer.Meta):
        fields = [*EvaluationSerializer.Meta.fields, "items"]
        read_only_fields = fields

    @extend_schema_field(EvaluationItemSerializer(many=True))
    def get_items(self, evaluation: Evaluation) -> list[dict]:
        return EvaluationItemSerializer(reports.items(evaluation), many=True).data


# -------------------------------------------------------------------------------------------- comparison
class RunSideSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.CharField()
    verdict = serializers.CharField()
    confidence = serializers.FloatField(allow_null=True)
    final_verdict = serializers.CharField(help_text="the latest reviewer decision's verdict, else the run's verdict")
    disputed = serializers.BooleanField()
    model = serializers.CharField()
    structural_model = serializers.IntegerField(allow_null=True)
    elapsed_seconds = serializers.IntegerField(allow_null=True)
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    steps = serializers.IntegerField()
    created_at = serializers.DateTimeField()


class EvidenceChangeSerializer(serializers.Serializer):
    kind = serializers.CharField()
    text = serializers.CharField()
    source = serializers.CharField()
    key_before = serializers.CharField(help_text="empty when the evidence is new in the second run")
    key_after = serializers.CharField(help_text="empty when the second run dropped it")
    cited_before = serializers.BooleanField()
    cited_after = serializers.BooleanField()


class StepPairSerializer(serializers.Serializer):
    seq = serializers.IntegerField()
    before = serializers.CharField(help_text="'action: KG_Neighbor(head=Q42)', empty past the end of that run")
    after = serializers.CharField()


class RunComparisonSerializer(serializers.Serializer):
    """Two runs of one task, the older first: verdicts, evidence added, dropped and kept, steps side by side."""

    before = RunSideSerializer()
    after = RunSideSerializer()
    verdict_changed = serializers.BooleanField()
    final_verdict_changed = serializers.BooleanField()
    confidence_change = serializers.FloatField(allow_null=True)
    added = EvidenceChangeSerializer(many=True)
    dropped = EvidenceChangeSerializer(many=True)
    kept = EvidenceChangeSerializer(many=True)
    steps = StepPairSerializer(many=True)
    first_divergent_step = serializers.IntegerField(allow_null=True)


# ------------------------------------------------------------------------------------------------- audit
class AuditEventSerializer(serializers.ModelSerializer):
    actor = UserRefSerializer(read_only=True, allow_null=True)

    class Meta:
        model = AuditEvent
        fields = ["id", "actor", "action", "object_type", "object_id", "before", "after", "created_at"]
        read_only_fields = fields
