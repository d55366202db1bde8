"""Webhook subscribers over the API: list, make, read, change and delete them as Django
admin's pages do, through the same functions (api.subscribers): the model permission admin
asks for each (refuse_who_may_not), held by the token's acting person; the workflows that
person may give a subscriber (subscription_refusal); a replaced secret's overlap; each
change recorded in the access chain, naming the person.

The secret is write-only: no answer holds it, nor the credentials a URL may carry (the URL
is answered as the access chain records it). A subscriber is sent the runs of its
workflows, and a token reads runs of its own workflows only: a token reaches the
subscribers whose workflows are all its own, and gives one no other (every workflow, [],
is beyond any token).
"""

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError
from ninja import Path, Query, Status

from runs.machine.storable import unstorable_texts, whole_number
from runs.reads.cursors import KEYSET_PATTERN, decode_keyset, encode_keyset

from . import selectors, subscribers, webhooks
from .errors import error_body, invalid_field, no_acting_user
from .models import WebhookSubscriber
from .parser import refuse_unknown_query
from .schemas import (
    MAX_RUN_ID,
    Error,
    InvalidRequest,
    SubscriberChange,
    SubscriberIn,
    SubscriberList,
    SubscriberOut,
)
from .tokens import clock

TO_DO = "manage webhook subscribers"


def within(token, workflows: list[str]) -> bool:
    """Whether a subscriber of `workflows` is within the token's reach: every one of them
    the token's (the empty list, every workflow, is no token's)."""
    return bool(workflows) and all(token.may_use(name) for name in workflows)


def reached(token, subscriber_id: int) -> WebhookSubscriber | None:
    subscriber = WebhookSubscriber.objects.filter(pk=subscriber_id).first()
    return subscriber if subscriber and within(token, subscriber.workflows or []) else None


def described(subscriber: WebhookSubscriber) -> dict:
    return {"id": subscriber.pk, "name": subscriber.name,
            "url": subscribers.recorded_url(subscriber.url),
            "workflows": subscriber.workflows or [], "active": subscriber.active,
            "previous_secret_signs_until": subscribers.previous_signs_until(
                subscriber, now=clock()),
            "created_at": subscriber.created_at}


def refused_person(token, action: str) -> Status | None:
    """403 for a token that acts for nobody, or whose person may not `action` subscribers."""
    if token.acting_user is None:
        return no_acting_user(token, TO_DO)
    try:
        subscribers.refuse_who_may_not(token.acting_user, action)
    except PermissionDenied as exc:
        return Status(403, error_body("forbidden", str(exc)))
    return None


def not_found(subscriber_id: int) -> Status:
    return Status(404, error_body("subscriber_not_found",
                                  f"no webhook subscriber {subscriber_id} for this token"))


def asked_for(request, subscriber_id: int, action: str) -> WebhookSubscriber | Status:
    """The subscriber an operation on one names, or the answer refusing it, in the order
    every such operation refuses: a query it does not take, who may not `action`
    subscribers, one not within the token's reach (404)."""
    if (refused := refuse_unknown_query(request, ())) is not None:
        return refused
    if (refused := refused_person(request.auth, action)) is not None:
        return refused
    subscriber = reached(request.auth, subscriber_id)
    return not_found(subscriber_id) if subscriber is None else subscriber


def refused_before_input(request) -> Status | None:
    """A make's or a change's refusals before its body is read, in their order: who may not
    make or change subscribers, or change this one, hears nothing of what they sent. A
    token that acts for nobody has its body's faults named first, as for a run action."""
    token = request.auth
    if request.method not in ("POST", "PATCH") or token.acting_user is None:
        return None
    if (refused := refused_person(token, "add" if request.method == "POST" else "change")):
        return refused
    if request.method == "PATCH":
        subscriber_id = whole_number(request.resolver_match.kwargs.get("subscriber_id", ""))
        if subscriber_id is not None and 1 <= subscriber_id <= MAX_RUN_ID \
                and reached(token, subscriber_id) is None:
            return not_found(subscriber_id)
    return None


