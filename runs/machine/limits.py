"""Limits that protect receivers, enforced by the runtime rather than left to their 429s.

    limit_workflow(invoice, max_in_flight=20, concurrency_key="vendor", priority=5)
    rate_limit("ledger", per_second=5)

Per workflow:
  max_in_flight    at most this many of its runs held by workers at once (running or
                   compensating);
  concurrency_key  a field of the run's input: at most `per_key` runs with the same value
                   held at once (one run per vendor at a time);
  priority         when a slot frees, queued runs of higher-priority workflows are woken
                   first.
A claim asks `admits` inside its own transaction, after taking a transaction-scoped advisory
lock on the workflow: two workers claiming at once count one after the other, so the limit
holds under any number of workers. A run refused stays queued (or waiting) as it was; when a
held run of its workflow lets go (runs.tasks.advance_run calls `wake_after_release`), the
next queued ones are woken, and the sweeper finds any left over.

Per remote system (a step's or a tool's `system`, an agent's `model_system`):
  rate_limit(system, per_second=N)  no more than N calls in any window of one second, by
                   every worker on every machine together: a sliding-window log in Redis,
                   timed by the Redis server's clock (not a worker's). A worker waits for its
                   turn before the call, holding the run's lease (and heartbeating it).
  A 429 (or 503) with Retry-After from the system blocks it for every worker until then.
  A worker waits out a block of up to TURN_WAIT_LIMIT_SECONDS; past that the call is not
  made and its attempt ends as a transient failure retried when the block ends.
  A Redis that cannot be asked (refused, timed out) admits nobody: the call is not made and
  its attempt ends as a transient failure naming the system, retried by the step's policy.
Without Redis (the demo's embedded broker) the window and the block live in the process:
enough for the demo's single worker.
"""

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.conf import settings
from django.db.models import Case, Count, IntegerField, Value, When
from redis.exceptions import RedisError

from audit.redaction import redact_text

from .. import store
from ..definitions import definition, validation
from ..models import HELD_RUN_STATUSES, Run, RunStatus
from .errors import Classified, TransientError, classify, described
from .single_pass import lock_key
from .wakeup import send_wakeups

logger = logging.getLogger(__name__)

# The window of a rate limit, widened so that a request admitted at the end of one window
# does not reach the receiver inside the next: between admission and arrival lie the
# worker's scheduling, the network and the receiver's own (RUNS_RATE_MARGIN_MS, 400 ms by
# default: on a loaded machine 200 ms was seen not to be enough). The rate actually sent is
# so a little under the declared one: 5 a second becomes 5 in any 1.4 s.
def window_ms() -> int:
    return 1000 + int(getattr(settings, "RUNS_RATE_MARGIN_MS", 400))
# How long a worker waits for a slot between looks, at most.
POLL_SECONDS = 0.05
# The longest single wait for a turn a worker sits out holding its run. A rate window asks
# for well under it; a Retry-After block longer than this gives the run back instead, its
# retry due when the block ends: otherwise an hour's block holds every worker that meets it,
# and with them the runs of every other workflow, for the hour.
TURN_WAIT_LIMIT_SECONDS = 15.0


@dataclass(frozen=True)
class WorkflowLimits:
    workflow: str
    max_in_flight: int | None = None
    concurrency_key: str = ""
    per_key: int = 1
    priority: int = 0


@dataclass(frozen=True)
class SystemRate:
    system: str
    per_second: int


_workflows: dict[str, WorkflowLimits] = {}
_systems: dict[str, SystemRate] = {}


def limit_workflow(workflow: definition.Workflow | str, *, max_in_flight: int | None = None,
                   concurrency_key: str = "", per_key: int = 1,
                   priority: int = 0) -> WorkflowLimits:
    name = workflow if isinstance(workflow, str) else workflow.name
    versions = definition.registry.versions(workflow) if isinstance(workflow, str) \
        else [workflow]
    if (problem := validation.limits_problem(
            versions, max_in_flight=max_in_flight, concurrency_key=concurrency_key,
            per_key=per_key, priority=priority)) is not None:
        raise validation.DefinitionError(f"{validation.where(workflow)}: {problem}")
    limits = WorkflowLimits(name, max_in_flight, concurrency_key, per_key, priority)
    _workflows[name] = limits
    return limits


