import pytest
from django.contrib.auth.models import Group, Permission

from console.roles import ensure_roles


@pytest.fixture(autouse=True)
def roles(db):
    """The role groups, as the console's migrations make them (a test run that flushed the
    database after a transactional test has lost them)."""
    ensure_roles(Group, Permission)