def refused_input(token, subscriber: WebhookSubscriber, given: dict) -> Status | None:
    """What the schema cannot say of a subscriber about to be written, named by field (422),
    or a workflow beyond the token (403); None when it may be written."""
    if errors := unstorable_texts(given, []):
        return Status(422, {"error": "invalid_request", "detail": "text the database cannot "
                            "store", "errors": errors})
    try:
        subscriber.workflows = webhooks.subscribed_workflows(subscriber.workflows)
    except ValueError as exc:
        return Status(422, invalid_field("workflows", str(exc)))
    if not within(token, subscriber.workflows):
        return Status(403, error_body(
            "workflow_not_allowed", "this token may give a subscriber only its own workflows "
                                    f"({', '.join(token.workflows or []) or 'none'}); [], "
                                    "every workflow, is beyond any token"))
    try:
        # The model's own rules, as admin's form applies them: a URL, a name no other has.
        subscriber.full_clean()
    except ValidationError as exc:
        detail = "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
        return Status(422, {"error": "invalid_request", "detail": detail,
                            "errors": [{"loc": [field], "msg": " ".join(msgs),
                                        "type": "value_error"}
                                       for field, msgs in exc.message_dict.items()]})
    if "url" in given and (problem := subscribers.url_problem(subscriber.url)) is not None:
        return Status(422, invalid_field("url", problem))
    return None


def written(write, subscriber: WebhookSubscriber, status: int) -> Status:
    """`write` (a function of api.subscribers) done, answered with `status`, or its refusal;
    nothing is written on a refusal (each is one transaction)."""
    try:
        write()
    except PermissionDenied as exc:
        return Status(403, error_body("forbidden", str(exc)))
    except subscribers.NameKept as exc:
        return Status(422, invalid_field("name", str(exc)))
    except IntegrityError:
        # Another request took the name between the check and the write.
        return Status(422, invalid_field("name", "a webhook subscriber with this name "
                                                 "already exists", "unique"))
    return Status(status, described(subscriber))


