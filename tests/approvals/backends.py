"""An email backend whose server refuses every message, for the publisher's retries."""

import smtplib

from django.core.mail.backends.base import BaseEmailBackend


class RefusingBackend(BaseEmailBackend):
    def send_messages(self, email_messages):
        raise smtplib.SMTPServerDisconnected("connection unexpectedly closed")
