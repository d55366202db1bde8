"""run_history pages a run's audit trail from the command line: a --before that no page
printed is refused, and a page with nothing on it says so rather than printing nothing."""

import pytest
from django.core.management import CommandError, call_command

from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("before", ["-5", "0"])
def test_a_before_no_page_could_have_printed_is_refused(before, capsys):
    run = new_run(wake=False)
    with pytest.raises(CommandError, match=r"--before takes the seq a page printed"):
        call_command("run_history", str(run.pk), "--before", before)
    assert capsys.readouterr().out == ""


def test_a_page_before_the_first_record_says_there_is_nothing(capsys):
    run = new_run(wake=False)
    call_command("run_history", str(run.pk))
    first = capsys.readouterr().out.splitlines()
    assert first and " started " in first[0]
    seq = first[0].split()[0]
    call_command("run_history", str(run.pk), "--before", seq)
    assert capsys.readouterr().out.strip() == f"no entries of run {run.pk} before seq {seq}"
