"""The sandbox's URLs, included under /sandbox/ when settings.SANDBOX_ENABLED."""

from django.urls import path

from . import views

app_name = "sandbox"

urlpatterns = [
    path("invoices/<str:number>", views.invoice, name="invoice"),
    path("tracker/tasks", views.tracker_tasks, name="tracker-tasks"),
    path("tracker/tasks/<str:task_id>/cancel", views.cancel_task, name="tracker-cancel"),
    path("messenger/messages", views.messenger_messages, name="messenger-messages"),
    path("ledger/entries", views.ledger_entries, name="ledger-entries"),
    path("customers", views.customers, name="customers"),
    path("payments/status", views.payment_status, name="payment-status"),
    path("vendors", views.vendor, name="vendors"),
    path("model/v1/chat/completions", views.chat_completions, name="model-chat"),
    path("stats", views.stats, name="stats"),
    path("faults", views.fault_queue, name="faults"),
]
