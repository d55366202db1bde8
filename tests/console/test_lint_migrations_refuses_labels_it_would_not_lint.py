"""lint_migrations refuses an app label it would lint nothing of: an unknown one, or a
third-party app's (not ours to change). Either printed "migrations linted: 0, failing: 0" and
exited 0, which passes a CI gate. An unknown label is named quoted: an empty one (a shell
variable left unset) was named as nothing, "unknown app label(s): ;"."""

import io
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize("labels", [["nope"], ["runs", "nope"]])
def test_an_unknown_app_label_is_refused_naming_it(labels):
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"unknown app label\(s\): 'nope';"):
        call_command("lint_migrations", *labels, stdout=out)
    assert "linted" not in out.getvalue()


@pytest.mark.parametrize(("labels", "named"), [
    ([""], "''"),
    (["runs", ""], "''"),
    ([" runs"], "' runs'"),
    (["runs\n"], "'runs\\n'"),
    (["", "nope"], "'', 'nope'"),
])
def test_an_unknown_label_is_named_quoted_so_an_empty_or_spaced_one_shows(labels, named):
    out = io.StringIO()
    with pytest.raises(CommandError) as refused:
        call_command("lint_migrations", *labels, stdout=out)
    assert str(refused.value).startswith(f"unknown app label(s): {named}; the project's apps: ")
    assert "linted" not in out.getvalue()


def test_an_empty_label_given_on_the_command_line_exits_non_zero_naming_it():
    manage = Path(__file__).resolve().parents[2] / "manage.py"
    done = subprocess.run([sys.executable, str(manage), "lint_migrations", ""],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "CommandError: unknown app label(s): ''; the project's apps: " in done.stderr
    assert "Traceback" not in done.stderr
    assert "linted" not in done.stdout


@pytest.mark.parametrize("label", ["guardian", "auth"])
def test_a_third_party_app_label_is_refused_naming_it(label):
    out = io.StringIO()
    with pytest.raises(CommandError, match=f"not an app of this project: {label} "):
        call_command("lint_migrations", label, stdout=out)
    assert "linted" not in out.getvalue()
