"""Pausing a workflow's dispatch, for all its steps or for the steps that reach one remote
system (during an incident there).

While a workflow is paused: starts are accepted and stay queued; no worker claims its runs
(runs.machine.transitions.lease_cycle asks `holds` before a claim and before each next step's
intent); a step in flight finishes and records its outcome, and the run then waits, its
next step not started; the sweeper sends no wake-ups for it (retries and timers hold). A
pause for one system holds a run only when its next step reaches that system.

Resuming deletes the pause and sends a wake-up to each run it held (the sweeper would find
them within RUNS_REQUEUE_AFTER_SECONDS anyway). Both are recorded in ControlRecord with who
and why; the why masked as a run action's reason is (redaction.redact_text), since every
caller's reason passes here and is shown on the console, the API and the CLI.
"""

import time
from dataclasses import dataclass
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Q

from audit.chain import Actor
from audit.quoting import quoted
from audit.redaction import redact_text

from .. import store
from ..definitions import definition
from ..models import ControlRecord, DispatchPause, Run, RunStatus, Workflow
from .storable import person_text_problem, text_problem
from .wakeup import send_wakeups

# A pause is read before every claim and step: kept for this long per process, so a busy
# worker asks the database about it once a second, not once per step.
CACHE_SECONDS = 1.0
PERMISSION = "pause_dispatch"


class DispatchError(ValueError):
    """A pause or resume that cannot be done as asked; nothing was changed. `field`: the
    input refused ("reason", "system"), for a caller to name as its own; "" for none."""

    def __init__(self, message: str, *, field: str = ""):
        super().__init__(message)
        self.field = field


class DispatchConflict(DispatchError):
    """Paused already, or not paused: the pause is not in the state the caller expects."""


@dataclass(frozen=True)
class Pause:
    workflow_name: str
    system: str
    reason: str
    paused_by: str
    paused_at: datetime


_cache: tuple[float, dict[str, list[Pause]]] | None = None


def forget_cache() -> None:
    global _cache
    _cache = None


def current_pauses() -> dict[str, list[Pause]]:
    """Every pause in force, by workflow name (read at most once per CACHE_SECONDS)."""
    global _cache
    now = time.monotonic()
    if _cache is not None and now - _cache[0] < CACHE_SECONDS:
        return _cache[1]
    pauses: dict[str, list[Pause]] = {}
    for row in DispatchPause.objects.order_by("workflow_name", "system"):
        pauses.setdefault(row.workflow_name, []).append(Pause(
            row.workflow_name, row.system, row.reason, row.paused_by, row.paused_at))
    _cache = (now, pauses)
    return pauses


def holds(workflow_name: str, system: str | None = None) -> Pause | None:
    """The pause that keeps a step reaching `system` of `workflow_name` from starting
    (system None: whether the whole workflow is paused)."""
    for pause in current_pauses().get(workflow_name, ()):
        if not pause.system or (system is not None and pause.system == system):
            return pause
    return None


def holds_step(workflow_def: definition.Workflow, step_name: str) -> Pause | None:
    """The pause, if any, that keeps step `step_name` of a run of `definition` from
    starting."""
    spec = definition.step_of(workflow_def, step_name)
    return holds(workflow_def.name, spec.system if spec is not None else "")


def pause_holding(run: Run) -> Pause | None:
    """The pause that keeps `run` where it is (queued stays queued, a due wait waits on): its
    whole workflow's, or the one towards the system its current step reaches. The claim
    asks it (transitions.lease_cycle), and the run's readers name it (api.selectors.run_view:
    the API's run state, show_run), so that a run held looks held, not merely queued."""
    workflow_def = definition.registry.get(run.workflow_name, run.workflow_version)
    if workflow_def is None:
        return holds(run.workflow_name)
    return holds_step(workflow_def, run.current_step)


def pause_words(pause: Pause) -> str:
    """A pause as a held run's message and its readers say it."""
    towards = f" towards {pause.system}" if pause.system else ""
    return f"dispatch{towards} paused by {pause.paused_by}: {pause.reason}"


def held_runs_filter() -> Q | None:
    """The runs a pause holds, as a filter for the sweeper to leave out (None: none held):
    whole workflows, and for a system pause the runs whose current step reaches it."""
    held = None
    for name, pauses in current_pauses().items():
        if any(not p.system for p in pauses):
            clause = Q(workflow_name=name)
        else:
            systems = {p.system for p in pauses}
            steps = {s.name for wf in definition.registry.versions(name) for s in wf.steps
                     if s.system in systems}
            if not steps:
                continue
            clause = Q(workflow_name=name, current_step__in=sorted(steps))
        held = clause if held is None else held | clause
    return held


def may_pause(user, workflow_name: str) -> bool:
    """The one permission rule (console.permissions) for pausing: superuser, the global
    permission, or the object permission on the workflow's row."""
    if not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser or user.has_perm(f"runs.{PERMISSION}"):
        return True
    row = Workflow.objects.filter(name=workflow_name).first()
    return row is not None and user.has_perm(f"runs.{PERMISSION}", row)


