"""An email backend whose server refuses every message, for the publisher's retries."""

import smtplib

from django.core.mail.backends.base import BaseEmailBackend


class RefusingBackend(BaseEmailBackend):
    def send_messages(self, email_messages):
        raise smtplib.SMTPServerDisconnected("connection unexpectedly closed")


class BouncingBackend(BaseEmailBackend):
    """A server that refuses each recipient, quoting the address back as servers do."""

    def send_messages(self, email_messages):
        to = email_messages[0].to[0]
        raise smtplib.SMTPRecipientsRefused({to: (550, f"5.1.1 <{to}>: unknown user".encode())})