def register(api, *, headers: dict, refusals: dict) -> None:
    """Add the subscribers' operations to `api` (api.routes' NinjaAPI), and to `refusals`
    those refused before their body is read (under each name a path of theirs resolves to)."""
    for name in ("list_subscribers", "create_subscriber", "get_subscriber",
                 "change_subscriber", "delete_subscriber"):
        refusals[name] = refused_before_input

    @api.get(
        "/subscribers", url_name="list_subscribers", operation_id="list_subscribers",
        summary="Webhook subscribers",
        response={200: SubscriberList, 401: Error, 403: Error, 422: InvalidRequest,
                  429: Error},
        openapi_extra=headers,
        description="The subscribers whose workflows are all the token's, as Django admin "
                    "lists them to a person who may view them (api.view_webhooksubscriber "
                    "or api.change_webhooksubscriber), the oldest made first, a page at a "
                    "time (keyset: pass `next_cursor` as `after`; it is null on the last "
                    "page; an `after` of another shape is refused with 422, never answered "
                    "with the first page). A subscriber made or deleted between two pages "
                    "makes the next page skip no other. 403: the token acts for nobody, or "
                    "its person may not view subscribers.")
    def list_subscribers(request, after: str = Query("", pattern=f"^$|{KEYSET_PATTERN}"),
                         limit: int = Query(50, ge=1, le=selectors.MOST_A_PAGE)):
        if (refused := refuse_unknown_query(request, ("after", "limit"))) is not None:
            return refused
        token = request.auth
        if (refused := refused_person(token, "view")) is not None:
            return refused
        rows, next_cursor = selectors.subscribers_page(
            token.workflows or [], after=decode_keyset(after) if after else None, limit=limit)
        return Status(200, {"subscribers": [described(s) for s in rows],
                            "next_cursor": encode_keyset(next_cursor)})

    @api.post(
        "/subscribers", url_name="create_subscriber", operation_id="create_subscriber",
        summary="Make a webhook subscriber",
        response={201: SubscriberOut, 400: Error, 401: Error, 403: Error, 422: InvalidRequest,
                  429: Error},
        openapi_extra=headers,
        description="As Django admin makes one, for the token's acting person "
                    "(api.add_webhooksubscriber), recorded in the access chain "
                    "(`webhook_subscriber_created`; never the secret). It is told what "
                    "happens from now on, not the history. 403: the token acts for nobody "
                    "(`no_acting_user`), its person may not add subscribers or may not view "
                    "the runs of a workflow given (`forbidden`), or a workflow is not the "
                    "token's (`workflow_not_allowed`). 422, with `errors` naming the field: "
                    "the body does not match its schema, the URL is not one, or the name is "
                    "taken. Nothing is written on a refusal.")
    def create_subscriber(request, payload: SubscriberIn):
        if (refused := refuse_unknown_query(request, ())) is not None:
            return refused
        token = request.auth
        if (refused := refused_person(token, "add")) is not None:
            return refused
        subscriber = WebhookSubscriber(**payload.dict())
        if (refused := refused_input(token, subscriber, payload.dict())) is not None:
            return refused
        return written(lambda: subscribers.subscriber_create(subscriber, by=token.acting_user),
                       subscriber, 201)

    @api.get(
        "/subscribers/{subscriber_id}", url_name="get_subscriber",
        operation_id="get_subscriber", summary="A webhook subscriber",
        response={200: SubscriberOut, 401: Error, 403: Error, 404: Error,
                  422: InvalidRequest, 429: Error},
        openapi_extra=headers,
        description="403: the token acts for nobody, or its person may not view "
                    "subscribers. 404: no such subscriber whose workflows are all the "
                    "token's.")
    def get_subscriber(request, subscriber_id: int = Path(..., ge=1, le=MAX_RUN_ID)):
        subscriber = asked_for(request, subscriber_id, "view")
        return subscriber if isinstance(subscriber, Status) \
            else Status(200, described(subscriber))

    @api.patch(
        "/subscribers/{subscriber_id}", url_name="change_subscriber",
        operation_id="change_subscriber", summary="Change a webhook subscriber",
        response={200: SubscriberOut, 400: Error, 401: Error, 403: Error, 404: Error,
                  422: InvalidRequest, 429: Error},
        openapi_extra=headers,
        description="The fields given (a field left out or null stays as it is), as "
                    "Django admin's page saves them (api.change_webhooksubscriber), and what "
                    "changed recorded in the access chain (`webhook_subscriber_changed`; a "
                    "new secret as replaced, never its value). A new secret starts the "
                    "overlap: the one it replaces signs beside it until "
                    "`previous_secret_signs_until`. The workflows it takes already stay, "
                    "whoever changes it, while its URL stays. 403 and 422 as for a make "
                    "(422 also for another `name`: a subscriber keeps its own); 404: no "
                    "such subscriber whose workflows are all the token's. Nothing is "
                    "written on a refusal.")
    def change_subscriber(request, payload: SubscriberChange,
                          subscriber_id: int = Path(..., ge=1, le=MAX_RUN_ID)):
        token, subscriber = request.auth, asked_for(request, subscriber_id, "change")
        if isinstance(subscriber, Status):
            return subscriber
        given = payload.dict(exclude_none=True)
        end_overlap = given.pop("end_overlap")
        for field, value in given.items():
            setattr(subscriber, field, value)
        if (refused := refused_input(token, subscriber, given)) is not None:
            return refused
        return written(lambda: subscribers.subscriber_save(
            subscriber, by=token.acting_user, end_overlap=end_overlap, changed=given),
            subscriber, 200)

    @api.delete(
        "/subscribers/{subscriber_id}", url_name="delete_subscriber",
        operation_id="delete_subscriber", summary="Delete a webhook subscriber",
        response={200: SubscriberOut, 401: Error, 403: Error, 404: Error, 409: Error,
                  422: InvalidRequest, 429: Error},
        openapi_extra=headers,
        description="As Django admin deletes one (api.delete_webhooksubscriber), recorded in "
                    "the access chain (`webhook_subscriber_deleted`); answered with the "
                    "subscriber as it was. 409 (`subscriber_in_use`): it has deliveries, "
                    "the publisher's record of what was sent where: deactivate it instead "
                    "(`active`: false). 403: the token acts for nobody, or its person may "
                    "not delete subscribers. 404: no such subscriber whose workflows are all "
                    "the token's.")
    def delete_subscriber(request, subscriber_id: int = Path(..., ge=1, le=MAX_RUN_ID)):
        token, subscriber = request.auth, asked_for(request, subscriber_id, "delete")
        if isinstance(subscriber, Status):
            return subscriber
        answer = described(subscriber)
        try:
            subscribers.subscriber_delete(subscriber, by=token.acting_user)
        except subscribers.SubscriberInUse as exc:
            return Status(409, error_body("subscriber_in_use", str(exc)))
        except PermissionDenied as exc:
            return Status(403, error_body("forbidden", str(exc)))
        return Status(200, answer)