def pause_in_force(workflow_name: str, system: str = "") -> bool:
    """Whether a pause of `workflow_name` (towards `system`; "" the whole workflow) is in
    force, in the database, whatever the code registers now. A name the database cannot
    hold (a NUL) has none: it is refused as input, naming the field, by the caller."""
    if text_problem(workflow_name) is not None or text_problem(system) is not None:
        return False
    return DispatchPause.objects.filter(workflow_name=workflow_name, system=system).exists()


def has_dispatch(workflow_name: str) -> bool:
    """Whether `workflow_name` has a dispatch to read and act on: the code registers the
    workflow, or a pause of it is in force, one a release that dropped the workflow left
    behind (still shown, and lifted: lifts_a_pause)."""
    if definition.registry.latest(workflow_name) is not None:
        return True
    # A name the database cannot hold has no pause.
    return text_problem(workflow_name) is None and \
        DispatchPause.objects.filter(workflow_name=workflow_name).exists()


def lifts_a_pause(workflow_name: str, system: str, *, lifting: bool) -> bool:
    """Whether this is the lifting of a pause in force, which goes whatever the code
    registers now: a release that renamed or dropped the workflow or its system would
    otherwise leave a pause no one can lift."""
    return lifting and pause_in_force(workflow_name, system)


def refuse_unknown_system(workflow_name: str, system: str, *, in_force: bool = False) -> None:
    """DispatchError (field system) when `system` is given and no step of any version of
    the workflow reaches it, unless a pause of it is being lifted (`in_force`)."""
    # Text the database cannot store is refused as input, naming the field, by the caller.
    if not system or in_force or text_problem(system) is not None or any(
            s.system == system for wf in definition.registry.versions(workflow_name)
            for s in wf.steps):
        return
    workflow_def = definition.registry.latest(workflow_name)
    known = sorted({s.system for s in workflow_def.steps if s.system}) if workflow_def else []
    # Quoted cut: a refusal repeats what was asked, not a 10,000-character option.
    raise DispatchError(f"no step of {workflow_name} reaches a system {quoted(system)}; "
                        f"its systems: {', '.join(repr(s) for s in known) or 'none declared'}",
                        field="system")


def refuse_input(workflow_name: str, system: str, reason: str, *,
                 lifting: bool = False) -> None:
    """DispatchError for a pause (a resume, `lifting`) that cannot be done as asked: an
    unknown workflow, a reason no record may keep, a `system` no step reaches (a pause in
    force being lifted excepted). pause_dispatch and resume_dispatch check it first."""
    in_force = lifts_a_pause(workflow_name, system, lifting=lifting)
    if definition.registry.latest(workflow_name) is None and not in_force:
        raise DispatchError(f"unknown workflow {quoted(workflow_name)}")
    if not reason or not reason.strip():
        raise DispatchError("a reason is required to pause or resume dispatch",
                            field="reason")
    if (problem := person_text_problem(reason)) is not None:
        raise DispatchError(f"the reason is {problem}", field="reason")
    refuse_unknown_system(workflow_name, system, in_force=in_force)


def pause_dispatch(*, workflow: str, actor: Actor, reason: str, system: str = "",
                   now: datetime | None = None) -> DispatchPause:
    """Pause `workflow`'s dispatch (only towards `system` if given)."""
    refuse_input(workflow, system, reason)
    reason = redact_text(reason)
    # Stamped by the database's clock, by which its age is told (the paused-since gauge).
    now = now or store.current().now()
    try:
        with transaction.atomic():
            pause = DispatchPause.objects.create(workflow_name=workflow, system=system,
                                                 reason=reason, paused_by=actor.label,
                                                 paused_at=now)
            ControlRecord.objects.create(action="dispatch_paused", workflow_name=workflow,
                                         target=system, actor_label=actor.label,
                                         actor_user_id=actor.user_id, reason=reason,
                                         created_at=now)
    except IntegrityError:
        raise DispatchConflict(f"{workflow} is already paused"
                            + (f" for {system}" if system else "")) from None
    forget_cache()
    return pause


def resume_dispatch(*, workflow: str, actor: Actor, reason: str, system: str = "",
                    now: datetime | None = None) -> int:
    """Resume `workflow`'s dispatch (the pause for `system`, if given). Returns how many
    held runs were woken."""
    refuse_input(workflow, system, reason, lifting=True)
    reason = redact_text(reason)
    # The held runs due by the database's clock are woken; a host behind would leave some.
    now = now or store.current().now()
    with transaction.atomic():
        deleted, _ = DispatchPause.objects.filter(workflow_name=workflow,
                                                  system=system).delete()
        if not deleted:
            raise DispatchConflict(f"{workflow} is not paused"
                                + (f" for {system}" if system else ""))
        ControlRecord.objects.create(action="dispatch_resumed", workflow_name=workflow,
                                     target=system, actor_label=actor.label,
                                     actor_user_id=actor.user_id, reason=reason,
                                     created_at=now)
    forget_cache()
    held = list(Run.objects.filter(
        Q(status=RunStatus.QUEUED) | Q(status=RunStatus.WAITING, next_wake_at__lte=now),
        workflow_name=workflow).values_list("pk", flat=True)[:10000])
    return send_wakeups(held)
