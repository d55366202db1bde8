"""The HTTP endpoints of the simulated external systems.

They stand for other companies' JSON APIs, so they are CSRF-exempt and speak JSON only,
except /sandbox/faults, which is ours: for holders of sandbox.queue_fault, CSRF-protected.
Each endpoint runs in autocommit (never inside ATOMIC_REQUESTS), so that its change is
committed before a fault holds or cuts the answer, as on a remote system that committed and
then failed to reply. A write repeated with its key (the ledger's key is the transaction
reference) returns the first result; repeated with other arguments it is refused, as real
APIs refuse it: HTTP 422, code idempotency_key_reused, with the hash of each request's
arguments.
"""

import functools
import hashlib
import hmac
import json
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from django.db import transaction
from django.db.models import Q
from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt, ensure_csrf_cookie
from django.views.decorators.http import require_http_methods

from . import agent_model, classifier, faults
from .injection import with_faults
from .invoices import invoice_for, vendor_named
from .models import (
    Customer,
    LedgerEntry,
    LedgerRefused,
    Message,
    ModelCall,
    PaymentUpdate,
    Task,
)

MAX_KEY_LENGTH = 200


class Invalid(Exception):
    """The request cannot be served as sent; nothing was changed."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class KeyReused(Exception):
    """A key came back with other arguments than its first request's: refused, as real APIs
    do (HTTP 422, code idempotency_key_reused), naming the key and both arguments' hashes;
    the first request's object stays as it was."""

    def __init__(self, key: str, first: dict, sent: dict):
        super().__init__(f"the key {key} was used before with other arguments; a key may "
                         "only be sent again with the arguments it was first sent with")
        self.key = key
        self.first_hash = arguments_hash(first)
        self.request_hash = arguments_hash(sent)

    def as_json(self) -> dict:
        return {"error": str(self), "code": KEY_REUSED, "idempotency_key": self.key,
                "first_request_sha256": self.first_hash, "request_sha256": self.request_hash}


KEY_REUSED = "idempotency_key_reused"


def arguments_hash(arguments: dict) -> str:
    return hashlib.sha256(json.dumps(arguments, sort_keys=True, separators=(",", ":"),
                                     default=str).encode()).hexdigest()


def same_arguments(key: str, first: dict, sent: dict) -> None:
    """Raise KeyReused unless a repeated request carries its first request's arguments."""
    if arguments_hash(first) != arguments_hash(sent):
        raise KeyReused(key, first, sent)


def remote_api(methods: list[str]):
    """A view of a simulated remote system: CSRF-exempt, autocommit, JSON errors."""

    def decorator(view):
        @functools.wraps(view)
        def wrapper(request, *args, **kwargs):
            try:
                return view(request, *args, **kwargs)
            except Invalid as exc:
                return JsonResponse({"error": str(exc)}, status=exc.status)
            except LedgerRefused as exc:
                return JsonResponse({"error": str(exc)}, status=422)
            except KeyReused as exc:
                return JsonResponse(exc.as_json(), status=422)

        return transaction.non_atomic_requests(csrf_exempt(require_http_methods(methods)(wrapper)))

    return decorator


