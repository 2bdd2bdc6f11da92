"""An upload is written under a name the readers can trust: its own name made safe, its suffix kept (it
decides CSV or TSV), a fallback when nothing of the name is usable, and gone after the block."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from verifier.uploads import save_upload, uploaded_file


@pytest.mark.parametrize(("name", "saved"), [("flags.tsv", "flags.tsv"), ("../../etc/my flags (1).csv", "my_flags_1.csv"),
                                             ("", "upload.csv"), ("()", "upload.csv")])
def test_an_upload_keeps_a_safe_name_and_its_suffix(tmp_path, name, saved):
    upload = SimpleUploadedFile("placeholder", b"Q42\tP27\tQ145\n")
    upload._name = name  # as a client may send it, before any cleaning
    path = save_upload(upload, tmp_path)
    assert path.parent == tmp_path and path.name == saved and path.read_bytes() == b"Q42\tP27\tQ145\n"


def test_the_temporary_copy_is_gone_after_the_block():
    with uploaded_file(SimpleUploadedFile("flags.csv", b"head,relation,tail\n")) as path:
        assert path.read_text() == "head,relation,tail\n"
    assert not path.exists() and not path.parent.exists()
