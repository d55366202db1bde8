"""show_run says when a run is a drill run (manage.py drill), as text and --json: the lists
leave drill runs out, so one reached by its id must not read as real work."""

import io
import json

import pytest
from django.core.management import call_command

from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _show(*args) -> str:
    out = io.StringIO()
    call_command("show_run", *map(str, args), stdout=out)
    return out.getvalue()


def test_a_drill_run_is_marked_and_real_work_is_not():
    drill = new_run(wake=False, drill=True)
    real = new_run(wake=False)
    assert "[drill run" in _show(drill.pk).splitlines()[0]
    assert "drill" not in _show(real.pk)
    assert json.loads(_show(drill.pk, "--json"))["drill"] is True
    assert json.loads(_show(real.pk, "--json"))["drill"] is False
