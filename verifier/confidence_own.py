"""A KG's own confidence model before anything is reviewed, from the workbench.

A local KG without a confidence model of its own is weighed by the model for every KG, fitted on another KG's evidence
(on a KG without text it is under-confident). Its structural calibration triples are labelled already: the dataset's
labelled triples, or, on a KG without labels, a sample of its own facts and corruptions of them, each with an
out-of-fold structural probability. An admin hands their evidence-mode evaluation to the worker
(``labelled.calibration_evaluation``, the same one ``manage.py calibrate --kg NAME --calibration-triples`` drives in
its own process), fits a candidate confidence model on its runs once it has finished, compares it with the model in
force on the confidence page and puts it in force there.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from verifier import confidence, confidence_fitting
from verifier.evaluation import control
from verifier.evaluation.labelled import calibration_evaluation, calibration_evaluation_name
from verifier.models import ConfidenceModel, Evaluation, FitTriple, KnowledgeGraph, StructuralModel
from verifier.selectors import verified_so_far
from verifier.services import record_audit


@dataclass
class OwnModelState:
    """Where a local KG stands on the way to a confidence model fitted on its calibration triples."""

    structural: StructuralModel | None  # the ready, calibrated structural model whose calibration triples are verified
    triples: int  # its calibration triples
    evaluation: Evaluation | None  # their evidence-mode evaluation, once started
    fitted: ConfidenceModel | None  # the confidence model fitted on that evaluation, once fitted
    refused: str  # why the triples cannot be verified yet ("" when they can)
    verified: str | None = None  # the evaluation's progress, "k of n"

    @property
    def resumable(self) -> bool:
        """Created or interrupted, and not waiting for the worker: the admin's click hands it (back) to the worker."""
        evaluation = self.evaluation
        return evaluation is not None and evaluation.status in control.RESUMABLE and not evaluation.waiting_for_worker


def wanted(kg: KnowledgeGraph) -> bool:
    """A local KG with no confidence model of its own in force, weighed by the model for every KG that was not fitted on
    its runs (or by none)."""
    if kg.kind != KnowledgeGraph.Kind.LOCAL or ConfidenceModel.objects.filter(kg=kg, active=True).exists():
        return False
    fallback = confidence.active_model(None)
    return fallback is None or kg.name not in confidence.kgs_fitted_on(fallback)


def own_model_state(kg: KnowledgeGraph) -> OwnModelState | None:
    """The KG's state (None for a SPARQL KG, which has no structural model to take triples from)."""
    if kg.kind != KnowledgeGraph.Kind.LOCAL:
        return None
    structural = StructuralModel.objects.ready_for(kg)
    if structural is None:
        return OwnModelState(None, 0, None, None, "Its structural model is not trained yet: its calibration triples come "
                                                "from that training.")
    if not structural.calibrated_at:
        return OwnModelState(structural, 0, None, None, f"{structural.description} has no calibration: "
                                                      f"manage.py train_kge {kg.name} --recalibrate")
    name = calibration_evaluation_name(structural)
    triples = FitTriple.objects.filter(kg=kg, purpose=FitTriple.Purpose.STRUCTURAL_CALIBRATION).count()
    refused = "" if triples else f"Its structural calibration recorded no triples: manage.py train_kge {kg.name} --recalibrate"
    evaluation = Evaluation.objects.filter(name=name).first()
    return OwnModelState(structural, triples, evaluation,
                       ConfidenceModel.objects.filter(kg=kg, source=f"evaluation {name}").order_by("-pk").first(), refused,
                       verified_so_far([evaluation.pk]).get(evaluation.pk) if evaluation else None)


def verify_calibration_triples(kg: KnowledgeGraph, *, actor) -> Evaluation:
    """Hand the evidence-mode evaluation of the KG's calibration triples to the worker (drawn the first time, resumed
    after an interruption). ValueError with the reason when it cannot be."""
    state = own_model_state(kg)
    if state is None or state.refused:
        raise ValueError(state.refused if state else f"{kg.name} is a SPARQL endpoint: it has no structural model")
    evaluation = calibration_evaluation(state.structural)
    if evaluation.status == Evaluation.Status.FINISHED:
        return evaluation
    if not control.resume(evaluation, actor=actor, action="evaluation.resume" if evaluation.started_at else "evaluation.start"):
        raise ValueError(f"evaluation {evaluation.name} is {evaluation.status} already")
    return evaluation


def fit_on_calibration_triples(kg: KnowledgeGraph, *, actor) -> ConfidenceModel:
    """A candidate confidence model for ``kg`` fitted on the finished evaluation of its calibration triples, not put
    in force. ValueError when there is none, or its runs cannot be fitted on (the message says why)."""
    state = own_model_state(kg)
    evaluation = state.evaluation if state else None
    if evaluation is None or evaluation.status != Evaluation.Status.FINISHED:
        raise ValueError("its calibration triples are not verified yet")
    pairs = confidence_fitting.labelled_runs(evaluations=[evaluation.name], kg=kg)
    with transaction.atomic():
        fitted = confidence_fitting.fit(pairs, kg=kg, source=f"evaluation {evaluation.name}", activate=False)
        record_audit(actor=actor, action="confidence.fit", obj=fitted.model,
                     after={"kg": kg.name, "n": fitted.n, "evaluation": evaluation.name,
                            "cross_validated": fitted.cross_validated})
    return fitted.model
