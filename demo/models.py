"""Tables of the simulated external systems. They stand for other companies' databases:
the runtime never reads them; workflows reach them only through their client functions."""

from django.db import models


class Customer(models.Model):
    idempotency_key = models.CharField(max_length=64, unique=True)
    email = models.EmailField()
    name = models.CharField(max_length=200)
    plan = models.CharField(max_length=20)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"cus_{self.pk}"


class Message(models.Model):
    """A message sent by the messenger. The messenger does not deduplicate: it only records
    the client's reference, by which a sender can look its message up."""

    client_reference = models.CharField(max_length=64, db_index=True)
    recipient = models.CharField(max_length=300)
    subject = models.CharField(max_length=300)
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"msg_{self.pk}"


class PaymentUpdate(models.Model):
    idempotency_key = models.CharField(max_length=64, unique=True)
    customer_ref = models.CharField(max_length=64)
    status = models.CharField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"pay_{self.pk}"
