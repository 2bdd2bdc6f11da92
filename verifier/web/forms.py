"""Forms of the queue and memory-bank pages. Filtering the queue is not a form: its parameters are read
by ``verifier.queue_filters.filter_tasks``, shared with the API."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Q
from django.http import QueryDict

from verifier import confidence
from verifier.agent.config import MODE_LABELS
from verifier.agent.loop import MODES
from verifier.agent.prompts import LESSON_CHARS
from verifier.agent.weighing import BRIEF_MODES
from verifier.benchmarks.datasets import available_benchmarks
from verifier.evaluation import control
from verifier.evaluation.driver import EvaluationSpec
from verifier.exports import FORMATS
from verifier.models import KnowledgeGraph, MemoryEntry, VerificationTask
from verifier.queue_filters import QueueFilterError, filter_tasks
from verifier.roles import ADMIN, CURATOR, REVIEWER
from verifier.selectors import memory_view
from verifier.services import MAX_BULK, MEMORY_BULK_ACTIONS

FLAGGED_SUFFIXES = (".csv", ".tsv", ".txt")


def assignable_users():
    """Who can be given a task: active users who may run verifications (curator and above)."""
    return (get_user_model().objects.filter(is_active=True)
            .filter(Q(is_superuser=True) | Q(groups__name__in=[CURATOR, REVIEWER, ADMIN])).distinct().order_by("username"))


# What a curator starts from the workbench: an investigation by the configured agent, or its evidence brief weighed
# by the confidence model in force with no language model asked (AgentConfig mode "evidence"): a verdict and its
# confidence in about a second, without the plan, the steps and the reading — a first pass over a large import.
RUN_KINDS = (("agent", "Investigate"), ("evidence", "Weigh the evidence only"))


@dataclass(frozen=True)
class RunKind:
    """A kind of RUN_KINDS as a run form offers it for the tasks of some KGs: ``disabled`` when it can start on
    none of them, ``note`` saying why or where it cannot (confidence.require_weighing is the rule)."""

    value: str
    label: str
    disabled: bool = False
    note: str = ""


def run_kinds(kg_ids) -> list[RunKind]:
    """RUN_KINDS for tasks of the KGs ``kg_ids``: a kind that decides only through a confidence model is disabled
    where none of them has one in force, and names those without one where only some lack it."""
    kg_ids = set(kg_ids)
    missing = [kg.name for kg in confidence.unweighed_kgs(kg_ids)]
    kinds = []
    for value, label in RUN_KINDS:
        if value not in BRIEF_MODES or not missing:
            kinds.append(RunKind(value, label))
            continue
        every = len(missing) == len(kg_ids)
        note = (f"decides only through a confidence model, and none is in force for {', '.join(missing)}: activate "
                "the shipped one or fit one on the Confidence page")
        shown = f"{label} (needs a confidence model)" if every else f"{label} (not for {', '.join(missing)})"
        kinds.append(RunKind(value, shown, disabled=every, note=note))
    return kinds


class TaskImportForm(forms.Form):
    kg = forms.ModelChoiceField(KnowledgeGraph.objects.order_by("name"), label="Knowledge graph",
                                empty_label=None, help_text="Terms are resolved against this graph.")
    file = forms.FileField(label="Flagged triples",
                           help_text="CSV or TSV: head, relation, tail and optionally label (true/false); a header row is optional.")
    then = forms.ChoiceField(label="Then", required=False, initial="", choices=[("", "Leave them pending"), *RUN_KINDS],
                             help_text=f"Start a run of each triple queued now (at most {MAX_BULK:,}; the queue's bulk run "
                                       "takes the rest): weighing the evidence gives every row a verdict and a confidence in about a "
                                       "second each, to sort by before investigating.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        kinds = run_kinds(KnowledgeGraph.objects.values_list("pk", flat=True))
        self.fields["then"].choices = [("", "Leave them pending"), *((kind.value, kind.label) for kind in kinds)]

    def clean_file(self):
        upload = self.cleaned_data["file"]
        suffix = Path(upload.name).suffix.lower()
        if suffix not in FLAGGED_SUFFIXES:
            raise forms.ValidationError(f"Upload a .csv or .tsv file (got {suffix or 'no extension'}).")
        if upload.size > settings.KGV_MAX_UPLOAD_BYTES:
            megabytes = settings.KGV_MAX_UPLOAD_BYTES // (1024 * 1024)
            raise forms.ValidationError(f"The file is larger than {megabytes} MB: split it, or ask an administrator to import it "
                                        "from a shell.")
        return upload


class RunKindField(forms.ChoiceField):
    def __init__(self, **kwargs):
        super().__init__(choices=RUN_KINDS, required=False, initial="agent", **kwargs)

    def clean(self, value):
        return super().clean(value) or "agent"


def run_config(kind: str) -> dict:
    """The run configuration of a kind of RUN_KINDS ({} leaves everything to the defaults settled when the run is created)."""
    return {} if kind == "agent" else {"mode": kind}


class RunStartForm(forms.Form):
    """Start a run of one task (the task and run pages)."""

    kind = RunKindField()


class ViewSelectionForm(forms.Form):
    """The rows a bulk action takes: the ticked ones, or with ``matching`` every row of the list's view
    (``return_query``: its filters, read as the list reads them; ``in_view``), at most MAX_BULK either way."""

    NOUNS = ("row", "rows")
    matching = forms.BooleanField(required=False)
    return_query = forms.CharField(required=False)

    def in_view(self, params: QueryDict):
        raise NotImplementedError

    def taken(self, ticked):
        singular, plural = self.NOUNS
        if self.cleaned_data.get("matching"):
            rows = self.in_view(QueryDict(self.cleaned_data.get("return_query", "")))
            count = rows.count()
            if not count:
                raise forms.ValidationError(f"No {singular} is in this view any more.")
            if count > MAX_BULK:
                raise forms.ValidationError(f"This view holds {count:,} {plural}; one action takes at most {MAX_BULK:,}: "
                                            "narrow the filters.")
            return rows
        if not ticked:
            raise forms.ValidationError(f"Tick at least one {singular} first.")
        if len(ticked) > MAX_BULK:
            raise forms.ValidationError(f"One action takes at most {MAX_BULK:,} {plural}; {len(ticked):,} were ticked.")
        return ticked


class BulkActionForm(ViewSelectionForm):
    """An action on the tasks of the queue (ViewSelectionForm). The view checks the role each action needs."""

    ACTIONS = (("run", "Run selected"), ("assign", "Assign"), ("accept", "Accept the verdicts"), ("export", "Export"))
    NOUNS = ("task", "tasks")

    action = forms.ChoiceField(choices=ACTIONS)
    kind = RunKindField()
    tasks = forms.ModelMultipleChoiceField(VerificationTask.objects.all(), required=False, error_messages={
        "invalid_choice": "Task %(value)s no longer exists.",
        "invalid_pk_value": "%(pk)s is not a task id.",
    })
    assignee = forms.ModelChoiceField(assignable_users(), required=False, empty_label="nobody (unassign)")
    fmt = forms.ChoiceField(choices=[(f.name, f.label) for f in FORMATS.values()], required=False, initial="json")

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user
        self.fields["assignee"].queryset = assignable_users()  # re-read: roles change while the server runs

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("action") == "export" and not cleaned.get("fmt"):
            self.add_error("fmt", "Choose an export format.")
        if "tasks" in cleaned:
            cleaned["tasks"] = self.taken(cleaned["tasks"])
        return cleaned

    def in_view(self, params):
        try:
            return filter_tasks(VerificationTask.objects.all(), params, user=self.user)
        except QueueFilterError as exc:
            raise forms.ValidationError(f"The view's filters cannot be used: {exc}") from exc


class MemoryBulkForm(ViewSelectionForm):
    """Keep or retire memories of the bank list (ViewSelectionForm; services.review_memories)."""

    NOUNS = ("entry", "entries")

    action = forms.ChoiceField(choices=list(MEMORY_BULK_ACTIONS.items()))
    entries = forms.ModelMultipleChoiceField(MemoryEntry.objects.order_by("pk"), required=False, error_messages={
        "invalid_choice": "Memory %(value)s no longer exists.",
        "invalid_pk_value": "%(pk)s is not a memory id.",
    })
    reason = forms.CharField(required=False)

    def clean(self):
        cleaned = super().clean()
        if "entries" in cleaned:
            cleaned["entries"] = self.taken(cleaned["entries"])
        return cleaned

    def in_view(self, params):
        view = memory_view(params)
        if view.mode == "similar":
            raise forms.ValidationError("A similarity search ranks the whole bank: tick the entries to act on instead.")
        return view.entries


class MemoryReviewForm(forms.Form):
    lesson = forms.CharField(widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "true"}), max_length=2000,
                             help_text=f"What a small model's plan is shown of this case (at most {LESSON_CHARS} "
                                       "characters): what decided it, and the evidence that did.")


class PromoteForm(forms.Form):
    triple_text = forms.CharField(label="Triple text", max_length=2000,
                                  help_text="What is embedded: later runs retrieve this entry by similarity to it.")
    trajectory = forms.CharField(widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "true"}),
                                 help_text="Edit freely: drop dead ends, keep the reasoning that a later run should copy.")


class EvaluationStartForm(forms.Form):
    """An evaluation started from the workbench: a dataset benchmark drawn here, one configuration, run by the worker
    (``manage.py evaluate`` takes benchmark files, ablations, repeats and suites)."""

    benchmark = forms.ChoiceField(label="Benchmark", help_text="A dataset's labelled split whose KG is loaded (a test split "
                                                                "once its files are in the data folder).")
    mode = forms.ChoiceField(label="Configuration", choices=[(mode, MODE_LABELS.get(mode, mode)) for mode in MODES],
                             initial="evidence",
                             help_text="The agent as configured, or a baseline; those without a language model take about "
                                       "a second a triple.")
    n = forms.IntegerField(label="Triples", min_value=2, max_value=control.MAX_TRIPLES, initial=200,
                           help_text="Half true, half false; with n = 100 an accuracy has about ±10 points of noise.")
    seed = forms.IntegerField(label="Seed", min_value=0, initial=0, help_text="The same seed draws the same triples.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["benchmark"].choices = [(spec, spec) for spec in available_benchmarks()]

    def spec(self) -> EvaluationSpec:
        data = self.cleaned_data
        return EvaluationSpec(benchmark=data["benchmark"], n=data["n"], seed=data["seed"], mode=data["mode"])
