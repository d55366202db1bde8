"""Celery tasks log with the run they advance: the run id (and the task id) is bound to the
log context for the task's duration, from the task's arguments, without a database read."""

from celery import signals

from .logs import bind, unbind

# Tasks whose first argument is a run id.
RUN_TASKS = frozenset({"runs.advance_run"})
_tokens: dict[str, object] = {}


def _prerun(task_id=None, task=None, args=None, kwargs=None, **_):
    fields = {"task_id": task_id}
    if task is not None and task.name in RUN_TASKS:
        run_id = (args or [None])[0] if args else (kwargs or {}).get("run_id")
        fields["run_id"] = run_id
    # One task at a time per worker thread; keyed by task id so a nested call cannot mix up.
    _tokens[task_id] = bind(**fields)


def _postrun(task_id=None, **_):
    token = _tokens.pop(task_id, None)
    if token is not None:
        try:
            unbind(token)
        except ValueError:  # bound in another context (a green-thread pool): nothing to undo
            pass


def connect() -> None:
    signals.task_prerun.connect(_prerun, weak=False, dispatch_uid="observability.prerun")
    signals.task_postrun.connect(_postrun, weak=False, dispatch_uid="observability.postrun")
