"""A structural model's calibrations and the folds they were cross-fitted on, as stored, read once per
process and calibration (the calibration's stamp names it): what scoring needs from the fit
(verifier/structure/fitting.py writes them)."""

from __future__ import annotations

import threading

from verifier.models import FitTriple, StructuralModel
from verifier.structure.calibration import CrossFitted

_FOLDS: dict[tuple[int, str], dict[tuple[int, int, int], int]] = {}
_CALIBRATIONS: dict[tuple[int, str, str], CrossFitted | None] = {}
_FOLDS_LOCK = threading.Lock()


def stored_calibration(model: StructuralModel, name: str) -> CrossFitted | None:
    """The model's calibration ``name`` ("structural", "rules"), read once per process and calibration."""
    key = (model.pk, model.calibration_stamp, name)
    with _FOLDS_LOCK:
        if key not in _CALIBRATIONS:
            stored = StructuralModel.objects.filter(pk=model.pk).values_list("calibration", flat=True).first()
            _CALIBRATIONS[key] = CrossFitted.from_stored(stored or {}, name)
        return _CALIBRATIONS[key]


def fold_of(model: StructuralModel) -> dict[tuple[int, int, int], int]:
    """(head, relation, tail) row ids → the fold its calibration left it out of, for the triples the KG's
    current calibration was fitted on; read once per process and calibration."""
    key = (model.kg_id, model.calibration_stamp)
    with _FOLDS_LOCK:
        if key not in _FOLDS:
            _FOLDS[key] = {(h, r, t): fold for h, r, t, fold in FitTriple.objects.filter(
                kg_id=model.kg_id, purpose=FitTriple.Purpose.STRUCTURAL_CALIBRATION, fold__isnull=False,
            ).values_list("head_id", "relation_id", "tail_id", "fold")}
        return _FOLDS[key]
