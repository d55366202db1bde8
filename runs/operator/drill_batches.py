"""Which drill runs one drill of a workflow started (manage.py drill): their business keys
carry that drill's token (drill:<tag>:<token>-<the run's own>), so that what the drill
table says of its runs (drill_approvals.approvals_said) counts them, and not the runs of
the same workflow that another drill, run meanwhile, started."""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db.models import Q

# Every drill run's business key starts with this: what tells a drill run from real work.
DRILL_KEY_PREFIX = "drill:"

_batch: ContextVar[str] = ContextVar("drill_batch", default="")


def new_batch() -> str:
    """A drill's token, new for each drill of a workflow."""
    return uuid.uuid4().hex[:8]


@contextmanager
def started_in(batch: str) -> Iterator[None]:
    """The drill runs started within (drill_key) carry `batch` in their business keys."""
    token = _batch.set(batch)
    try:
        yield
    finally:
        _batch.reset(token)


def drill_key(tag: str) -> str:
    """A new drill run's business key, naming what it drills (`tag`) and the drill's token
    (a token of its own outside started_in)."""
    return f"{DRILL_KEY_PREFIX}{tag}:{_batch.get() or new_batch()}-{uuid.uuid4().hex[:10]}"


def of_batch(batch: str) -> Q:
    """The condition on runs that a drill with token `batch` started them."""
    return Q(drill=True, business_key__startswith=DRILL_KEY_PREFIX,
             business_key__contains=f":{batch}-")