def _body(request) -> dict:
    try:
        data = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise Invalid("the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise Invalid("the request body must be a JSON object")
    return data


def _text(data: dict, name: str, *, required: bool = True, max_length: int = 300) -> str:
    value = data.get(name, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise Invalid(f"{name!r} must be a string")
    value = value.strip()
    if required and not value:
        raise Invalid(f"{name!r} is required")
    if len(value) > max_length:
        raise Invalid(f"{name!r} is longer than {max_length} characters")
    return value


def _idempotency_key(request) -> str:
    key = request.headers.get("Idempotency-Key", "").strip()
    if not key:
        raise Invalid("the Idempotency-Key header is required: a repeated request with the "
                      "same key returns the first result instead of acting twice")
    if len(key) > MAX_KEY_LENGTH:
        raise Invalid(f"the Idempotency-Key header is longer than {MAX_KEY_LENGTH} characters")
    return key


def _query(request, name: str) -> str:
    value = request.GET.get(name, "").strip()
    if not value:
        raise Invalid(f"the query parameter {name!r} is required")
    return value


def _found(obj) -> JsonResponse:
    if obj is None:
        return JsonResponse({"error": "not found"}, status=404)
    return JsonResponse(obj.as_json())


def _saved(obj, created: bool) -> JsonResponse:
    return JsonResponse(obj.as_json(), status=201 if created else 200)


# Invoices ---------------------------------------------------------------------------------


@remote_api(["GET"])
@with_faults("invoices.read")
def invoice(request, number):
    return JsonResponse(invoice_for(number))


# Task tracker -----------------------------------------------------------------------------


@remote_api(["GET", "POST"])
def tracker_tasks(request):
    return create_task(request) if request.method == "POST" else find_task(request)


@with_faults("tracker.create")
def create_task(request):
    key = _idempotency_key(request)
    data = _body(request)
    details = data.get("details") or {}
    if not isinstance(details, dict):
        raise Invalid("'details' must be an object")
    sent = {"title": _text(data, "title"), "assignee": _text(data, "assignee", max_length=200),
            "details": details}
    task, created = Task.objects.get_or_create(idempotency_key=key, defaults=sent)
    if not created:
        same_arguments(key, {"title": task.title, "assignee": task.assignee,
                             "details": task.details}, sent)
    return _saved(task, created)


@with_faults("tracker.lookup")
def find_task(request):
    return _found(Task.objects.filter(idempotency_key=_query(request, "key")).first())


@remote_api(["POST"])
@with_faults("tracker.cancel")
def cancel_task(request, task_id):
    key = _idempotency_key(request)
    reason = _text(_body(request), "reason", max_length=2000)
    pk = Task.pk_from_ref(task_id)
    if pk is None or not Task.objects.filter(pk=pk).exists():
        raise Invalid(f"no task {task_id}", status=404)
    task = Task.cancel(pk, reason=reason, key=key)
    if task.cancel_key == key:
        same_arguments(key, {"reason": task.cancel_reason}, {"reason": reason})
    return JsonResponse(task.as_json())


# Messenger --------------------------------------------------------------------------------


@remote_api(["GET", "POST"])
def messenger_messages(request):
    return send_message(request) if request.method == "POST" else find_messages(request)


@with_faults("messenger.send")
def send_message(request):
    data = _body(request)
    message = Message.objects.create(
        recipient=_text(data, "to"), subject=_text(data, "subject", required=False),
        body=_text(data, "body", required=False, max_length=20000),
        client_reference=_text(data, "client_reference", required=False, max_length=200))
    return _saved(message, True)


@with_faults("messenger.lookup")
def find_messages(request):
    messages = Message.objects.filter(
        client_reference=_query(request, "client_reference")).order_by("pk")
    return JsonResponse({"messages": [m.as_json() for m in messages]})


# Ledger -----------------------------------------------------------------------------------


@remote_api(["GET", "POST"])
def ledger_entries(request):
    return post_entry(request) if request.method == "POST" else find_entry(request)


@with_faults("ledger.post")
def post_entry(request):
    data = _body(request)
    reverses = _text(data, "reverses", required=False, max_length=40) or None
    ref = _text(data, "transaction_ref", max_length=200)
    sent = {"account": _text(data, "account", max_length=100), "amount": _amount(data),
            "currency": (_text(data, "currency", required=False, max_length=3) or "EUR").upper(),
            "memo": _text(data, "memo", required=False, max_length=500), "reverses": reverses}
    entry, created = LedgerEntry.post(transaction_ref=ref, **sent)
    if not created:
        # The transaction reference is the ledger's idempotency key.
        same_arguments(ref, {"account": entry.account, "amount": entry.amount,
                             "currency": entry.currency, "memo": entry.memo,
                             "reverses": entry.reverses.ref if entry.reverses_id else None},
                       sent)
    return _saved(entry, created)


def _amount(data: dict) -> Decimal:
    raw = data.get("amount")
    try:
        amount = Decimal(str(raw)) if isinstance(raw, str | int) else None
    except InvalidOperation:
        amount = None
    exact = amount is not None and amount.is_finite() and abs(amount) < 10**12 \
        and amount == amount.quantize(Decimal("0.01"))
    if not exact:
        raise Invalid("'amount' must be a decimal string with at most 2 decimal places, "
                      "e.g. \"125.00\" or \"-125.00\"")
    return amount.quantize(Decimal("0.01"))


@with_faults("ledger.lookup")
def find_entry(request):
    entry = LedgerEntry.objects.filter(transaction_ref=_query(request, "transaction_ref"))
    return _found(entry.select_related("reverses").first())


# Customers and payments -------------------------------------------------------------------


@remote_api(["GET", "POST"])
def customers(request):
    return create_customer(request) if request.method == "POST" else find_customer(request)


@with_faults("customers.create")
def create_customer(request):
    key = _idempotency_key(request)
    data = _body(request)
    email = _text(data, "email", max_length=254)
    try:
        validate_email(email)
    except ValidationError:
        raise Invalid(f"{email!r} is not an email address") from None
    sent = {"email": email, "name": _text(data, "name", max_length=200),
            "plan": _text(data, "plan", max_length=40)}
    customer, created = Customer.objects.get_or_create(idempotency_key=key, defaults=sent)
    if not created:
        same_arguments(key, {"email": customer.email, "name": customer.name,
                             "plan": customer.plan}, sent)
    return _saved(customer, created)


@with_faults("customers.lookup")
def find_customer(request):
    return _found(Customer.objects.filter(idempotency_key=_query(request, "key")).first())


@remote_api(["GET", "POST"])
def payment_status(request):
    return update_payment(request) if request.method == "POST" else find_payment(request)


@with_faults("payments.update")
def update_payment(request):
    key = _idempotency_key(request)
    data = _body(request)
    sent = {"customer_id": _text(data, "customer_id", max_length=64),
            "status": _text(data, "status", max_length=40)}
    update, created = PaymentUpdate.objects.get_or_create(idempotency_key=key, defaults=sent)
    if not created:
        same_arguments(key, {"customer_id": update.customer_id, "status": update.status}, sent)
    return _saved(update, created)


@with_faults("payments.lookup")
def find_payment(request):
    return _found(PaymentUpdate.objects.filter(idempotency_key=_query(request, "key")).first())


# Model endpoint (OpenAI-compatible) -------------------------------------------------------


def _model_error(status: int, message: str, error_type: str, code: str | None = None):
    return JsonResponse({"error": {"message": message, "type": error_type, "param": None,
                                   "code": code}}, status=status)


@remote_api(["POST"])
@with_faults("model.chat")
def chat_completions(request):
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token or not hmac.compare_digest(
            token.strip().encode(), settings.MODEL_API_KEY.encode()):
        return _model_error(401, "missing or invalid API key (send Authorization: Bearer "
                            "<key>)", "invalid_request_error", "invalid_api_key")
    try:
        data = _body(request)
    except Invalid as exc:
        return _model_error(400, str(exc), "invalid_request_error")
    model, messages = data.get("model"), data.get("messages")
    if not isinstance(model, str) or not model:
        return _model_error(400, "'model' is required", "invalid_request_error")
    if not isinstance(messages, list) or not messages:
        return _model_error(400, "'messages' must be a non-empty list", "invalid_request_error")
    if request.sandbox_fault == faults.NOT_A_COMPLETION:
        # What a proxy in front of a model may answer: a page, with a success status.
        return HttpResponse("<html><body>Service temporarily moved</body></html>",
                            content_type="text/html")
    empty = request.sandbox_fault == faults.EMPTY_ANSWER
    malformed = request.sandbox_fault == faults.MALFORMED
    if data.get("tools") or agent_model.is_summary_request(messages):
        return _agent_turn(model, messages, summary=not data.get("tools"), empty=empty,
                           malformed=malformed)
    prompt = classifier.last_user_text(messages)
    content = "" if empty else classifier.answer(prompt, malformed=malformed)
    call = ModelCall.objects.create(model=model, prompt=prompt, content=content,
                                    malformed=malformed)
    return JsonResponse(classifier.completion(completion_id=call.ref, model=model,
                                              prompt=prompt, content=content))


def _agent_turn(model: str, messages: list, *, summary: bool = False,
                empty: bool = False, malformed: bool = False) -> JsonResponse:
    """The next turn of a model offered tools, or its summary of a conversation (see
    agent_model): recorded as a ModelCall like any completion, with the messages it was
    sent (as JSON), so tests can count how often the model was asked, and what for.
    `empty`: an answer with neither text nor tool calls (the fault empty_answer);
    `malformed`: its tool calls with arguments that are not JSON (the fault malformed; a
    summary, which has no calls and no schema, comes as it is)."""
    content, calls = ("", []) if empty else (agent_model.summarise(messages), []) if summary \
        else agent_model.answer(messages)
    if malformed:
        calls = agent_model.malformed(calls)
    call = ModelCall.objects.create(
        model=model, prompt=json.dumps(messages),
        content=json.dumps({"content": content, "tool_calls": calls}),
        malformed=malformed and bool(calls))
    return JsonResponse(agent_model.completion(completion_id=call.ref, model=model,
                                               messages=messages, content=content,
                                               tool_calls=calls))


# Vendors (read-only, derived from the invoice source's vendors) ----------------------------


@remote_api(["GET"])
@with_faults("vendors.lookup")
def vendor(request):
    found = vendor_named(_query(request, "name"))
    return _found(None) if found is None else JsonResponse(found)


# Statistics and faults --------------------------------------------------------------------

QUEUE_FAULT = "sandbox.queue_fault"


@remote_api(["GET"])
def stats(request):
    return JsonResponse({
        "tasks": Task.objects.count(),
        "cancelled_tasks": Task.objects.filter(status=Task.CANCELLED).count(),
        "messages": Message.objects.count(),
        "ledger_entries": LedgerEntry.objects.count(),
        "reversals": LedgerEntry.objects.filter(~Q(reverses=None)).count(),
        "customers": Customer.objects.count(),
        "payment_updates": PaymentUpdate.objects.count(),
        "model_calls": ModelCall.objects.count(),
        "faults_pending": faults.pending_count(),
    })


@ensure_csrf_cookie
@require_http_methods(["GET", "POST"])
def fault_queue(request):
    """For holders of sandbox.queue_fault (and superusers): list the queued faults (GET) or
    queue one (POST, form or JSON {endpoint, kind, times}). Not exempt from CSRF: queuing a
    fault changes what the sandbox does to every workflow calling it."""
    if not request.user.has_perm(QUEUE_FAULT):
        return JsonResponse({"error": f"needs the {QUEUE_FAULT} permission"}, status=403)
    if request.method == "POST":
        if request.content_type == "application/json":
            try:
                data = _body(request)
            except Invalid as exc:
                return JsonResponse({"error": str(exc)}, status=400)
        else:
            data = request.POST
        try:
            fault = faults.add(str(data.get("endpoint", "")), str(data.get("kind", "")),
                               faults.parse_times(data.get("times")))
        except faults.FaultError as exc:
            return JsonResponse({"error": str(exc)}, status=400)
        return JsonResponse({"fault": fault.as_json(),
                             "pending": [f.as_json() for f in faults.pending()]}, status=201)
    return JsonResponse({"pending": [f.as_json() for f in faults.pending()],
                         "endpoints": faults.ENDPOINTS, "kinds": faults.KINDS})
