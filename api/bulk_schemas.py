"""The bodies of the bulk-job operations (api.bulk_routes)."""

from datetime import datetime
from typing import Annotated, Literal

from ninja import Field, Schema
from pydantic import ConfigDict, field_validator, model_validator
from pydantic_core import PydanticCustomError

from approvals.bulk import START_KEY_MAX, bulk_refusal
from approvals.models import BulkJobPhase, BulkJobStatus, BulkOutcome
from runs.models import ErrorClass, RunStatus, StepStatus
from runs.operator.actions import ACTIONS
from runs.reads.filter_problems import SEARCH_MOST, search_problem, status_problem

from .schemas import SEARCH_TEXT

BulkActionName = Literal[tuple(name for name, spec in ACTIONS.items()
                               if bulk_refusal(spec) is None)]
_NO_NUL = r"^[^\u0000]*$"


class BulkFilters(Schema):
    """The runs list's filters: the job acts on every run they match when it starts. A key
    it does not know, or filters that are not an object, are refused: read as no filter,
    a misspelt one ("stauts") would widen the job to every run of the workflow."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def an_object(cls, value):
        # Ninja hands a schema its input wrapped (DjangoGetter, the object in _obj).
        given = getattr(value, "_obj", value)
        if not isinstance(given, dict | BulkFilters):
            raise ValueError("filters must be an object of the runs list's filters")
        return value

    workflow: str = Field("", max_length=200, pattern=_NO_NUL,
                          description="One of the token's workflows; may be left out when "
                                      "the token has only one.")
    status: Literal[("", *RunStatus.values)] = ""
    step_status: Literal[("", *StepStatus.values)] = ""
    error_class: Literal[("", *ErrorClass.values)] = ""
    # Strict, as every boolean of an action's body: a string such as "no" would be read
    # as a boolean and widen or narrow the runs the job acts on.
    attention: bool = Field(False, strict=True)
    stuck: bool = Field(False, strict=True)
    q: Annotated[str, SEARCH_TEXT] = Field("", max_length=SEARCH_MOST)

    @field_validator("status", "q", mode="before")
    @classmethod
    def listable(cls, value, info):
        # A status none of the runs have, a search holding a NUL or another control
        # character or longer than anything it looks in: in the words GET /api/runs, the
        # console and the CLI refuse them in (runs.reads.filter_problems), not the schema's
        # enum and pattern words. Beside the field, as every fault of the body.
        if isinstance(value, str):
            problem = (status_problem if info.field_name == "status" else search_problem)(value)
            if problem:
                raise PydanticCustomError("run_filter", "{problem}", {"problem": problem})
        return value


class BulkIn(Schema):
    model_config = ConfigDict(extra="forbid")

    action: BulkActionName = Field(description="Any action of the table but those aimed "
                                               "at one tool call, Deliver event (a payload "
                                               "per run) and Confirm the undo (a person "
                                               "sees each undo first).")
    # Its length is the document's to say and the job's rule to hold (refuse_bulk_request,
    # as for the console and the CLI): refused in the same words, still 422 naming `reason`.
    reason: str = Field(pattern=r"^[^\u0000]*$",
                        json_schema_extra={"minLength": 1, "maxLength": 2000},
                        description="Why: recorded in each run's audit record followed by "
                                    "the job's mark ` [bulk job N]`, which must fit in the "
                                    "2,000 characters too: leave room for it (about 16). "
                                    "Required.")
    filters: BulkFilters = Field(default_factory=BulkFilters)
    step: str = Field("", max_length=200, pattern=_NO_NUL,
                      description="For a step action: the step on every run (else the first "
                                  "step each run allows).")
    start_key: str = Field(
        "", max_length=START_KEY_MAX, pattern=r"^[!-~]*$",
        description="Optional, of the client's choosing (a UUID, say): makes the start safe "
                    "to send again. The job the same person (the token's acting user) "
                    "started with this key is answered (200) instead of a second one being "
                    "started; with another action, reason, filters or step it is refused "
                    f"(409). Up to {START_KEY_MAX} visible ASCII characters, no spaces.")


class BulkJobOut(Schema):
    id: int
    action: str
    reason: str
    status: Literal[tuple(BulkJobStatus.values)]
    phase: Literal[tuple(BulkJobPhase.values)] = Field(
        description="acting: on the runs the filter matched; applying: its request was "
                    "approved, and the job takes the action on the runs that waited for it.")
    total: int = Field(description="The runs the filter matched when the job started.")
    handled: int = Field(description="Runs with an outcome so far.")
    skipped: int = Field(description="Of a job done: the runs the filter matched when it "
                                     "started that, when they were reached, no longer "
                                     "matched it (moved on meanwhile): not acted on. (Of a "
                                     "job started before its person's sight was kept, a run "
                                     "no longer visible to them is counted here too.) 0 "
                                     "before.")
    outcomes: dict[Literal[tuple(BulkOutcome.Outcome.values)], int] = Field(
        description="How many runs ended each way so far (done, refused, forbidden, "
                    "second_person; not_visible: no longer visible to the job's person when "
                    "reached, a permission taken away, not acted on and not named; claimed: "
                    "being acted on).")
    approval_request_id: int | None = Field(
        description="The one request listing the runs that need a second person.")
    created_at: datetime
    finished_at: datetime | None
    status_url: str
