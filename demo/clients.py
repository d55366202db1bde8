"""Clients of the external systems the demo workflows call, over real HTTP.

Each call goes out through httpx with the configured timeout and ends in
`raise_for_status()`, so that a failure reaches the runtime as the httpx exception it is
and runs.machine.errors.classify() can tell a refusal before any change (connect error, 429, 503:
transient; other 4xx: permanent) from an outcome nobody can know (timeout or broken
connection after sending, 500/502/504: unknown; 501: permanent). Clients therefore never
catch and re-label httpx errors, with one exception that says more than its status: a 422
refusing an idempotency key reused with other arguments is raised as
runs.machine.errors.IdempotencyKeyReused (permanent, naming the key and both arguments' hashes),
read from the answer by the same function classify() uses. The model client is the
exception: a model call has no side effect, so a timeout there is simply worth another try,
and it translates the openai package's errors itself.

Credentials stay inside the client objects: no method returns them, and the reprs leave
them out, so they cannot reach a step's result, a checkpoint or a log line.
"""

from dataclasses import dataclass
from urllib.parse import quote

import httpx
from django.conf import settings

from runs.machine import tracing
from runs.machine.errors import key_reused, model_call_error, model_call_errors


class _RemoteSystem:
    """One remote system reached through a shared httpx client."""

    def __init__(self, http: httpx.Client):
        self._http = http

    def __repr__(self):
        return f"<{type(self).__name__} {self._http.base_url}>"

    def _call(self, method: str, path: str, *, key: str | None = None, body=None,
              params=None) -> dict:
        headers = {"Idempotency-Key": key} if key is not None else None
        response = self._http.request(method, path, headers=headers, json=body, params=params)
        reused = key_reused(response)
        if reused is not None:
            raise reused
        response.raise_for_status()
        return response.json()

    def _find(self, path: str, params: dict) -> dict | None:
        """A lookup: the object, or None when the system answers 404 (evidence that it does
        not exist); any other failure is raised as it is."""
        response = self._http.get(path, params=params)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return response.json()


def _segment(value: str) -> str:
    return quote(str(value), safe="")


class InvoiceSource(_RemoteSystem):
    def get(self, number: str) -> dict:
        return self._call("GET", f"/invoices/{_segment(number)}")


class TaskTracker(_RemoteSystem):
    """Deduplicates on the Idempotency-Key: a repeated key returns the first task."""

    def create_task(self, key: str, title: str, assignee: str, details: dict | None = None
                    ) -> dict:
        return self._call("POST", "/tracker/tasks", key=key,
                          body={"title": title, "assignee": assignee, "details": details or {}})

    def find_task(self, key: str) -> dict | None:
        return self._find("/tracker/tasks", {"key": key})

    def cancel_task(self, task_id: str, reason: str, key: str) -> dict:
        return self._call("POST", f"/tracker/tasks/{_segment(task_id)}/cancel", key=key,
                          body={"reason": reason})


class Messenger(_RemoteSystem):
    """Does NOT deduplicate: sending twice sends two messages. It records the
    client_reference, by which `find` tells whether a message went out."""

    def send(self, to: str, subject: str, body: str, client_reference: str) -> dict:
        return self._call("POST", "/messenger/messages",
                          body={"to": to, "subject": subject, "body": body,
                                "client_reference": client_reference})

    def find(self, client_reference: str) -> list:
        return self._call("GET", "/messenger/messages",
                          params={"client_reference": client_reference})["messages"]


class Ledger(_RemoteSystem):
    """Posts at most one entry per transaction_ref; a reversal is a new entry with
    `reverses` set and the negated amount."""

    def post(self, transaction_ref: str, account: str, amount, currency: str, memo: str,
             reverses: str | None = None) -> dict:
        return self._call("POST", "/ledger/entries", body={
            "transaction_ref": transaction_ref, "account": account, "amount": str(amount),
            "currency": currency, "memo": memo, "reverses": reverses})

    def find(self, transaction_ref: str) -> dict | None:
        return self._find("/ledger/entries", {"transaction_ref": transaction_ref})


