"""An action on the runs a person ticked on the runs list, at once, run by run: a handful,
where a filter's many runs go to a background job (approvals.bulk.start_bulk_job). Each run
goes through the one function every caller uses (approvals.operator_actions.act)."""

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from runs.machine.errors import TransitionNotAllowed
from runs.models import Run
from runs.operator.actions import ACTIONS, ActionInput

from .bulk import refuse_forbidden_in_bulk
from .bulk_input import first_step
from .operator_actions import ActionForbidden, ActionInputError, NoSuchRun, act


@dataclass
class Selected:
    """What an action on the runs a person ticked did, run by run: done, waiting for a second
    person (the outcomes), refused (a sentence each), and the ids of runs that do not exist
    or that the person may not act on, told apart from neither."""

    done: list = field(default_factory=list)
    waiting: list = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    unseen: list[int] = field(default_factory=list)


def act_on_selected(action: str, run_ids: list[int], *, user, given: ActionInput,
                    seen: Mapping[int, int] | None = None) -> Selected:
    """Take `action` on each of `run_ids` as `user`, through act (the permission, four eyes
    and the transition, one audit record per run), at once: a handful a person ticked, where
    a filter's many runs go to a job (start_bulk_job). `seen`: each run's audit sequence as
    the person's page showed it, where there was a page; a run that moved on since is
    refused. BulkForbidden, before any run is read, for a person who may take the action on
    no run at all (approvals.bulk.refuse_forbidden_in_bulk)."""
    spec, selected = ACTIONS[action], Selected()
    refuse_forbidden_in_bulk(spec, user)
    runs = {run.pk: run for run in Run.objects.filter(pk__in=run_ids)}
    for run_id in run_ids:
        run = runs.get(run_id)
        if run is None:
            selected.unseen.append(run_id)
            continue
        aimed = given
        if spec.takes_step:
            # With no step to aim at, act is still asked: it checks the permission first, so
            # that whoever may not act on the run hears no more of it than of no run at all.
            aimed = replace(given, step=first_step(spec, run), mode="ask")
        try:
            outcome = act(action, run.pk, user=user, given=aimed,
                          seen=None if seen is None else seen.get(run_id, -1))
        except (ActionForbidden, NoSuchRun):
            selected.unseen.append(run_id)
        except (ActionInputError, TransitionNotAllowed) as exc:
            # A selection names no step: no "choose the step" its form could not follow.
            selected.refused.append(
                f"{run.pk} ({spec.label.lower()} applies to none of its steps)"
                if spec.takes_step and not aimed.step else f"{run.pk} ({exc})")
        else:
            # Where four eyes apply, act opened an approval request and did nothing yet.
            (selected.done if outcome.done else selected.waiting).append(outcome)
    return selected
