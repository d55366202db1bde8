"""lint_migrations refuses an app label it would lint nothing of: an unknown one, or a
third-party app's (not ours to change). Either printed "migrations linted: 0, failing: 0" and
exited 0, which passes a CI gate."""

import io

import pytest
from django.core.management import CommandError, call_command


@pytest.mark.parametrize("labels", [["nope"], ["runs", "nope"]])
def test_an_unknown_app_label_is_refused_naming_it(labels):
    out = io.StringIO()
    with pytest.raises(CommandError, match=r"unknown app label\(s\): nope;"):
        call_command("lint_migrations", *labels, stdout=out)
    assert "linted" not in out.getvalue()


@pytest.mark.parametrize("label", ["guardian", "auth"])
def test_a_third_party_app_label_is_refused_naming_it(label):
    out = io.StringIO()
    with pytest.raises(CommandError, match=f"not an app of this project: {label} "):
        call_command("lint_migrations", label, stdout=out)
    assert "linted" not in out.getvalue()