def rate_limit(system: str, *, per_second: int) -> SystemRate:
    if not isinstance(system, str) or not system or not validation.whole(per_second, least=1):
        raise validation.DefinitionError(
            f"rate_limit({system!r}, per_second={per_second!r}): a rate limit needs a system "
            "and a whole number of calls per second, at least 1")
    rate = _systems[system] = SystemRate(system, per_second)
    return rate


def forget(workflow: str = "", system: str = "") -> None:
    """Drop a declaration, and what this process counted for its system (tests)."""
    _workflows.pop(workflow, None)
    _systems.pop(system, None)
    local = _stores.get("")
    if system and local is not None:
        local.windows.pop(system, None)
        local.blocked.pop(system, None)


def workflow_limits(name: str) -> WorkflowLimits | None:
    return _workflows.get(name)


# --- runs in flight ------------------------------------------------------------------------

def admits(run: Run) -> bool:
    """Whether a worker may take `run` now under its workflow's limits. Called inside the
    claim's transaction: the advisory lock it takes is held until that commits."""
    limits = _workflows.get(run.workflow_name)
    if limits is None or (limits.max_in_flight is None and not limits.concurrency_key):
        return True
    store.current().transaction_lock(lock_key(f"limits:{run.workflow_name}"))
    held = Run.objects.filter(workflow_name=run.workflow_name,
                              status__in=HELD_RUN_STATUSES).exclude(pk=run.pk)
    if limits.max_in_flight is not None and held.count() >= limits.max_in_flight:
        return False
    if limits.concurrency_key:
        value = (run.input or {}).get(limits.concurrency_key)
        same = held.filter(**{f"input__{limits.concurrency_key}": value})
        if same.count() >= limits.per_key:
            return False
    return True


def wake_after_release(run_id: int, status: str | None) -> int:
    """After a worker let go of `run_id` (it finished, waits, or stopped for a person): wake
    queued runs its workflow's limits held back, or of other limited workflows sharing the
    workers, highest priority first. Returns how many were woken."""
    if not _workflows or status in HELD_RUN_STATUSES:
        return 0
    name = Run.objects.filter(pk=run_id).values_list("workflow_name", flat=True).first()
    if name not in _workflows:
        return 0
    limits = _workflows[name]
    return send_wakeups(queued_by_priority((limits.max_in_flight or 1) * 2))


def queued_by_priority(count: int) -> list[int]:
    """The queued runs of limited workflows to wake next: higher priority first, then the
    oldest. A workflow at its max_in_flight is left out: its runs would be refused, and
    woken in place of runs that can take the slot they leave those to the sweeper's late
    pass."""
    full = at_their_limit()
    room = [w.workflow for w in _workflows.values() if w.workflow not in full]
    return list(Run.objects.filter(workflow_name__in=room, status=RunStatus.QUEUED)
                .annotate(priority=_priority()).order_by("-priority", "created_at", "pk")
                .values_list("pk", flat=True)[:count])


def at_their_limit() -> set[str]:
    """The limited workflows holding their max_in_flight runs now: a run of theirs woken
    would be refused at its claim (one count of the held runs, by workflow)."""
    if not _workflows:
        return set()
    held = dict(Run.objects.filter(workflow_name__in=list(_workflows),
                                   status__in=HELD_RUN_STATUSES)
                .order_by().values_list("workflow_name").annotate(n=Count("pk")))
    return {w.workflow for w in _workflows.values()
            if w.max_in_flight is not None and held.get(w.workflow, 0) >= w.max_in_flight}


