"""An uploaded file (page form or API) written to disk for the readers, which take paths."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.core.exceptions import SuspiciousFileOperation
from django.utils.text import get_valid_filename


def save_upload(upload, folder: Path) -> Path:
    """The upload as a file in ``folder`` that keeps its name (a task's source says "name.csv:line") and its
    suffix (which decides CSV or TSV)."""
    try:
        name = get_valid_filename(Path(upload.name or "").name)
    except SuspiciousFileOperation:  # nothing usable left of the name
        name = ""
    target = folder / (name or "upload.csv")
    with target.open("wb") as handle:
        for chunk in upload.chunks():
            handle.write(chunk)
    return target


@contextmanager
def uploaded_file(upload) -> Iterator[Path]:
    """The upload saved in a temporary folder for the length of the block."""
    with tempfile.TemporaryDirectory(prefix="kgv-upload-") as folder:
        yield save_upload(upload, Path(folder))
