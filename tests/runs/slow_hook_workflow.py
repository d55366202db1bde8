"""A workflow for worker processes (RUNS_EXTRA_WORKFLOW_MODULES): one sleep whose until() is
slow while a file exists (tests.runs.slow_hook). The tests declare the same in their own
process, for the length of a test (registered here, it would be registered for every test
after)."""

from tests.runs.slow_hook import declare

slow_hook = declare()