def requeue_order(queued, count: int) -> list[int]:
    """Up to `count` ids of `queued` (a queryset of queued runs nobody picked up, for the
    sweeper) in the order their hints go out: higher priority first, the longest forgotten
    first within one; a limited workflow at its max_in_flight is left out, as in
    queued_by_priority, so that its backlog does not take every hint of the pass from runs
    that could start. One query a priority declared (few), each along the queued runs'
    index: no sort of the whole backlog."""
    if not queued.exists():
        return []  # the usual pass: nothing lost, and so no count of what is held
    full = list(at_their_limit())
    ranked = [w for w in _workflows.values() if w.priority != 0]
    ids: list[int] = []
    for level in sorted({w.priority for w in ranked} | {0}, reverse=True):
        if level == 0:
            part = queued.exclude(workflow_name__in=[w.workflow for w in ranked] + full)
        else:
            part = queued.filter(workflow_name__in=[w.workflow for w in ranked
                                                    if w.priority == level
                                                    and w.workflow not in full])
        ids += part.order_by("updated_at", "pk").values_list("pk", flat=True)[:count - len(ids)]
        if len(ids) >= count:
            break
    return ids


def _priority():
    return Case(*[When(workflow_name=w.workflow, then=Value(w.priority))
                  for w in _workflows.values()], default=Value(0), output_field=IntegerField())


# --- rate per remote system ----------------------------------------------------------------

# KEYS[1]: the system's window (a sorted set of admission times, ms), KEYS[2]: its block
# (a time in ms until which nobody calls). ARGV[1]: calls per window, ARGV[2]: window ms,
# ARGV[3]: a unique member. Returns 0 when admitted, else the ms to wait.
_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local blocked = tonumber(redis.call('GET', KEYS[2]) or '0')
if blocked > now then return blocked - now end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
  return 0
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return math.max(tonumber(oldest[2]) + tonumber(ARGV[2]) - now, 1)
"""
# ARGV[1]: block for this many ms from the server's now, unless blocked longer already.
_BLOCK = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local until_ms = now + tonumber(ARGV[1])
local blocked = tonumber(redis.call('GET', KEYS[1]) or '0')
if until_ms > blocked then redis.call('SET', KEYS[1], until_ms, 'PX', tonumber(ARGV[1])) end
return until_ms
"""


# What a Redis out of reach raises: the client's own errors (refused, timed out, reset), and
# a socket error it may let through unwrapped.
LIMITER_FAILURES = (RedisError, OSError)


class _RedisWindows:
    def __init__(self, url: str):
        import redis

        # Bounded as the broker's connections are: a Redis that accepts and never answers
        # would hold a step's admission, and its worker, forever.
        timeout = settings.BROKER_SOCKET_TIMEOUT
        self.client = redis.Redis.from_url(url, socket_timeout=timeout,
                                           socket_connect_timeout=timeout)
        self.admit_script = self.client.register_script(_ADMIT)
        self.block_script = self.client.register_script(_BLOCK)
        self.counter = 0
        self.lock = threading.Lock()

    def try_admit(self, system: str, per_window: int) -> float:
        with self.lock:
            self.counter += 1
            member = f"{id(self)}:{time.time_ns()}:{self.counter}"
        wait_ms = self.admit_script(keys=[f"durable:rate:{system}", f"durable:block:{system}"],
                                    args=[per_window, window_ms(), member])
        return int(wait_ms) / 1000

    def block(self, system: str, seconds: float) -> None:
        self.block_script(keys=[f"durable:block:{system}"], args=[max(int(seconds * 1000), 1)])


class _LocalWindows:
    def __init__(self):
        self.windows: dict[str, deque] = {}
        self.blocked: dict[str, float] = {}
        self.lock = threading.Lock()

    def try_admit(self, system: str, per_window: int) -> float:
        now = time.monotonic()
        with self.lock:
            if self.blocked.get(system, 0) > now:
                return self.blocked[system] - now
            window = self.windows.setdefault(system, deque())
            while window and window[0] <= now - window_ms() / 1000:
                window.popleft()
            if len(window) < per_window:
                window.append(now)
                return 0.0
            return max(window[0] + window_ms() / 1000 - now, 0.001)

    def block(self, system: str, seconds: float) -> None:
        with self.lock:
            until = time.monotonic() + seconds
            self.blocked[system] = max(self.blocked.get(system, 0), until)


