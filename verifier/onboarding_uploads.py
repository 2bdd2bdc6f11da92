"""An uploaded KG file (the onboarding page or the API) checked before anything is kept: the name must be able to name
a KG, and the file must be one the loader reads (TSV or N-Triples) with at least one triple and no malformed line.
Only then is it handed to ``verifier.onboarding.request``, which keeps it and sends it to the training workers; a file
refused here leaves nothing behind (its temporary folder goes with it)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from verifier.kg.loader import ImportRejected
from verifier.kg.sources import KG_NAME, SourceError, detect_source
from verifier.models import Onboarding
from verifier.onboarding import OnboardingError, request
from verifier.uploads import save_upload

SUFFIXES = (".tsv", ".txt", ".nt")


def check_name(name: str) -> str:
    if not KG_NAME.match(name or ""):
        raise OnboardingError(f"{(name or '')[:120]!r} cannot name a KG: use letters, digits, - and _ (at most 100)")
    return name


def check_kg_file(path: Path, *, name: str, shown: str) -> int:
    """How many triples the file at ``path`` holds (``shown``: its name as the user knows it); OnboardingError or
    ImportRejected (every malformed line) when the loader would refuse it."""
    if path.suffix.lower() not in SUFFIXES:
        raise OnboardingError(f"{shown} is not a KG file the loader reads: choose a .tsv or .txt file of "
                              "head<TAB>relation<TAB>tail lines, or an .nt (N-Triples) file")
    try:
        source = detect_source(path, name=name)
        triples = sum(1 for _ in source.triples())
    except SourceError as exc:
        raise OnboardingError(f"{shown} cannot be read: {exc}") from None
    if source.problems:
        raise ImportRejected(source.problems)
    if not triples:
        raise OnboardingError(f"{shown} holds no triple")
    return triples


def onboard_upload(*, upload, name: str, actor=None) -> Onboarding:
    """Check ``upload`` (a Django UploadedFile) and hand it to the training workers as the KG ``name``."""
    check_name(name)
    with tempfile.TemporaryDirectory(prefix="kgv-onboard-") as folder:
        path = save_upload(upload, Path(folder))
        check_kg_file(path, name=name, shown=Path(upload.name or "the file").name)
        return request(path=path, name=name, actor=actor)
