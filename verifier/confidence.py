"""The confidence of a verdict, from weights fitted on labelled runs.

The agent weighs its run's evidence into P(triple true) (verifier/agent/weighing.py) with the weights in
force: the active ConfidenceModel of the run's KG, else one fitted across KGs. The model put in force last
(fitted, imported or re-activated) weighs the runs of its KGs: a KG's own model for that KG, a model across
KGs for all of them, whose own models stand down (``put_in_force``). ``manage.py calibrate``
fits them by logistic regression on labelled runs (verifier/confidence_fitting.py) — benchmark runs on a validation split,
and reviewers' decisions as they accumulate. The fit is cross-fitted like the structural calibration
(verifier/structure/fitting.py): the fitted triples are split into folds and, beside the weights fitted on
all, one set is fitted without each fold. A fitted triple is weighed with the weights that left its fold
out, so an evaluation may draw it (the model's ``fitted`` map names the triples by external ids, so a
shipped model keeps this on any installation); with too few runs for folds, its triples are recorded as
fitted without a fold and no evaluation draws them again. The confidence stored on a run is the
probability that its verdict is right.

Shipped models live in verifier/data: ``confidence_model.json`` for every KG, activated by ``make demo``
when no model exists, and ``confidence_model.<KG name>.json`` for one KG, activated when that KG is loaded
unless it has a model of its own. A KG's own weighing matters where its evidence differs: FB15k-237 has no
passages, and the weight the model for every KG gives the structural probability (fitted on CoDEx-S,
where the text shares the work) under-states the verdicts there. A KG with no labelled runs at all gets its
own weighing in one of two ways: each newly trained structural model puts ``structural_weighing`` in force (the
structural probability alone, calibrated on the KG's own facts against corruptions of them), and ``calibrate --kg NAME
--calibration-triples`` fits one on the evidence of the structural calibration triples, verified in the evidence
mode, each structural probability from the calibration fit that left its fold out.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from django.db import transaction
from django.db.models import Q
from django.dispatch import receiver

from verifier.agent.weighing import (
    BRIEF_MODES,
    FEATURES,
    WEIGHED_MODES,
    Evidence,
    Weigher,
    Weights,
    aligned,
    dispute_reason,
    evidence_from,
    unweighed,
)
from verifier.errors import ApplicationError
from verifier.models import (
    ConfidenceModel,
    Entity,
    FitTriple,
    KnowledgeGraph,
    Relation,
    Run,
    StructuralModel,
    SupportItem,
)
from verifier.structure.signals import model_ready


def active_model(kg_id: int | None) -> ConfidenceModel | None:
    """The active confidence model fitted on this KG, else one fitted across KGs."""
    models = ConfidenceModel.objects.filter(active=True)
    return models.filter(kg_id=kg_id).first() or models.filter(kg__isnull=True).first()


def unweighed_warning(kg_id: int | None) -> str:
    """Why an agent run on this KG would not be weighed (no confidence model in force), or ""."""
    if active_model(kg_id) is not None:
        return ""
    return ("No confidence model is active: the agent's verdicts will be the model's own answers, with no confidence, "
            "and the evidence mode gives none. "
            f"Activate the shipped one with: manage.py calibrate --import verifier/data/{SEED_MODEL.name}")


def unweighed_kgs(kg_ids) -> list[KnowledgeGraph]:
    """The KGs among ``kg_ids`` that no confidence model in force weighs (``active_model`` finds none), by name."""
    models = ConfidenceModel.objects.filter(active=True)
    if models.filter(kg__isnull=True).exists():
        return []
    return list(KnowledgeGraph.objects.filter(pk__in=kg_ids).exclude(pk__in=models.values("kg_id")).order_by("name"))


class Unweighed(ApplicationError):
    """A run of a mode that decides only through a confidence model was asked for while none is in force."""


def require_weighing(kg_ids, mode: str) -> None:
    """Refuse (Unweighed) runs of ``mode`` on the KGs ``kg_ids`` (one id or several) that could end only without a
    verdict: the evidence and reading modes decide by weighing alone, so without a confidence model in force every
    such run would end "No fitted weighing is in force". Agent runs go ahead: their model's answer stands, unweighed.
    The message names every KG without one."""
    if mode not in BRIEF_MODES:
        return
    missing = unweighed_kgs([kg_ids] if isinstance(kg_ids, int) else kg_ids)
    if missing:
        names = ", ".join(kg.name for kg in missing)
        fit = " or ".join(f"manage.py calibrate --kg {kg.name} --calibration-triples" for kg in missing)
        raise Unweighed(
            f"the {mode} mode decides only through a confidence model, and none is in force for {names}: "
            f"every verification would end without a verdict. Activate the shipped one (manage.py calibrate --import "
            f"verifier/data/{SEED_MODEL.name}) or fit one on each such KG ({fit})")


def fit_key(task) -> str:
    """How a confidence model names a triple it was fitted on: the KG's name and the external ids (row ids
    differ between installations, and a fitted model is shipped to them)."""
    return "\t".join((task.kg.name, task.head.external_id, task.relation.external_id, task.tail.external_id))


def kgs_fitted_on(model: ConfidenceModel) -> set[str]:
    """The names of the KGs whose runs ``model`` was fitted on (from its ``fit_key``s)."""
    return {key.split("\t", 1)[0] for key in model.fitted or {}}


def weights_of(model: ConfidenceModel, key: str = "") -> Weights:
    """The model's weights for the triple ``key`` (fit_key): those fitted without its fold if the model was
    fitted on it, else those fitted on all."""
    try:
        coefficients = aligned(list(model.features), list(model.coefficients))
    except ValueError as exc:
        raise ValueError(f"confidence model {model.pk} was {exc}; refit it") from None
    fold = (model.fitted or {}).get(key, [None])[0] if key else None
    if fold is not None and fold < len(model.folds or []):
        weights = model.folds[fold]
        return Weights(aligned(list(model.features), weights["coefficients"]), weights["intercept"], model.source, model.pk, fold)
    return Weights(coefficients, model.intercept, model.source, model.pk)


def weigher_for(task) -> Weigher:
    """The agent's port: the weights in force for the task's triple when the run concludes (looked up then,
    not at its start)."""
    key = fit_key(task)

    def weigh() -> Weights | None:
        model = active_model(task.kg_id)
        return weights_of(model, key) if model is not None else None

    return weigh


def stored_evidence(run: Run) -> Evidence:
    """A finished run's evidence features from its stored items, with the model's own answer (which the
    compact profile's weighed verdict may differ from)."""
    items = SupportItem.objects.filter(run=run, kind__in=[SupportItem.Kind.PLAUSIBILITY, SupportItem.Kind.RULE,
                                                          SupportItem.Kind.PASSAGE]).values_list("key", "kind", "payload")
    assessment = run.assessment or {}
    # "" when no model answered (the evidence mode); runs stored before the assessment existed: their verdict
    return evidence_from(items, assessment.get("agent_verdict", run.verdict), assessment.get("agent_logit"))


@dataclass
class Assessment:
    confidence: float | None
    disputed: bool
    details: dict

    @property
    def structural_model(self) -> int | None:
        return self.details.get("structural_model")


def assess(run: Run, *, verdict: str, stated: float | None = None, weighed: dict | None = None) -> Assessment:
    """What a finished run stores: the agent's weighed assessment (``weighed``, from its verdict step), or for
    a baseline its evidence summary with the confidence the mode stated (the structural baselines'
    calibrated probability, self-consistency's vote share) or none."""
    if weighed:
        return Assessment(stated, bool(weighed.get("disputed_reason")), weighed)
    evidence = stored_evidence(run) if verdict in ("correct", "incorrect") else Evidence(verdict)
    details = {**asdict(evidence), "disputed_reason": dispute_reason(verdict, evidence.structural_probability), "p_true": None,
               "confidence_model": None, "confidence_fold": None}
    return Assessment(stated, bool(details["disputed_reason"]), details)


def record_fitted(model: ConfidenceModel) -> int:
    """Record the model's fitted triples of the loaded KGs as FitTriples, with their folds. A triple some
    earlier fit recorded without a fold keeps that record: no evaluation draws it."""

    by_kg: dict[str, list[tuple[list[str], list]]] = {}
    for key, value in (model.fitted or {}).items():
        kg_name, *ids = key.split("\t")
        by_kg.setdefault(kg_name, []).append((ids, value))
    rows = []
    for kg in KnowledgeGraph.objects.filter(name__in=list(by_kg)):
        wanted = by_kg[kg.name]
        entities = dict(Entity.objects.filter(kg=kg, external_id__in={i for ids, _ in wanted for i in (ids[0], ids[2])})
                        .values_list("external_id", "pk"))
        relations = dict(Relation.objects.filter(kg=kg, external_id__in={ids[1] for ids, _ in wanted}).values_list("external_id", "pk"))
        for (head, relation, tail), (fold, label) in wanted:
            if head in entities and tail in entities and relation in relations:
                rows.append(FitTriple(kg=kg, purpose=FitTriple.Purpose.CONFIDENCE, head_id=entities[head], relation_id=relations[relation],
                                      tail_id=entities[tail], label=label, fold=fold))
    FitTriple.objects.bulk_create(rows, ignore_conflicts=True, batch_size=5000)
    return len(rows)


def weighed_runs(runs):
    """The finished runs among ``runs`` whose verdict a confidence model weighs: a verdict of an investigation,
    or of the evidence weighed (with or without the article read)."""
    weighed = Q(config__mode__in=WEIGHED_MODES) | ~Q(config__has_key="mode")
    return runs.filter(weighed, status=Run.Status.SUCCEEDED, verdict__in=["correct", "incorrect"])


def reassess(runs) -> int:
    """Recompute the confidence and P(true) of finished weighed runs (agent, evidence) under the weights now in force (after a
    new fit). Verdicts are left as they were given: a run's steps show how it was reached."""
    count = 0
    for run in weighed_runs(runs).select_related("task__kg", "task__head", "task__relation", "task__tail"):
        model = active_model(run.task.kg_id)
        if model is None:
            continue
        evidence = stored_evidence(run)
        weights = weights_of(model, fit_key(run.task))
        p_true = weights.probability(evidence)
        details = {**(run.assessment or {}), **asdict(evidence),
                   "disputed_reason": dispute_reason(run.verdict, evidence.structural_probability), "p_true": round(p_true, 4),
                   "confidence_model": model.pk, "confidence_fold": weights.fold,
                   "unweighed": unweighed(evidence, weights)}
        Run.objects.filter(pk=run.pk).update(confidence=p_true if run.verdict == "correct" else 1 - p_true,
                                             disputed=bool(details["disputed_reason"]), assessment=details,
                                             structural_model_id=evidence.structural_model)
        count += 1
    return count


# ------------------------------------------------------------------------------------------ moving models

SEED_MODEL = Path(__file__).resolve().parent / "data" / "confidence_model.json"
FORMAT = "kgv-confidence-model/1"


def export_model(model: ConfidenceModel, path: Path) -> None:
    """Write a confidence model as JSON (its weights, what it was fitted on and how well it did)."""
    path.write_text(json.dumps({"format": FORMAT, "kg": model.kg.name if model.kg_id else None,
                                "features": model.features, "coefficients": model.coefficients,
                                "intercept": model.intercept, "source": model.source, "metrics": model.metrics,
                                "folds": model.folds, "fitted": model.fitted}, indent=1))


def import_model(path: Path, *, fallback: bool = False) -> ConfidenceModel:
    """Activate a confidence model read from ``export_model``'s JSON, for its KG (which must be loaded) or for
    every KG (``fallback``: only where a KG has no model of its own); a file that is not one, or whose
    features are not the agent's, is refused with the reason and nothing is changed."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable JSON file ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{path}: not a KGV confidence model (format {FORMAT!r} expected)")
    try:
        aligned(list(data.get("features") or []), list(data.get("coefficients") or []))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: {exc}; refit it with manage.py calibrate") from None
    kg = None
    if data.get("kg"):
        kg = KnowledgeGraph.objects.filter(name=data["kg"]).first()
        if kg is None:
            raise ValueError(f"{path}: fitted for the KG {data['kg']!r}, which is not loaded; load it first (manage.py load_kg)")
    with transaction.atomic():
        model = ConfidenceModel.objects.create(kg=kg, features=data["features"], coefficients=[float(c) for c in data["coefficients"]],
                                               intercept=float(data["intercept"]), metrics=data.get("metrics") or {},
                                               folds=data.get("folds") or [], fitted=data.get("fitted") or {},
                                               source=f"{data.get('source', '')} (imported from {path.name})"[:500])
        put_in_force(model, fallback=fallback)
        record_fitted(model)
        return model


def put_in_force(model: ConfidenceModel, *, fallback: bool = False) -> None:
    """Make ``model`` the one that weighs the runs of its KGs (the module docstring's rule); ``fallback``: a
    model for every KG that leaves the KGs' own models in force."""
    others = ConfidenceModel.objects.filter(active=True).exclude(pk=model.pk)
    (others.filter(kg=model.kg_id) if model.kg_id or fallback else others).update(active=False)
    if not model.active:
        model.active = True
        model.save(update_fields=["active"])


def stand_down(model: ConfidenceModel) -> None:
    """Take a KG's own model out of force: the model for every KG, if one is in force, weighs its runs again."""
    if model.kg_id is None:
        raise ValueError(f"confidence model #{model.pk} is the one for every KG: put another in force instead")
    ConfidenceModel.objects.filter(pk=model.pk).update(active=False)
    model.active = False


def activate(pk: int) -> ConfidenceModel:
    """Put an earlier model back in force (``manage.py calibrate --activate``)."""
    model = ConfidenceModel.objects.filter(pk=pk).first()
    if model is None:
        raise ValueError(f"there is no confidence model #{pk} (manage.py calibrate --list shows them)")
    with transaction.atomic():
        put_in_force(model)
    return model


def seed_shipped_models() -> list[ConfidenceModel]:
    """Activate the shipped confidence models where there is none yet: the one for every KG when there is no
    model for every KG (as the fallback: a KG's own model stays in force), then each loaded KG's own
    (``seed_kg_model``)."""
    seeded = ([import_model(SEED_MODEL, fallback=True)]
              if SEED_MODEL.exists() and not ConfidenceModel.objects.filter(kg__isnull=True).exists() else [])
    return seeded + [model for kg in KnowledgeGraph.objects.all() if (model := seed_kg_model(kg)) is not None]


def seeded_line(model: ConfidenceModel) -> str:
    """"Verdict confidence for fb15k-237: <source>." — what activating a shipped model means, for a command's output."""
    return f"Verdict confidence{f' for {model.kg.name}' if model.kg else ''}: {model.source}."


STRUCTURAL_ALONE = "the KG's own structural calibration, fitted without labels"


def structural_weighing(kg: KnowledgeGraph, calibration: dict) -> ConfidenceModel | None:
    """A KG's own weighing before anything about it is labelled: its verdicts weighed by its structural probability
    alone (calibrated on the KG's own data), nothing else — a model's answer, fitted on no labelled run of this KG,
    gets no weight. Put in force unless the KG has a confidence model of its own already (one fitted on its labelled
    runs stays) or the model for every KG was fitted on its runs (CoDEx-S's). ``calibration``: the structural
    calibration's metrics, kept as its own. None when nothing was put in force."""
    if ConfidenceModel.objects.filter(kg=kg).exclude(source=STRUCTURAL_ALONE).exists():
        return None
    fallback = active_model(None)
    if fallback is not None and fallback.kg_id is None and kg.name in kgs_fitted_on(fallback):
        return None
    if not calibration.get("n"):
        return None
    coefficients = [1.0 if name == "structural_logit" else 0.0 for name in FEATURES]
    with transaction.atomic():
        model = ConfidenceModel.objects.create(
            kg=kg, features=FEATURES, coefficients=coefficients, intercept=0.0, source=STRUCTURAL_ALONE, active=False,
            metrics={"n": calibration.get("n"), "cross_validated_ece": calibration.get("cross_validated_ece"),
                     "cross_validated_accuracy": calibration.get("cross_validated_accuracy"), "label_free": True})
        put_in_force(model)
    return model


@receiver(model_ready, dispatch_uid="verifier.confidence.structural_weighing")
def _follow_structural_model(sender, *, kg: KnowledgeGraph, model: StructuralModel, **kwargs) -> None:
    """A KG's newly trained structural model brings its label-free weighing (``structural_weighing``) into force, in
    the transaction that makes the model ready."""
    structural_weighing(kg, (model.metrics or {}).get("calibration") or {})


def seed_kg_model(kg: KnowledgeGraph) -> ConfidenceModel | None:
    """Activate the model shipped for this KG (verifier/data/confidence_model.<KG name>.json) unless the KG has
    a confidence model of its own already (in force or stood down by a curator)."""
    shipped = {path.name: path for path in SEED_MODEL.parent.glob("confidence_model.*.json")}
    path = shipped.get(f"confidence_model.{kg.name}.json")
    if path is None or ConfidenceModel.objects.filter(kg=kg).exists():
        return None
    return import_model(path)