class VendorRegistry(_RemoteSystem):
    """Read-only: the vendor record for a name (status, bank account), or None."""

    def find(self, name: str) -> dict | None:
        return self._find("/vendors", {"name": name})


class CustomerSystem(_RemoteSystem):
    def create(self, key: str, email: str, name: str, plan: str) -> dict:
        return self._call("POST", "/customers", key=key,
                          body={"email": email, "name": name, "plan": plan})

    def find(self, key: str) -> dict | None:
        return self._find("/customers", {"key": key})


class PaymentSystem(_RemoteSystem):
    def update(self, key: str, customer_id: str, status: str) -> dict:
        return self._call("POST", "/payments/status", key=key,
                          body={"customer_id": customer_id, "status": status})

    def find(self, key: str) -> dict | None:
        return self._find("/payments/status", {"key": key})


CLASSIFICATION_INSTRUCTIONS = (
    "You classify supplier invoices for approval routing. Answer with one JSON object and "
    'nothing else: {"category": one of "office-supplies", "software", "travel", "services"; '
    '"confidence": a number from 0 to 1; "reasons": a list of short strings; '
    '"approver_group": the group that should approve}.'
)


class ModelClient:
    """An OpenAI-compatible chat model, through the official openai package.

    Retries are the runtime's business (max_retries=0): a retry hidden in here would spend
    time the step's policy does not know about.
    """

    def __init__(self, *, base_url: str, api_key: str, model: str, timeout: float):
        import openai  # when a model is asked, not at every process's start (model_call_errors)

        self._openai = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout,
                                     max_retries=0)
        self._model = model

    def __repr__(self):
        return f"<ModelClient {self._model} at {self._openai.base_url}>"

    def classify_invoice(self, invoice: dict) -> str:
        """The model's raw answer (a JSON string, to be validated by the step's schema)."""
        try:
            completion = self._openai.chat.completions.create(
                model=self._model,
                messages=[{"role": "system", "content": CLASSIFICATION_INSTRUCTIONS},
                          {"role": "user", "content": invoice_text(invoice)}],
                response_format={"type": "json_object"},
            )
        except model_call_errors() as exc:
            raise model_call_error(exc) from exc
        if not completion.choices:
            return ""
        return completion.choices[0].message.content or ""

    def close(self) -> None:
        self._openai.close()


def invoice_text(invoice: dict) -> str:
    lines = "\n".join(f"- {line.get('description', '')}: {line.get('amount', '')}"
                      for line in invoice.get("lines", []))
    return (f"Invoice {invoice.get('number', '')} from {invoice.get('vendor', '')}, "
            f"{invoice.get('amount', '')} {invoice.get('currency', '')}, issued "
            f"{invoice.get('issued_on', '')}.\nLines:\n{lines}")


@dataclass(frozen=True)
class Services:
    """What a demo workflow's steps reach through ctx.services."""

    invoices: InvoiceSource
    tracker: TaskTracker
    messenger: Messenger
    ledger: Ledger
    customers: CustomerSystem
    payments: PaymentSystem
    model: ModelClient
    vendors: VendorRegistry | None = None

    def close(self) -> None:
        self.tracker._http.close()  # one httpx client is shared by the HTTP systems
        self.model.close()


def build_services() -> Services:
    """The clients, configured from settings when called (not at import), so that a worker
    and a test see the current SANDBOX_BASE_URL, MODEL_* and EXTERNAL_TIMEOUT_SECONDS."""
    # Every request carries the trace context of the step that makes it (traceparent).
    http = httpx.Client(base_url=settings.SANDBOX_BASE_URL,
                        timeout=settings.EXTERNAL_TIMEOUT_SECONDS,
                        event_hooks={"request": [tracing.inject_headers]})
    return Services(
        invoices=InvoiceSource(http), tracker=TaskTracker(http), messenger=Messenger(http),
        ledger=Ledger(http), customers=CustomerSystem(http), payments=PaymentSystem(http),
        vendors=VendorRegistry(http),
        model=ModelClient(base_url=settings.MODEL_BASE_URL, api_key=settings.MODEL_API_KEY,
                          model=settings.MODEL_NAME,
                          timeout=settings.EXTERNAL_TIMEOUT_SECONDS),
    )
