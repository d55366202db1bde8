"""Who may do what, in Django admin: a page per workflow and per user listing it, a form
that grants or revokes a role on a workflow, and every permission change made through
admin recorded in the access chain (console.access).

Django's own user and group admins are replaced by subclasses whose save hooks record the
change: the admin saves a user's row in save_model and the groups and permissions in
save_related, in one transaction, so save_model reads what was there before and
save_related, once everything is saved, writes the records in that same transaction (a
signal on the many-to-many tables would see each table's change alone, without the actor
or the reason). Guardian's object-permission forms on the workflow page are wrapped the
same way. Each of these pages writes what its person changed on it, judged against what the
page showed (audit.page_edits): a deactivation, a removal from a group, from staff or
superuser status, or a permission taken away by another admin after the page was shown
stands when the page is saved.

Deleting a user or a group deletes, by cascade, every guardian object permission it held
(on workflows and on approval requests), its global permissions and its memberships: each is
recorded, read before the delete and written in its transaction (one or many, through the
bulk action alike). A group's name is read-only once it exists: approval steps, tools and the
four-eyes setting name approvers by group name ("group:finance"), the role groups are found by
name, and the access chain names a group by its name; a rename would move approval rights
to whoever next makes a group of the old name and leave the records naming a group that no
longer is, where a new group, its members moved and the old one deleted is recorded step by
step.
"""

from collections import defaultdict

from django import forms
from django.apps import apps
from django.contrib import admin, messages
from django.contrib.admin.utils import NestedObjects
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.forms import AdminPasswordChangeForm, UserChangeForm
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db import router, transaction
from django.db.models import Prefetch, prefetch_related_objects
from django.db.models.deletion import Collector
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.text import capfirst
from guardian.admin import AdminGroupObjectPermissionsForm, AdminUserObjectPermissionsForm
from guardian.models import (
    BaseGenericObjectPermission,
    GroupObjectPermissionBase,
    UserObjectPermissionBase,
)

from audit.admin import FastListAdmin, StorableFiltersAdmin
from audit.page_edits import RowLockedAdmin, ShownValuesForm
from runs.admin import WorkflowAdmin
from runs.admin_search import IP, PREFIX, IndexedSearchAdmin
from runs.machine.storable import person_text_problem
from runs.models import Workflow

from .access import (
    RoleError,
    change_role,
    group_permissions,
    lock_access,
    may_edit_user,
    password_audit_state,
    record_group_permissions,
    record_object_permissions,
    record_user_changes,
    rights_beyond,
    user_access,
    user_audit_state,
    workflow_access,
)
from .forms import AdminLoginForm
from .roles import ROLES

User = get_user_model()

# Admin's sign-in refuses a username no user can have, as the console's does.
admin.site.login_form = AdminLoginForm

REASON_HELP = "Why (kept in the access chain with the change)."


def checked_reason(reason: str) -> str:
    """A reason for the access chain, held to the rule every person's text is (an escape
    sequence or a bidirectional override would make the record read as something else
    wherever it is shown); a ValidationError saying why if it breaks it."""
    if (problem := person_text_problem(reason)) is not None:
        raise forms.ValidationError(f"The reason is {problem}; nothing was changed.")
    return reason


# The fields of a user that grant rights: only a superuser changes them in admin.
GRANTS_OF_USERS = ("is_superuser", "groups", "user_permissions")


# --- workflows: who may do what, roles, guardian's forms ------------------------------------


class RoleForm(forms.Form):
    user = forms.ModelChoiceField(queryset=User.objects.filter(is_active=True)
                                  .order_by("username"), required=False)
    group = forms.ModelChoiceField(queryset=Group.objects.order_by("name"), required=False)
    role = forms.ChoiceField(choices=[(r, f"{r}: {', '.join(c)}") for r, c in ROLES.items()])
    operation = forms.ChoiceField(choices=[("grant", "grant"), ("revoke", "revoke")])
    reason = forms.CharField(required=False, max_length=500, help_text=REASON_HELP)

    def clean_reason(self):
        return checked_reason(self.cleaned_data["reason"])

    def clean(self):
        data = super().clean()
        if bool(data.get("user")) == bool(data.get("group")):
            raise forms.ValidationError("Choose either a user or a group (one of them).")
        return data


