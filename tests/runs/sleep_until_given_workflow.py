"""A workflow for worker processes (RUNS_EXTRA_WORKFLOW_MODULES): one sleep, until the time
the run's input gives as `order` (ISO 8601). The tests declare the same in their own process,
for the length of a test (registered here, it would be registered for every test after)."""

from datetime import datetime

from runs.definitions.definition import Workflow
from tests.workflows import OrderIn

sleeps_until_given = Workflow("test-sleep-until-given", version=1, input=OrderIn)
sleeps_until_given.sleep("nap", until=lambda data: datetime.fromisoformat(data["order"]))
