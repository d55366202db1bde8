"""The durable record of an agent step: each model turn, and each tool call it asked for.

A turn is stored before any tool it asks for runs, and reused after a crash: the model is
never asked the same turn twice. A tool call is a child of the step with its own state,
attempts, idempotency key and evidence. Only runs.machine.transitions changes these rows.
"""

from django.db import models
from django.db.models import Q


class ToolCallStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"          # intent recorded, the call may be under way
    SCHEDULED = "scheduled"      # sent again at next_attempt_at
    SUCCEEDED = "succeeded"
    FAILED = "failed"            # evidence that nothing changed
    UNKNOWN = "unknown"          # it may have happened: reconciled by key before anything else
    INVALID = "invalid"          # arguments failed the tool's schema: never executed
    WAITING = "waiting"          # for a person's approval of its arguments
    DECLINED = "declined"        # a person declined it: never executed
    CANCELLED = "cancelled"      # a person cancelled it before it ran: never executed
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"


class AgentTurn(models.Model):
    """One answer of the model: its content, the tool calls it asked for, its token usage."""

    step = models.ForeignKey("runs.Step", on_delete=models.CASCADE, related_name="agent_turns",
                             db_index=False)
    # The step's attempt generation the turn belongs to (Step.generation): a re-run from a
    # chosen step (runs.machine.transitions.rerun) starts the agent's conversation afresh in a new
    # generation, and the earlier generations' turns stay stored as its history.
    generation = models.PositiveIntegerField(default=0, db_default=0)
    index = models.PositiveIntegerField()
    content = models.TextField(blank=True)
    # [{"id": ..., "name": ..., "arguments": "<the raw JSON text the model sent>"}]
    tool_calls = models.JSONField(default=list)
    finish_reason = models.CharField(max_length=40, blank=True)
    model_ref = models.CharField(max_length=200, blank=True)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    # A summary turn: the model's summary of the turns before this index (0: an ordinary
    # turn). Later turns are sent the summary instead of those turns, which stay stored.
    summarises = models.PositiveIntegerField(default=0, db_default=0)
    # The reference of the artifact holding what the turn stands for in full
    # (runs.machine.artifacts: {"$artifact": name, "size", "sha256"}): a summary turn's
    # transcript of the turns it covers, or a final answer's text longer than
    # RUNS_AGENT_TEXT_MAX_CHARS (its content keeps the start: runs.agents.turn_bounds).
    transcript = models.JSONField(null=True, blank=True)
    # Why none of the tool calls the turn asked for was taken (more than one turn may ask
    # for: runs.agents.turn_bounds); its tool_calls are then empty, no call has a row, and
    # the model is told at its next turn. "": the turn's calls were taken.
    refused = models.TextField(blank=True, default="", db_default="")
    # The text as the model wrote it, sealed (runs.machine.sensitive), where `content` masks
    # what looks like a credential or a declared sensitive value: the model is sent its own
    # words again (a summary is the only place the facts it covers are kept for it: an IBAN
    # erased there comes back as a payment to "[redacted]"); people see `content`. "": the
    # content is as written.
    sealed_content = models.TextField(blank=True, default="", db_default="")
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["step", "generation", "index"],
                                               name="agentturn_unique_step_gen_index")]
        ordering = ["step_id", "generation", "index"]

    def __str__(self):
        return f"{self.step_id}/turn {self.index}"

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class ToolCall(models.Model):
    """One tool call of an agent step, checkpointed before and after it runs."""

    step = models.ForeignKey("runs.Step", on_delete=models.CASCADE, related_name="tool_calls",
                             db_index=False)
    # As AgentTurn.generation: the calls of earlier generations are kept as they ended.
    generation = models.PositiveIntegerField(default=0, db_default=0)
    turn = models.PositiveIntegerField()
    index = models.PositiveIntegerField()
    # The id the model gave the call (tool results are matched to it in the conversation).
    call_id = models.CharField(max_length=200)
    tool = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, blank=True)
    impact = models.CharField(max_length=8, blank=True)
    # The validated arguments (or, for invalid ones, what the model sent, kept as evidence).
    arguments = models.JSONField(null=True, blank=True)
    args_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=32, choices=ToolCallStatus.choices,
                              default=ToolCallStatus.PENDING)
    idempotency_key = models.CharField(max_length=64)
    compensation_key = models.CharField(max_length=64, blank=True)
    # A person settled this call as not done: a request of it may still be in flight, so the
    # model's next call of the same tool with the same arguments takes this key over
    # (agent_turns.record_agent_turn), and a receiver that honours keys does it at most once.
    key_open_for_repeat = models.BooleanField(default=False, db_default=False)
    attempt = models.PositiveIntegerField(default=0)
    lookup_failures = models.PositiveIntegerField(default=0)
    compensation_attempt = models.PositiveIntegerField(default=0)
    # The hash of the arguments a person approved (a call runs only if it matches).
    approved_hash = models.CharField(max_length=64, blank=True)
    approved_by = models.CharField(max_length=200, blank=True)
    remote_ref = models.CharField(max_length=300, blank=True)
    compensation_ref = models.CharField(max_length=300, blank=True)
    result = models.JSONField(null=True, blank=True)
    error_class = models.CharField(max_length=16, blank=True)
    error_message = models.TextField(blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    # When the attempt now in flight (or the last one) began, as on a step.
    attempt_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["step", "generation", "turn", "index"],
                                               name="toolcall_unique_step_gen_turn_index")]
        indexes = [
            # No index names status: a call's row is updated in place (HOT) at each of its
            # checkpoints. The unknown calls of a step are read through the unique index
            # above (a step has a handful of calls); the calls runs wait on for a person,
            # from runs.ApprovalWait.
            # Searched by the references other systems gave, and by exact key or key prefix
            # along toolcall_key_head_idx, made in SQL as the steps' (see Step.Meta).
            models.Index(fields=["remote_ref"], name="toolcall_remote_ref_idx",
                         condition=~Q(remote_ref="")),
            models.Index(fields=["compensation_ref"], name="toolcall_compensation_ref_idx",
                         condition=~Q(compensation_ref="")),
        ]
        ordering = ["step_id", "generation", "turn", "index"]

    def __str__(self):
        return f"{self.step_id}/turn {self.turn}/call {self.index} {self.tool}"

    @property
    def ref(self) -> str:
        """How people and operator actions name the call within its step: turn.index."""
        return f"{self.turn}.{self.index}"