def _audited(form_class, holder_attr: str, by):
    """Guardian's object-permission form, writing only the permissions its user ticked or
    unticked on the page (audit.page_edits) and recording what its save changed. Guardian's
    own compared the ticks posted with the permissions held when the page was posted: one
    another admin revoked after the page was shown, still ticked on it, was granted again
    by a save of another tick."""

    class Audited(ShownValuesForm, form_class):
        shown_fields = ("permissions",)

        def clean(self):
            data = super().clean()
            name = self.get_obj_perms_field_name()
            # What this person grants: the ticks they added on the page, held now or not (one
            # revoked before the save would be granted by it).
            added, _ = self.member_changes(name, self[name].data)
            if beyond := rights_beyond(by, self.obj, added):
                # On the field: guardian's group page shows no error of the form as a whole.
                self.add_error(name, f"You may grant on {self.obj} only rights you hold there "
                                     f"yourself; you do not hold {', '.join(beyond)}. Nothing "
                                     "was changed.")
            return data

        def save_obj_perms(self):
            name = self.get_obj_perms_field_name()
            with transaction.atomic():
                lock_access(self.obj)
                before = set(self.get_obj_perms_field_initial())
                # The permissions held now, with this person's ticks and unticks: guardian's
                # save then changes those alone.
                self.cleaned_data[name] = self.members_saved(name, self[name].data, before)
                super().save_obj_perms()
                record_object_permissions(holder=getattr(self, holder_attr), obj=self.obj,
                                          before=before, after=self.cleaned_data[name], by=by)

    return Audited


admin.site.unregister(Workflow)