_stores: dict[str, "_RedisWindows | _LocalWindows"] = {}


def _windows():
    # One per URL, so that a changed setting (a test's) is followed rather than the first
    # one this process saw.
    url = getattr(settings, "RUNS_LIMITS_REDIS_URL", "") or ""
    if url not in _stores:
        _stores[url] = _RedisWindows(url) if url else _LocalWindows()
    return _stores[url]


class NoTurn(Exception):
    """No call to the system now: its block lasts longer than a worker waits in place
    (`retry_after`: the seconds left), or the run's lease was lost while waiting."""

    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def wait_for_turn(system: str, *, heartbeat: Callable[[], bool] = lambda: True) -> float:
    """Block until a call to `system` is within its rate (and past any Retry-After block).
    Returns the seconds waited. Heartbeats the lease about every few seconds of waiting.
    NoTurn when the wait asked is past TURN_WAIT_LIMIT_SECONDS or the lease is lost."""
    rate = _systems.get(system)
    if rate is None:
        return 0.0
    waited, since_beat = 0.0, 0.0
    while True:
        wait = _windows().try_admit(system, rate.per_second)
        if wait <= 0:
            return waited
        if wait > TURN_WAIT_LIMIT_SECONDS:
            raise NoTurn(f"system {system!r} is blocked for {wait:.0f} s more (a Retry-After "
                         "it gave): the call was not made, it is tried again after the block",
                         retry_after=wait)
        pause = min(max(wait, POLL_SECONDS), 1.0)
        time.sleep(pause)
        waited += pause
        since_beat += pause
        if since_beat >= 5:
            since_beat = 0.0
            if heartbeat() is False:
                # Another worker owns the run: a call made now would be a second one.
                raise NoTurn(f"the run's lease was lost while waiting for a turn at system "
                             f"{system!r}: the call was not made")


def honour_retry_after(system: str, seconds: float | None) -> None:
    """A system said Retry-After: no worker calls it again before then."""
    if system and seconds and system in _systems:
        _windows().block(system, seconds)


Result = TypeVar("Result")


def call_within_limits(system: str, ctx, call: Callable[[], Result], *,
                       refused: Callable[[Classified], Result]) -> Result:
    """Make one call to `system` (a step's, a tool call's or a model turn's: `call` returns
    its Outcome) within the system's rate; a Retry-After in its answer blocks the system for
    everyone.

    When the rate limiter cannot be asked (its Redis refused or timed out), the call is not
    made: `refused` builds the attempt's Outcome from a transient error naming the system,
    so the effect machine's one resend path (backoff, budget) tries it again. The caller
    builds it because the transitions, which own Outcome, ask this module at every claim."""
    if not system or system not in _systems:
        return call()
    try:
        wait_for_turn(system, heartbeat=ctx.heartbeat)
    except LIMITER_FAILURES as exc:
        error = classify(TransientError(
            f"the rate limiter of system {system!r} could not be reached ({described(exc)}): "
            "the call was not made"))
        return refused(error)
    except NoTurn as exc:
        return refused(classify(TransientError(str(exc), retry_after=exc.retry_after)))
    outcome = call()
    error = getattr(outcome, "error", None)
    if error is not None and error.retry_after:
        try:
            honour_retry_after(system, error.retry_after)
        except LIMITER_FAILURES as exc:
            # The call was made and its outcome stands; only the block for the other workers
            # is lost, and their own calls meet the system's Retry-After again.
            logger.warning("the Retry-After of %.1f s from system %r could not be shared: its "
                           "rate limiter could not be reached (%s)", error.retry_after, system,
                           redact_text(described(exc)))
    return outcome
