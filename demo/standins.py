"""In-process stand-ins for the customer, messaging and payment systems.

Each behaves like its remote counterpart would: the customer and payment systems honour an
idempotency key (a repeated key returns the first object), the messenger does not and only
records the client reference. Each call commits on its own, as a remote system would.
"""

from django.db import IntegrityError

from .models import Customer, Message, PaymentUpdate


def create_customer(*, key: str, email: str, name: str, plan: str) -> str:
    try:
        customer = Customer.objects.create(idempotency_key=key, email=email, name=name, plan=plan)
    except IntegrityError:
        customer = Customer.objects.get(idempotency_key=key)
    return str(customer)


def find_customer(*, key: str) -> str | None:
    customer = Customer.objects.filter(idempotency_key=key).first()
    return str(customer) if customer else None


def send_message(*, client_reference: str, recipient: str, subject: str, body: str) -> str:
    message = Message.objects.create(client_reference=client_reference, recipient=recipient,
                                     subject=subject, body=body)
    return str(message)


def find_message(*, client_reference: str) -> str | None:
    message = Message.objects.filter(client_reference=client_reference).order_by("pk").first()
    return str(message) if message else None


def update_payment_status(*, key: str, customer_ref: str, status: str) -> str:
    try:
        update = PaymentUpdate.objects.create(idempotency_key=key, customer_ref=customer_ref,
                                              status=status)
    except IntegrityError:
        update = PaymentUpdate.objects.get(idempotency_key=key)
    return str(update)


def find_payment_update(*, key: str) -> str | None:
    update = PaymentUpdate.objects.filter(idempotency_key=key).first()
    return str(update) if update else None
