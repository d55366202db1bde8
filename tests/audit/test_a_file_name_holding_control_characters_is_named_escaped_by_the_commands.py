"""A file name given to a command (verify_audit --archive, audit_checkpoint FILE) that holds
control characters (a terminal's escape sequence, a line break, a bell) is named in the
command's refusal quoted, each such character written as its escape: printed as it is, it
recoloured the terminal and forged a second line of the message. The refusal is one line and
the exit status is the refusal's (1); nothing is written."""

import pytest

from tests.processes import manage

pytestmark = pytest.mark.django_db

NAME = "heads\x1b[31m red\nforged line\x07.jsonl.gz"
SHOWN = r"'heads\x1b[31m red\nforged line\x07.jsonl.gz'"


def refused(*args) -> str:
    """What the command said on stderr, having asserted it ended in one refusal (status 1)
    and said nothing on stdout."""
    process = manage(*args)
    out, err = process.communicate(timeout=90)
    assert process.returncode == 1, err
    assert out == ""
    assert err.startswith("CommandError: ") and err.endswith("\n")
    assert not [c for c in err[:-1] if ord(c) < 32 or ord(c) == 127], err
    return err


@pytest.fixture
def place(tmp_path):
    """A directory holding a file, named NAME, that is neither an archive nor a
    checkpoint."""
    (tmp_path / NAME).write_bytes(b"not gzip")
    return tmp_path


def test_verify_audit_names_an_archive_it_cannot_read_escaped(place):
    err = refused("verify_audit", "--archive", str(place / NAME))

    assert f"archive {SHOWN[0]}{place}/{SHOWN[1:]}: the archive cannot be read" in err


def test_verify_audit_names_an_archive_it_cannot_find_escaped(place):
    err = refused("verify_audit", "--archive", NAME)

    assert err == f"CommandError: no archive file {SHOWN} on disk or in the archive storage\n"


def test_verify_audit_names_a_directory_escaped(place):
    (place / "d").mkdir()
    directory = place / "d" / NAME
    directory.mkdir()

    err = refused("verify_audit", "--archive", str(directory))

    assert err.endswith(f"/d/{SHOWN[1:]} is a directory, not an archive file\n")


def test_audit_checkpoint_check_names_a_file_it_cannot_read_escaped(place):
    err = refused("audit_checkpoint", "check", str(place / NAME))

    assert f"/{SHOWN[1:]} cannot be read: " in err


def test_audit_checkpoint_check_names_a_missing_file_escaped(place):
    err = refused("audit_checkpoint", "check", str(place / "none" / NAME))

    assert err.endswith(f"/none/{SHOWN[1:]} does not exist\n")


def test_audit_checkpoint_check_names_what_is_no_regular_file_escaped(place):
    (place / "d").mkdir()
    (place / "d" / NAME).mkdir()

    err = refused("audit_checkpoint", "check", str(place / "d" / NAME))

    assert err.endswith(f"/d/{SHOWN[1:]} is not a regular file: name a checkpoint file\n")


def test_audit_checkpoint_write_names_a_file_that_exists_escaped(place):
    err = refused("audit_checkpoint", "write", str(place / NAME))

    assert err.endswith(f"/{SHOWN[1:]} exists: a checkpoint is never written over another\n")
    assert (place / NAME).read_bytes() == b"not gzip"


def test_audit_checkpoint_write_names_a_directory_that_is_not_there_escaped(place):
    err = refused("audit_checkpoint", "write", str(place / NAME / "heads.jsonl.gz"))

    assert err.endswith(f"/{SHOWN[1:-1]}' is no directory\n")
    assert sorted(p.name for p in place.iterdir()) == [NAME]
