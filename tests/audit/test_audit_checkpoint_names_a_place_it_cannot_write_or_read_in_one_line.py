"""`manage.py audit_checkpoint` refuses, in one CommandError naming the place and the
reason, a FILE in a directory it cannot create a file in, and a checkpoint storage it cannot
write or list (VAR_DIR/audit-checkpoints a file, a bucket refusing it), a name the file
system cannot take (too long), and a file whose line is nested past the JSON decoder's
depth: a condition its user can put right, never a traceback."""

import gzip

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

pytestmark = pytest.mark.django_db


def refusal(*args) -> str:
    with pytest.raises(CommandError) as refused:
        call_command("audit_checkpoint", *args)
    return str(refused.value)


def test_a_file_in_a_directory_that_takes_no_new_file_is_refused_in_one_line():
    # /proc is a directory in which nobody, root included, creates a file.
    message = refusal("write", "/proc/heads.jsonl.gz")

    assert message.startswith("'/proc/heads.jsonl.gz' cannot be written: ")
    assert "\n" not in message


@pytest.fixture
def storage_is_a_file(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items()
                         if k != "audit_checkpoints"}
    (tmp_path / "audit-checkpoints").write_text("not a directory")


def test_a_checkpoint_storage_that_cannot_be_written_is_refused_in_one_line(storage_is_a_file):
    message = refusal("write")

    assert message.startswith("the checkpoint storage cannot be written: ")
    assert "audit-checkpoints" in message and "\n" not in message


def test_a_checkpoint_storage_that_cannot_be_listed_is_refused_in_one_line(storage_is_a_file):
    message = refusal("check", "--latest")

    assert message.startswith("the checkpoint storage cannot be read: ")
    assert "audit-checkpoints" in message and "\n" not in message


TOO_LONG = "x" * 300 + ".jsonl.gz"


@pytest.mark.parametrize("operation", ["write", "check"])
def test_a_name_the_file_system_cannot_take_is_refused_in_one_line(operation, tmp_path):
    message = refusal(operation, str(tmp_path / TOO_LONG))

    assert "File name too long" in message and "\n" not in message
    assert not list(tmp_path.iterdir())


def test_a_checkpoint_nested_past_the_decoders_depth_is_refused_naming_its_line(tmp_path):
    damaged = tmp_path / "damaged.jsonl.gz"
    with gzip.open(damaged, "wt") as out:
        out.write('{"checkpoint": "audit-heads", "format": 1, "taken_at": "x"}\n')
        out.write("[" * 100_000 + "]" * 100_000 + "\n")

    message = refusal("check", str(damaged))

    assert message == f"'{damaged}': line 2 is nested too deep"



@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_name_that_is_no_regular_file_is_refused_without_waiting_on_it(kind, tmp_path):
    """A named pipe held the command until something wrote to it (for ever, in a script),
    and a checkpoint is read twice, its seal checked first, where a pipe gives its lines
    once."""
    import os
    place = tmp_path / "heads.jsonl.gz"
    os.mkfifo(place) if kind == "fifo" else place.mkdir()

    message = refusal("check", str(place))

    assert message == f"'{place}' is not a regular file: name a checkpoint file"
