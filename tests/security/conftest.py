"""The matrix's world is built once per module, inside a transaction rolled back at the
end, as Django's TestCase.setUpTestData does for a class: every test runs in a savepoint
of it (pytest-django's `db`) and leaves it as it found it. The outer block is marked as a
test case's own, so that the transitions' durable atomic blocks accept it as they accept
the test's."""

import pytest
from django.db import transaction
from django.test import override_settings

from runs.machine import dispatch

from .matrix import ROLES
from .world import EVENT_SOURCES, World, build_world


@pytest.fixture(scope="module")
def _module_world(django_db_setup, django_db_blocker):
    with override_settings(APPROVALS_BASE_URL="http://testserver",
                           RUNS_EVENT_SOURCES=EVENT_SOURCES):
        block = transaction.atomic()
        block._from_testcase = True
        with django_db_blocker.unblock():
            block.__enter__()
            try:
                world = build_world(ROLES)
            except BaseException:
                transaction.set_rollback(True)
                block.__exit__(None, None, None)
                raise
        yield world
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            block.__exit__(None, None, None)


@pytest.fixture
def world(_module_world, db) -> World:
    """The module's world, with fresh browsers for this test."""
    # A dispatch pause of the last test was rolled back; the per-process cache of pauses
    # must not outlive it.
    dispatch.forget_cache()
    return _module_world.browse()