@admin.register(Workflow)
class WorkflowAccessAdmin(WorkflowAdmin):
    list_display = ["name", "created_at", "access_link"]

    @admin.display(description="who may do what")
    def access_link(self, workflow):
        return format_html('<a href="{}">who may do what</a>',
                           reverse("admin:runs_workflow_access", args=[workflow.pk]))

    def get_urls(self):
        return [
            path("<int:object_id>/access/", self.admin_site.admin_view(self.access_view),
                 name="runs_workflow_access"),
            path("<int:object_id>/role/", self.admin_site.admin_view(self.role_view),
                 name="runs_workflow_role"),
            *super().get_urls(),
        ]

    def get_obj_perms_manage_user_form(self, request):
        return _audited(AdminUserObjectPermissionsForm, "user", request.user)

    def get_obj_perms_manage_group_form(self, request):
        return _audited(AdminGroupObjectPermissionsForm, "group", request.user)

    def access_view(self, request, object_id):
        workflow = get_object_or_404(Workflow, pk=object_id)
        if not self.has_view_permission(request, workflow):
            raise PermissionDenied
        return TemplateResponse(request, "admin/access/workflow.html", {
            **self.admin_site.each_context(request), "opts": self.model._meta,
            "title": f"Who may do what on {workflow.name}", "workflow": workflow,
            "rows": workflow_access(workflow),
            "role_url": reverse("admin:runs_workflow_role", args=[workflow.pk]),
        })

    def role_view(self, request, object_id):
        workflow = get_object_or_404(Workflow, pk=object_id)
        if not self.has_change_permission(request, workflow):
            raise PermissionDenied
        form = RoleForm(request.POST or None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                changed = change_role(workflow=workflow, role=data["role"],
                                      grant=data["operation"] == "grant", by=request.user,
                                      user=data["user"], group=data["group"],
                                      reason=data["reason"])
            except RoleError as exc:
                form.add_error(None, str(exc))
            else:
                who = data["user"] or data["group"]
                if changed:
                    done = "granted" if data["operation"] == "grant" else "revoked"
                    messages.success(request, f"Role {data['role']} {done} on "
                                              f"{workflow.name} for {who}.")
                else:
                    messages.info(request, f"Nothing changed: {who} already "
                                           f"{'had' if data['operation'] == 'grant' else 'lacked'}"
                                           f" role {data['role']} on {workflow.name}.")
                return redirect("admin:runs_workflow_access", object_id=workflow.pk)
        return TemplateResponse(request, "admin/access/role.html", {
            **self.admin_site.each_context(request), "opts": self.model._meta,
            "title": f"Grant or revoke a role on {workflow.name}", "workflow": workflow,
            "form": form,
        }, status=400 if form.errors else 200)


# --- django-axes' logs of sign-ins and failed links --------------------------------------


# How the sign-in logs are searched, each along an index axes gives its tables: a person's
# name by its start (its varchar_pattern_ops index), an address whole.
AXES_SEARCH = (("username", PREFIX), ("ip_address", IP))


def refit_axes_admins() -> None:
    """django-axes' log admins, as every list of a table that grows does here: no full count
    on each load, a filter holding a NUL refused with a message (audit.admin), newest first
    along the primary key and sorted by no other column, and nothing read from the whole
    table at each load. The logs grow with every sign-in and every forged approval link,
    which anyone can send, and axes' own admins read all of a log at each load: the distinct
    paths for a filter, the first and last times and the distinct days for the date
    hierarchy, a sort by time (no index holds it), and a search for the term anywhere in four
    columns. Here they have no filter (each one's rare value, a lock-out or a day with no
    sign-in, was found by reading the whole log) and search along indexes. Their rows are
    shown, never changed (no_change): every field is read-only, and a save wrote the row back
    as read, undoing a failed sign-in counted, or a sign-out logged, meanwhile."""
    for model in apps.get_app_config("axes").get_models():
        if not admin.site.is_registered(model):
            continue
        model_admin = admin.site.get_model_admin(model)
        if isinstance(model_admin, StorableFiltersAdmin):
            continue
        actions = {name: deleting_action(getattr(type(model_admin), name))
                   for name in model_admin.actions or ()
                   if isinstance(name, str)
                   and not hasattr(getattr(type(model_admin), name), "allowed_permissions")}
        admin.site.unregister(model)
        admin.site.register(model, type(type(model_admin).__name__,
                                         (IndexedSearchAdmin, FastListAdmin, type(model_admin)),
                                         {"list_filter": [], "date_hierarchy": None,
                                          "ordering": ["-id"],
                                          "indexed_search": AXES_SEARCH,
                                          "has_change_permission": no_change, **actions}))


def no_change(model_admin, request, obj=None) -> bool:
    """A log's row is axes' to write: no one changes it (viewing asks the view or change
    permission of the model itself, ModelAdmin.has_view_permission)."""
    return False


def deleting_action(action):
    """An action of axes' admins (its clean-up of expired attempts deletes rows) offered, and
    run, only for those who may delete the log's rows: declared without permissions, Django
    offers it to whoever may view the list, and runs it for them."""

    @admin.action(permissions=["delete"], description=action.short_description)
    def allowed(model_admin, request, queryset):
        return action(model_admin, request, queryset)

    return allowed


refit_axes_admins()


# --- users and groups: audited saves, and a user's access page -----------------------------


class AuditedUserChangeForm(ShownValuesForm, UserChangeForm):
    access_reason = forms.CharField(label="Reason", required=False, max_length=500,
                                    help_text=REASON_HELP)

    # Compared with what the page showed (audit.page_edits): a save writes what this person
    # changed, so a deactivation, or a removal from a group, from staff or superuser status,
    # that another admin made after the page was shown stands.
    shown_fields = ("username", "first_name", "last_name", "email", "is_active", "is_staff",
                    "is_superuser", "groups", "user_permissions", "last_login",
                    "date_joined")

    def clean_access_reason(self):
        return checked_reason(self.cleaned_data["access_reason"])


class PasswordOnlyForm(AdminPasswordChangeForm):
    """Admin's change-password form, writing the password column alone: the rest of the
    user is not this page's to write, whatever it read of it. Asks the reason the user's
    page asks, for the access chain (AuditedUserAdmin.construct_change_message)."""

    access_reason = forms.CharField(label="Reason", required=False, max_length=500,
                                    help_text=REASON_HELP)

    def __init__(self, user, *args, **kwargs):
        super().__init__(user, *args, **kwargs)
        self.access_before = password_audit_state(user, changed=False)

    def clean_access_reason(self):
        return checked_reason(self.cleaned_data["access_reason"])

    def save(self, commit=True):
        user = super().save(commit=False)
        if commit:
            user.save(update_fields=["password"])
        return user


admin.site.unregister(User)


@admin.register(User)
class AuditedUserAdmin(RowLockedAdmin, StorableFiltersAdmin, UserAdmin):
    form = AuditedUserChangeForm
    change_password_form = PasswordOnlyForm
    change_user_password_template = "admin/auth/user/change_password_with_reason.html"
    fieldsets = [*UserAdmin.fieldsets, ("Reason for this change", {"fields": ["access_reason"]})]
    list_display = [*UserAdmin.list_display, "access_link"]

    @admin.display(description="who may do what")
    def access_link(self, user):
        return format_html('<a href="{}">what this user may do</a>',
                           reverse("admin:auth_user_access", args=[user.pk]))

    def get_urls(self):
        return [path("<int:object_id>/access/", self.admin_site.admin_view(self.access_view),
                     name="auth_user_access"), *super().get_urls()]

    def access_view(self, request, object_id):
        user = get_object_or_404(User, pk=object_id)
        if not self.has_view_permission(request, user):
            raise PermissionDenied
        return TemplateResponse(request, "admin/access/user.html", {
            **self.admin_site.each_context(request), "opts": self.model._meta,
            "title": f"What {user.get_username()} may do", "subject": user,
            "rows": user_access(user),
        })

    def get_object(self, request, object_id, from_field=None):
        return with_permissions(super().get_object(request, object_id, from_field),
                                "user_permissions")

    def user_change_password(self, request, id, form_url=""):
        # Django's page runs in no transaction: it read the user, checked and hashed the new
        # password (a second or so), and saved the user whole, as read, so a deactivation
        # saved meanwhile by another admin was written back as "active". In a transaction,
        # its read of the user is RowLockedAdmin's, FOR UPDATE: a save of the user's page
        # waits for the change and is judged on the row as it changed.
        with transaction.atomic(using=router.db_for_write(self.model)):
            return super().user_change_password(request, id, form_url)

    def construct_change_message(self, request, form, formsets, add=False):
        # Django's change-password page calls this once the password is saved, in the
        # transaction above, and nothing else hands its view the form and who saved it.
        if isinstance(form, PasswordOnlyForm):
            record_user_changes(user=form.user, before=form.access_before,
                                after=password_audit_state(form.user, changed=True),
                                by=request.user, reason=form.cleaned_data["access_reason"])
        return super().construct_change_message(request, form, formsets, add)

    def has_change_permission(self, request, obj=None):
        # The password form asks this too: see console.access.may_edit_user.
        return super().has_change_permission(request, obj) and (
            obj is None or may_edit_user(request.user, obj))

    def has_delete_permission(self, request, obj=None):
        # Asked for each user of a bulk delete as well (Django's get_deleted_objects).
        return super().has_delete_permission(request, obj) and (
            obj is None or may_edit_user(request.user, obj))

    def get_readonly_fields(self, request, obj=None):
        # Django lets whoever may change users give any user (themselves too) superuser
        # status, any group and any permission: staff allowed to edit users would otherwise
        # hold every right there is a form away. Who may do what is a superuser's to change.
        if request.user.is_superuser:
            return super().get_readonly_fields(request, obj)
        return [*super().get_readonly_fields(request, obj), *GRANTS_OF_USERS]

    def save_model(self, request, obj, form, change):
        # Before the row is saved, as locked for this save (RowLockedAdmin): its groups and
        # permissions are still the old ones here.
        request.access_before = user_audit_state(User.objects.get(pk=obj.pk) if change else None)
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        record_user_changes(user=form.instance, before=request.access_before,
                            after=user_audit_state(form.instance), by=request.user,
                            reason=form.cleaned_data.get("access_reason", ""))

    def get_deleted_objects(self, objs, request):
        return deleted_by_kind(self, objs, request)

    def delete_model(self, request, obj):
        with transaction.atomic():
            before = user_audit_state(obj)
            held = held_object_permissions(obj)
            super().delete_model(request, obj)
            record_user_changes(user=obj, before=before, after=user_audit_state(None),
                                by=request.user, reason="user deleted")
            record_lost_object_permissions(obj, held, by=request.user, reason="user deleted")

    def delete_queryset(self, request, queryset):
        # Django's bulk delete runs in no transaction of its own.
        with transaction.atomic():
            for user in queryset:
                self.delete_model(request, user)


class AuditedGroupForm(ShownValuesForm, forms.ModelForm):
    access_reason = forms.CharField(label="Reason", required=False, max_length=500,
                                    help_text=REASON_HELP)

    # A permission another admin took from the group after the page was shown stays taken.
    shown_fields = ("permissions",)

    class Meta:
        model = Group
        fields = ["name", "permissions", "access_reason"]

    def clean_access_reason(self):
        return checked_reason(self.cleaned_data["access_reason"])


admin.site.unregister(Group)


@admin.register(Group)
class AuditedGroupAdmin(RowLockedAdmin, StorableFiltersAdmin, GroupAdmin):
    form = AuditedGroupForm

    def save_model(self, request, obj, form, change):
        request.access_before = group_permissions(Group.objects.get(pk=obj.pk)
                                                  if change else None)
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        record_group_permissions(group=form.instance, before=request.access_before,
                                 after=group_permissions(form.instance), by=request.user,
                                 reason=form.cleaned_data.get("access_reason", ""))

    def get_object(self, request, object_id, from_field=None):
        return with_permissions(super().get_object(request, object_id, from_field),
                                "permissions")

    def get_readonly_fields(self, request, obj=None):
        # Named once (see the module's docstring for why a rename is refused). What a group
        # grants is a superuser's to change, as a user's grants are (AuditedUserAdmin).
        named = [] if obj is None else ["name"]
        return named if request.user.is_superuser else [*named, "permissions"]

    def get_deleted_objects(self, objs, request):
        return deleted_by_kind(self, objs, request)

    def delete_model(self, request, obj):
        with transaction.atomic():
            reason = f"group {obj.name} deleted"
            before = group_permissions(obj)
            held = held_object_permissions(obj)
            members = member_groups(obj)
            super().delete_model(request, obj)
            record_group_permissions(group=obj, before=before, after=[], by=request.user,
                                     reason="group deleted")
            record_lost_object_permissions(obj, held, by=request.user, reason="group deleted")
            # Only the membership changed: the rest of each member's state is the same on
            # both sides, so record_user_changes writes the one record.
            unchanged = user_audit_state(None)
            for member, groups in members:
                record_user_changes(
                    user=member, before={**unchanged, "groups": groups},
                    after={**unchanged, "groups": [g for g in groups if g != obj.name]},
                    by=request.user, reason=reason)

    def delete_queryset(self, request, queryset):
        # Django's bulk delete runs in no transaction of its own.
        with transaction.atomic():
            for group in queryset:
                self.delete_model(request, group)


def with_permissions(holder, relation: str):
    """`holder` (a user or a group, or None) with its permissions read in one query, each with
    its content type. The page of one shown read-only (to staff who may only view, or the
    fields a superuser alone changes) names each permission by its content type: one query
    per permission otherwise."""
    if holder is not None:
        prefetch_related_objects([holder], Prefetch(
            relation, queryset=Permission.objects.select_related("content_type")))
    return holder


# --- what a deleted user or group takes with it ------------------------------------------


class CountedObjects(NestedObjects):
    """Django admin's collector of what a delete takes with it, leaving the rows a delete
    removes by one statement (no signal, nothing depending on them) unread: counted."""

    can_fast_delete = Collector.can_fast_delete


def deleted_by_kind(model_admin, objs, request):
    """What deleting the users or groups `objs` takes with them, for Django's delete page and
    bulk action (ModelAdmin.get_deleted_objects): each of `objs`, then how many rows of each
    kind go with it, not every row. An approver named on every request of a year holds an
    object permission on each: Django's page listed each by name, reading its request
    once per row (over a minute and a page of 100,000 lines for one user). The rights
    asked for and the rows that protect them from deletion are Django's."""
    objs = list(objs)
    collector = CountedObjects(using=router.db_for_write(model_admin.model))
    collector.collect(objs)
    counts = defaultdict(int)
    for model, instances in collector.data.items():
        counts[model] += len(instances)
    for rows in collector.fast_deletes:
        counts[rows.model] += rows.count()
    counts = {model: n for model, n in counts.items() if n}
    perms_needed = set()
    for model in counts:
        registered = model_admin.admin_site.get_model_admin(model) \
            if model_admin.admin_site.is_registered(model) else None
        if model is model_admin.model:
            # Each one asked about, as Django does (may_edit_user, for users).
            if any(not model_admin.has_delete_permission(request, obj) for obj in objs):
                perms_needed.add(model._meta.verbose_name)
        elif registered is not None and not registered.has_delete_permission(request):
            perms_needed.add(model._meta.verbose_name)
    counts.pop(model_admin.model, None)
    with_them = [f"{n:,} {model._meta.verbose_name if n == 1 else model._meta.verbose_name_plural}"
                 for model, n in sorted(counts.items(), key=lambda pair: pair[0]._meta.label)]
    to_delete = [f"{capfirst(model_admin.model._meta.verbose_name)}: {obj}" for obj in objs]
    if with_them:
        to_delete += ["With them:" if len(objs) > 1 else "With it:", with_them]
    model_count = {model_admin.model._meta.verbose_name_plural: len(objs)}
    model_count.update({model._meta.verbose_name_plural: n for model, n in counts.items()})
    protected = [f"{capfirst(obj._meta.verbose_name)}: {obj}" for obj in collector.protected]
    return to_delete, model_count, perms_needed, protected


def held_object_permissions(holder) -> list[tuple[object, list[str]]]:
    """(object, codenames) of every guardian object permission `holder` (a user or a group)
    holds, in guardian's generic tables and in the tables with a real foreign key
    (approvals' requests): what deleting the holder removes by cascade. A permission on an
    object that no longer exists grants nothing and is left out."""
    is_group = isinstance(holder, Group)
    base = GroupObjectPermissionBase if is_group else UserObjectPermissionBase
    key = "group" if is_group else "user"
    held = defaultdict(lambda: defaultdict(set))  # model -> object pk (text) -> codenames
    for model in apps.get_models():
        if not issubclass(model, base):
            continue
        rows = model.objects.filter(**{key: holder})
        if issubclass(model, BaseGenericObjectPermission):
            for type_id, pk, codename in rows.values_list(
                    "content_type_id", "object_pk", "permission__codename"):
                target = ContentType.objects.get_for_id(type_id).model_class()
                if target is not None:
                    held[target][pk].add(codename)
        else:
            target = model._meta.get_field("content_object").related_model
            for pk, codename in rows.values_list("content_object_id", "permission__codename"):
                held[target][str(pk)].add(codename)
    found = []
    for target, perms in held.items():
        for obj in target._base_manager.filter(pk__in=list(perms)):
            found.append((obj, sorted(perms[str(obj.pk)])))
    return sorted(found, key=lambda pair: (pair[0]._meta.label, str(pair[0].pk)))


def record_lost_object_permissions(holder, held, *, by, reason: str) -> None:
    for obj, codenames in held:
        record_object_permissions(holder=holder, obj=obj, before=codenames, after=[], by=by,
                                  reason=reason)


def member_groups(group) -> list[tuple[object, list[str]]]:
    """(user, names of all their groups) for each member of `group`: two queries."""
    through = User.groups.through
    members = list(User.objects.filter(groups=group).order_by("username"))
    names = defaultdict(list)
    for user_id, name in through.objects.filter(user__in=members).values_list(
            "user_id", "group__name"):
        names[user_id].append(name)
    return [(member, sorted(names[member.pk])) for member in members]
