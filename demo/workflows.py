"""The example workflows. Users' own workflows live in their own apps, as these do."""

from typing import Literal

from pydantic import BaseModel, EmailStr

from runs.definition import Contract, Found, NotFound, StepResult, Workflow
from runs.retry import RetryPolicy

from . import standins


class OnboardingIn(BaseModel):
    email: EmailStr
    name: str
    plan: Literal["free", "pro", "enterprise"]


onboarding = Workflow("customer-onboarding", version=1, input=OnboardingIn)


@onboarding.write(
    "create-customer", honours_key=True, retry=RetryPolicy(maximum_attempts=5),
    contract=Contract(evidence="customer id in the customer system", rule="reconcile by key",
                      stop="permanent error or 5 attempts", owner="customer-ops"),
)
def create_customer(ctx):
    ref = standins.create_customer(key=ctx.key, email=ctx.input.email, name=ctx.input.name,
                                   plan=ctx.input.plan)
    return StepResult({"customer": ref}, remote_ref=ref)


@create_customer.reconcile
def find_customer(ctx):
    ref = standins.find_customer(key=ctx.key)
    return Found(ref, {"customer": ref}) if ref else NotFound()


@onboarding.notify(
    "send-confirmation-email",
    contract=Contract(evidence="provider message id", rule="reconcile by client reference",
                      stop="permanent error or 5 attempts", owner="customer-ops"),
)
def send_confirmation(ctx):
    ref = standins.send_message(
        client_reference=ctx.key, recipient=ctx.input.email,
        subject=f"Welcome, {ctx.input.name}",
        body=f"Your {ctx.input.plan} account is ready "
             f"({ctx.results['create-customer']['customer']}).",
    )
    return StepResult({"message": ref}, remote_ref=ref)


@send_confirmation.reconcile
def find_confirmation(ctx):
    ref = standins.find_message(client_reference=ctx.key)
    return Found(ref, {"message": ref}) if ref else NotFound()


@onboarding.write(
    "update-payment-status", impact="high", honours_key=True,
    contract=Contract(evidence="payment update id", rule="human confirmation after an unknown "
                      "outcome", stop="any unknown outcome", owner="finance-ops"),
)
def update_payment_status(ctx):
    status = "trial" if ctx.input.plan == "free" else "awaiting_payment"
    ref = standins.update_payment_status(
        key=ctx.key, customer_ref=ctx.results["create-customer"]["customer"], status=status)
    return StepResult({"payment_update": ref, "status": status}, remote_ref=ref)


@update_payment_status.reconcile
def find_payment_update(ctx):
    ref = standins.find_payment_update(key=ctx.key)
    return Found(ref, {"payment_update": ref}) if ref else NotFound()
