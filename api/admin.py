"""API tokens in Django admin: create (the token is shown once), scope, expiry, revoke.

The plaintext is rendered straight into the response to the add form's POST (with
Cache-Control: no-store) instead of a redirect and a flash message: a message would rest in
the session or a cookie until displayed, and the secret must rest nowhere.
"""

import hashlib

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import add_never_cache_headers, patch_cache_control

from audit.admin import ReadOnlyAdmin, StorableFiltersAdmin
from audit.page_edits import RowLockedAdmin, ShownValuesForm
from runs.admin_search import UUID, IndexedSearchAdmin
from runs.definitions.definition import registry
from runs.machine.sensitive import UnreadableValue

from . import subscribers, webhooks
from .models import ApiToken, WebhookDelivery, WebhookSubscriber
from .tokens import (
    SCOPE,
    ExpiryPassed,
    acting_user_choices,
    clock,
    default_expiry,
    refuse_passed_expiry,
    revoked_refusal,
    token_create,
    token_revoke,
    token_save,
    workflows_beyond,
)


class ApiTokenForm(ShownValuesForm, forms.ModelForm):
    workflows = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple,
        help_text="The workflows this token may start and read runs of. None: the token can "
                  "do nothing.")

    class Meta:
        model = ApiToken
        fields = ["name", "workflows", "rate_limit", "expires_at", "acting_user"]

    # Compared with what the page showed (audit.page_edits): what this person changed is all
    # tokens.token_save writes, a workflow another admin took away stays away.
    shown_fields = SCOPE

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk is None:
            # A new token gets the default lifetime unless the admin changes or clears it.
            self.fields["expires_at"].initial = default_expiry(clock())
        # Registered workflows, plus any the token already names (an old, unregistered one
        # stays visible rather than being silently dropped on save).
        names = sorted(set(registry.names()) | set(self.instance.workflows or []))
        self.fields["workflows"].choices = [(n, n) for n in names]

    # Who fills the form in (ApiTokenAdmin.get_form): the workflows they may give a token.
    maker = None

    def clean_workflows(self):
        chosen = sorted(set(self.cleaned_data["workflows"]))
        # The ones it had stay, whoever edits it (api.tokens.token_save's rule); the ones
        # it is saved with are judged (those this person added to the row's).
        saved = self.saved_value("workflows", chosen)
        beyond = workflows_beyond(self.maker, set(saved) - set(self.instance.workflows or []))
        if beyond:
            raise forms.ValidationError(
                f"You may not give a token {', '.join(beyond)}: a token reaches only "
                "workflows whose runs you may view.", code="workflow_beyond_maker")
        return chosen

    def clean(self):
        data = super().clean()
        # The row as it is (ApiTokenAdmin reads it FOR UPDATE): revoked since the page was
        # shown, it is refused here, in words, rather than by token_save once the form is
        # judged valid.
        if self.instance.pk is not None and \
                (refusal := revoked_refusal(self.instance)) is not None:
            raise forms.ValidationError(f"{refusal[0].upper()}{refusal[1:]}.", code="revoked")
        return data

    def clean_expires_at(self):
        expires_at = self.cleaned_data["expires_at"]
        # Only a new token: an existing one may be edited (its limit, its scope) after it
        # expired, and an admin may end one now by moving its expiry back.
        if self.instance.pk is None:
            try:
                refuse_passed_expiry(expires_at, now=clock())
            except ExpiryPassed as exc:
                raise forms.ValidationError(str(exc), code="expiry_passed") from None
        return expires_at


