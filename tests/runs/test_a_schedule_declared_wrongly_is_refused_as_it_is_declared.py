"""A schedule is checked as it is declared, naming it: a workflow given by its name where
the Workflow is meant (an AttributeError at the first tick), a name with surrounding spaces
(an operator typing it would never find it). Its fixed input is checked as it is declared
too (test_a_schedules_fixed_input_is_checked_when_it_is_declared); what a function of the slot
returns is checked at each tick, where a refused start shows the schedule failing
(runs.waiting.schedule_health)."""

import pytest

from runs.waiting import schedules
from tests.workflows import nightly


def _declare(**options):
    return schedules.Schedule(**{"workflow": nightly, "name": "hourly", "every": None,
                                 "cron": "0 * * * *", "register": False, **options})


def test_a_workflow_given_by_its_name_is_refused():
    with pytest.raises(schedules.ScheduleError,
                       match=r"^schedule 'hourly': workflow must be the Workflow it starts"):
        _declare(workflow="test-scheduled")


@pytest.mark.parametrize("name", [" hourly", "hourly ", "a:b", ""])
def test_a_name_with_surrounding_spaces_or_a_colon_is_refused(name):
    with pytest.raises(schedules.ScheduleError,
                       match="a schedule needs a name of at most 200 characters, without ':', "
                             "surrounding spaces"):
        _declare(name=name)
