"""tests.approvals.stalling_lookup's workflow, declared for worker processes
(RUNS_EXTRA_WORKFLOW_MODULES). Not imported by the tests: it would stay registered for every
test after."""

from tests.approvals.stalling_lookup import declared

stalling_lookup = declared()
