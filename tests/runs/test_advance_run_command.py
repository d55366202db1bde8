"""advance_run names a run that does not exist, whatever the number, and fails; it never
reports such a run as "not claimable" nor shows a database error."""

import pytest
from django.core.management import CommandError, call_command

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("run_id", ["99999", "99999999999999999999", "0", "-3"])
def test_a_run_that_does_not_exist_is_refused_naming_it(run_id):
    with pytest.raises(CommandError, match=f"^no run {run_id}$"):
        call_command("advance_run", run_id)