@admin.register(ApiToken)
class ApiTokenAdmin(RowLockedAdmin, StorableFiltersAdmin):
    form = ApiTokenForm
    list_display = ["name", "prefix", "scope", "rate_limit", "created_at", "last_used_at",
                    "expires_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["name", "prefix"]
    actions = ["revoke"]

    @admin.display(description="workflows")
    def scope(self, token):
        return ", ".join(token.workflows or []) or "(none)"

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return []
        # The name is what the audit trail records: it never changes once used.
        # So is the person it acts for: their name is in the audit records it wrote.
        return ["name", "prefix", "acting_user", "created_at", "created_by", "last_used_at",
                "revoked_at", "revoked_by"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["name", "workflows", "rate_limit", "expires_at", "acting_user"]
        return ["name", "prefix", "workflows", "rate_limit", "expires_at", "acting_user",
                "created_at",
                "created_by", "last_used_at", "revoked_at", "revoked_by"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        form.maker = request.user
        return form

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        # The one rule of whom a token may act for (api.tokens), as the field's choices: a
        # person outside them is refused on the field, with nothing written.
        if db_field.name == "acting_user":
            kwargs["queryset"] = acting_user_choices(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_delete_permission(self, request, obj=None):
        # Revoked, never deleted: the audit trail names tokens, and a name must keep
        # meaning the token that acted.
        return False

    def save_model(self, request, obj, form, change):
        # The same functions as every other caller: a new token through token_create (its
        # rules and its record in the access chain), a change of scope through token_save:
        # what the person changed on the page, no more (never its revocation nor its last
        # use, which the page read before they may have changed).
        if change:
            token_save(obj, by=request.user, changed=form.changed_data)
            return
        token, plaintext = token_create(
            name=obj.name, workflows=obj.workflows or [], rate_limit=obj.rate_limit,
            expires_at=obj.expires_at, created_by=request.user, acting_user=obj.acting_user)
        for field in ApiToken._meta.concrete_fields:
            setattr(obj, field.attname, getattr(token, field.attname))
        obj._state.adding, obj._state.db = False, token._state.db
        # Kept on this request only, for response_add to show once.
        request._api_token_plaintext = plaintext

    def response_add(self, request, obj, post_url_continue=None):
        plaintext = getattr(request, "_api_token_plaintext", None)
        if plaintext is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "title": f"API token {obj.name} created",
            "opts": self.model._meta,
            "token": obj,
            "plaintext": plaintext,
            "change_url": reverse("admin:api_apitoken_change", args=[obj.pk]),
            "list_url": reverse("admin:api_apitoken_changelist"),
            "start_url": request.build_absolute_uri(reverse("api:start_run")),
        }
        response = TemplateResponse(request, "api/token_created.html", context)
        add_never_cache_headers(response)
        patch_cache_control(response, no_store=True)
        return response

    # A change of the tokens (it stops their callers at once): Django offers an action
    # without permissions to whoever may view the list.
    @admin.action(permissions=["change"],
                  description="Revoke the selected tokens (at once, for good)")
    def revoke(self, request, queryset):
        revoked = already = 0
        for token in queryset:
            if token_revoke(token, by=request.user):
                revoked += 1
                self.log_change(request, token, "Revoked.")
            else:
                already += 1
        self.message_user(request, f"{revoked} token(s) revoked, {already} already revoked.",
                          messages.SUCCESS if revoked else messages.WARNING)


class WebhookSubscriberForm(ShownValuesForm, forms.ModelForm):
    # A URL typed without a scheme is taken as https: events are signed, not encrypted.
    url = forms.URLField(max_length=500, assume_scheme="https")
    # Typed, never shown again: a page holding it would leave it in the browser's cache and
    # history, for anyone who may view subscribers to read. Left empty, the secret stays.
    # Neither stripped nor held to a length here: subscribers.secret_problem is the rule, in
    # the words the API uses too.
    secret = forms.CharField(
        strip=False, required=False, widget=forms.PasswordInput(render_value=False),
        help_text="Signs each delivery; give it to the receiver. Not shown once saved: leave "
                  "empty to keep the current one, type a new one to replace it. A replaced "
                  "secret signs beside the new one for WEBHOOK_SECRET_OVERLAP_HOURS, while "
                  "the receiver switches.")
    end_overlap = forms.BooleanField(
        required=False, label="Stop the replaced secret signing now",
        help_text="For a secret that leaked: the one replaced (now, or earlier and still "
                  "signing) signs nothing from this save on. Receivers that still check it "
                  "refuse every delivery until they switch.")

    class Meta:
        model = WebhookSubscriber
        fields = ["name", "url", "secret", "workflows", "active"]

    # Compared with what the page showed (audit.page_edits): what this person changed is
    # all subscribers.subscriber_save writes. The secret is changed by typing one: the page
    # shows none.
    shown_fields = tuple(name for name in subscribers.EDITABLE if name != "secret")
    # A workflow another admin added or took away since the page was shown stays so beside
    # this person's (never across "every workflow", []: refused).
    listed_sets = ("workflows",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Not even in the form's initial data: an empty field is the secret kept, unchanged.
        self.initial["secret"] = ""

    def clean_url(self):
        url = self.cleaned_data["url"]
        if self.saved_value("url", url) != self.instance.url \
                and (problem := subscribers.url_problem(url)) is not None:
            raise forms.ValidationError(f"{problem[0].upper()}{problem[1:]}.", code="scheme")
        return url

    def clean_secret(self):
        secret = self.cleaned_data["secret"]
        if secret:
            if (problem := subscribers.secret_problem(secret)) is not None:
                raise forms.ValidationError(f"{problem[0].upper()}{problem[1:]}.",
                                            code="secret")
            return secret
        if self.instance.pk is None:
            raise forms.ValidationError("A new subscriber needs a secret to sign its "
                                        "deliveries with.", code="required")
        return self.instance.secret

    # Who fills the form in (WebhookSubscriberAdmin.get_form): the workflows they may give.
    maker = None

    def clean_workflows(self):
        try:
            workflows = webhooks.subscribed_workflows(self.cleaned_data["workflows"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc), code="not_a_list") from None
        # The instance still holds what is stored: the form writes to it after cleaning
        # (the URL is cleaned before this field).
        url = self.saved_value("url", self.cleaned_data.get("url", self.instance.url))
        had = subscribers.workflows_kept(self.instance, url)
        refusal = subscribers.subscription_refusal(
            self.maker, self.saved_value("workflows", workflows), had=had)
        if refusal is not None:
            raise forms.ValidationError(f"{refusal[0].upper()}{refusal[1:]}.",
                                        code="workflow_beyond_maker")
        return workflows


@admin.register(WebhookSubscriber)
class WebhookSubscriberAdmin(RowLockedAdmin, StorableFiltersAdmin):
    """Where run events are sent: every creation, change of URL, workflows, secret or active
    state, and deletion is in the access chain, in the transaction of the change. A
    subscriber with deliveries is deactivated, never deleted: its deliveries are the
    publisher's record of what was sent where (they protect it in the schema too: this page
    says why and what to do instead)."""

    form = WebhookSubscriberForm
    list_display = ["name", "shown_url", "active", "workflows", "last_event_id",
                    "last_record_id", "created_at"]
    list_filter = ["active"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["name", "url", "secret", "workflows", "active", "last_event_id",
                    "last_record_id"]
        if not self.has_change_permission(request, obj):
            # Read-only, Django would show each field's value: the secret, and credentials
            # a URL may carry. Shown as the access chain records them instead.
            return ["name", "shown_url", "shown_secret", "shown_previous_secret",
                    "workflows", "active", "last_event_id", "last_record_id"]
        return ["name", "url", "shown_secret", "secret", "shown_previous_secret",
                "end_overlap", "workflows", "active", "last_event_id", "last_record_id"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        form.maker = request.user
        return form

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return ["last_event_id", "last_record_id"]
        # The name is the subject of its records in the access chain.
        return ["name", "shown_url", "shown_secret", "shown_previous_secret",
                "last_event_id", "last_record_id"]

    @admin.display(description="URL")
    def shown_url(self, subscriber):
        return subscribers.recorded_url(subscriber.url)

    @admin.display(description="current secret")
    def shown_secret(self, subscriber):
        return _secret_told(subscriber.secret)

    @admin.display(description="replaced secret")
    def shown_previous_secret(self, subscriber):
        until = subscribers.previous_signs_until(subscriber, now=clock())
        if until is None:
            return "none signs: only the current secret does"
        return (f"{_secret_told(subscriber.previous_secret)}; signs beside the current one "
                f"until {until:%Y-%m-%d %H:%M:%S %Z}")

    def save_model(self, request, obj, form, change):
        if change:
            # What the person changed on the page, no more: the rest of `obj` was read as
            # the page was posted, and the publisher may have moved on since.
            subscribers.subscriber_save(obj, by=request.user,
                                        end_overlap=form.cleaned_data.get("end_overlap", False),
                                        changed=form.changed_data)
        else:
            subscribers.subscriber_create(obj, by=request.user)

    def get_deleted_objects(self, objs, request):
        # Django's delete page and bulk action refuse to delete what this lists as
        # protected, and show it: the subscribers that have deliveries, and what to do.
        # Listed before the cascade is collected, which would read every delivery.
        protected = [
            f"Webhook subscriber {s.name} has deliveries, the publisher's record of what "
            f"was sent where: deactivate it instead (untick Active on its page)"
            for s in objs if s.deliveries.exists()]
        if protected:
            return [str(s) for s in objs], {}, set(), protected
        return super().get_deleted_objects(objs, request)

    def delete_model(self, request, obj):
        subscribers.subscriber_delete(obj, by=request.user)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for subscriber in queryset:
                self.delete_model(request, subscriber)


def _secret_told(stored: str) -> str:
    """Enough of a stored secret to tell which it is (the receiver can hash its own), not to
    sign."""
    try:
        secret = subscribers.opened(stored)
    except UnreadableValue as exc:
        return f"cannot be opened: {exc}"
    digest = hashlib.sha256(secret.encode()).hexdigest()[:12]
    return f"{len(secret)} characters, sha256 {digest}… (never shown)"


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(IndexedSearchAdmin, ReadOnlyAdmin):
    """Each delivery with its attempts; written only by the publisher. A search names a
    delivery's id (the X-Webhook-Id a receiver got), along its unique index."""

    # A status change's event, or a step outcome's audit record.
    list_display = ["delivery_id", "subscriber", "event", "record", "status", "attempts",
                    "last_status_code", "next_attempt_at", "delivered_at"]
    list_filter = ["status", "subscriber"]
    indexed_search = (("delivery_id", UUID),)
    list_select_related = ["subscriber", "event", "record"]
    ordering = ["-id"]
    actions = ["send_again"]

    def has_send_again_permission(self, request):
        # The page is read-only (ReadOnlyAdmin), so Django's "change" would refuse everyone:
        # the model's change permission is asked directly, on every POST of the action.
        return request.user.has_perm(
            f"{self.opts.app_label}.change_{self.opts.model_name}")

    @admin.action(permissions=["send_again"], description="Send again")
    def send_again(self, request, queryset):
        # "Select all" hands over the whole filtered list: send_again takes back its first
        # SEND_AGAIN_AT_MOST failed ones (past those of a workflow no longer taken), and the
        # selection is counted no further than that.
        at_most = webhooks.SEND_AGAIN_AT_MOST
        selected = queryset.order_by()[: at_most + 1].count()
        sent = webhooks.send_again(queryset.values_list("pk", flat=True), by=request.user)
        # Counted no further than the bound, as the selection is.
        left = (str(sent.not_taken_workflow) if sent.not_taken_workflow <= at_most
                else f"more than {at_most}")
        skipped = (f"{selected - sent.taken - sent.not_taken_workflow} skipped (not failed)."
                   if selected <= at_most else "the rest of the selection skipped (not failed).")
        if sent.more:
            skipped = (f"more failed deliveries are left in the selection: {at_most} at most "
                       "are sent again at a time, choose Send again on the same list once "
                       "more for the next ones.")
        self.message_user(
            request, f"{sent.taken} failed delivery(ies) taken back to pending, due now; "
                     + (f"{left} left failed: their subscriber no longer takes their "
                        "workflow; " if sent.not_taken_workflow else "")
                     + skipped,
            messages.SUCCESS if sent.taken else messages.WARNING)
