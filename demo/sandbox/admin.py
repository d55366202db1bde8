"""Admin pages for the sandbox's tables: to look at what the simulated systems hold, and to
queue faults from a browser (validated by demo.sandbox.faults, like the command)."""

from django import forms
from django.contrib import admin

from audit.admin import FastListAdmin, ReadOnlyAdmin

from . import faults
from .models import Customer, Fault, LedgerEntry, Message, ModelCall, PaymentUpdate, Task


@admin.register(Task)
class TaskAdmin(FastListAdmin):
    list_display = ["__str__", "title", "assignee", "status", "idempotency_key", "created_at"]
    list_filter = ["status"]
    search_fields = ["idempotency_key", "title", "assignee"]


@admin.register(Message)
class MessageAdmin(FastListAdmin):
    list_display = ["__str__", "recipient", "subject", "client_reference", "created_at"]
    search_fields = ["client_reference", "recipient"]


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyAdmin):
    """Read-only: a ledger is never edited; mistakes are reversed by a new entry."""

    list_display = ["__str__", "transaction_ref", "account", "amount", "currency", "reverses",
                    "created_at"]
    search_fields = ["transaction_ref", "account"]


@admin.register(Customer)
class CustomerAdmin(FastListAdmin):
    list_display = ["__str__", "email", "name", "plan", "idempotency_key", "created_at"]
    search_fields = ["idempotency_key", "email"]


@admin.register(PaymentUpdate)
class PaymentUpdateAdmin(FastListAdmin):
    list_display = ["__str__", "customer_id", "status", "idempotency_key", "created_at"]
    search_fields = ["idempotency_key", "customer_id"]


@admin.register(ModelCall)
class ModelCallAdmin(FastListAdmin):
    list_display = ["__str__", "model", "malformed", "created_at"]
    list_filter = ["malformed"]


class FaultForm(forms.ModelForm):
    endpoint = forms.ChoiceField(choices=[(e, f"{e}  ({d})") for e, d in faults.ENDPOINTS.items()])
    kind = forms.ChoiceField(choices=[(k, f"{k}: {d}") for k, d in faults.KINDS.items()])

    class Meta:
        model = Fault
        fields = ["endpoint", "kind", "remaining"]

    def clean(self):
        data = super().clean()
        if not self.errors:
            try:
                faults.validate(data["endpoint"], data["kind"], data["remaining"])
            except faults.FaultError as exc:
                raise forms.ValidationError(str(exc)) from None
        return data


@admin.register(Fault)
class FaultAdmin(FastListAdmin):
    form = FaultForm
    list_display = ["endpoint", "kind", "remaining", "created_at"]
    list_filter = ["endpoint", "kind"]
