"""What a person changed on an admin page: judged against what the page showed them, never
against the row as it is when they post it.

Django's change form judges a field changed by comparing what was posted with the row read
as the page is posted, and saves the whole row, and every many-to-many field of the form
whole, from what was posted. A page shown before another admin's save holds that save's
fields as they were: posted back unchanged, they undid it, without a word. A person removed
from the admins' group, or deactivated, was back in it, or active again, once another admin
saved their page for a new address; a revoked API token worked again; an object permission
revoked on a workflow was granted again.

Each admin page that changes a row uses the two parts here:

- ShownValuesForm, a form mixin: the page posts back what it showed (a hidden "initial-"
  input beside each field, Django's show_hidden_initial), and the form compares with that.
  A field this person did not change is saved as the row holds it; a set (groups,
  permissions, a token's workflows) as the row holds it with the members this person added
  and without those they removed, and so a list typed in one box that the form names as a
  set (a webhook subscriber's workflows) when it was changed behind the page too; a field
  changed here and behind the page, to something else, is refused with a message, nothing
  saved.
- RowLockedAdmin, an admin mixin: the post reads the row it changes FOR UPDATE, in the
  admin's transaction of the save, so the form judges, and the save writes, the row as it
  is: a change committed while the form was judged waits, and is seen.

A post that says nothing of what was shown (a script's) is compared with the row, as
Django does."""

from collections.abc import Iterable

from django import forms
from django.core.exceptions import ValidationError
from django.db import router, transaction

# Said on a field changed here and by someone else since the page was shown.
CHANGED_BEHIND_THE_PAGE = (
    "Someone else changed this since the page was shown. Reload the page to see what it "
    "holds now, and make your change again: nothing was saved.")


class ShownMembers(forms.MultipleHiddenInput):
    """The hidden copy of a set as the page showed it, one input a member. A page that
    showed an empty set posts one empty input, so that its post still says what it showed:
    posting none, it would be read as a post that says nothing (a script's), compared with
    the row, and a member another admin added since undone."""

    def format_value(self, value):
        return super().format_value(value) or [""]

    def value_from_datadict(self, data, files, name):
        values = super().value_from_datadict(data, files, name)
        if values is None:
            return []
        if isinstance(values, str):
            values = [values]
        return [value for value in values if value != ""]


def holds_members(field: forms.Field) -> bool:
    """Whether `field` holds a set (many values, chosen each on its own)."""
    return isinstance(field, (forms.MultipleChoiceField, forms.ModelMultipleChoiceField))


def member_keys(field: forms.Field, value) -> set[str]:
    """The members of `value` (posted text, cleaned values or objects, as held by `field`)
    as text: a choice's value, an object's key."""
    prepared = field.prepare_value(value)
    if prepared is None or prepared == "":
        return set()
    if isinstance(prepared, str):
        prepared = [prepared]
    return {str(member) for member in prepared}


class ShownValuesForm:
    """A form mixin, listed before the form class: the fields named in `shown_fields` are
    compared with what the page showed. After cleaning, `cleaned_data` (and a model form's
    instance) holds what the save is to write: the row's value of each field this person
    did not change, each set the row's with this person's additions and removals
    (member_changes), and this person's value of each field they changed; a field changed
    both here and behind the page is refused (CHANGED_BEHIND_THE_PAGE). `changed_data` is
    what this person changed.

    The row is the model form's instance (or the form's initial value of a field), as read
    when the form was made: RowLockedAdmin has it read FOR UPDATE."""

    # The fields compared with what the page showed: those a save writes from the page.
    # Not a field the page never shows its value of (a secret: changed by typing one).
    shown_fields: tuple[str, ...] = ()

    # Of shown_fields, those holding a list of names typed in one box (a JSON list), saved
    # as a set when changed here and behind the page: the row's names with this person's
    # additions and without their removals (listed_members_saved). An empty list is a value
    # of its own, not a set with no member (a subscriber's [] is every workflow): a change
    # from it or to it, on either side, or a merge leaving none, is refused as another
    # field's is.
    listed_sets: tuple[str, ...] = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in self.shown_fields:
            field = self.fields.get(name)
            if field is None or field.disabled:
                continue
            if holds_members(field):
                field.hidden_widget = ShownMembers
            key = self.add_initial_prefix(name)
            said = self.is_bound and not field.hidden_widget().value_omitted_from_data(
                self.data, self.files, key)
            field.show_hidden_initial = not self.is_bound or said
            if said and key not in self.data:
                # A page shown again (with an error) posts what it showed first only when
                # the hidden input's own name was posted (django.forms.BoundField.as_widget),
                # and a split one (a date and a time) posts NAME_0 and NAME_1: shown again,
                # it would hold what was posted as what was shown, and a change of this
                # person's be taken for none on the next post.
                self.data = self.data.copy()
                self.data[key] = ""

    def is_of_a_new_row(self) -> bool:
        instance = getattr(self, "instance", None)
        return instance is not None and instance.pk is None

    def shown_data(self, name: str):
        """What the page showed of field `name`, as its hidden input posted it; the row's
        value when the post says nothing of what was shown."""
        bound = self[name]
        if bound.field.show_hidden_initial and self.is_bound:
            return bound.field.hidden_widget().value_from_datadict(
                self.data, self.files, bound.html_initial_name)
        return bound.initial

    def member_changes(self, name: str, posted: Iterable) -> tuple[set[str], set[str]]:
        """(added, removed): the members of the set `name`, as text (member_keys), this
        person ticked and unticked on the page, `posted` being what the page posted."""
        field = self.fields[name]
        shown = member_keys(field, self.shown_data(name))
        chosen = member_keys(field, posted)
        return chosen - shown, shown - chosen

    def members_saved(self, name: str, posted: Iterable, now: Iterable) -> list[str]:
        """The members the set `name` is saved with, as text: `now` (its members as they
        are) with those this person added and without those they removed."""
        field = self.fields[name]
        added, removed = self.member_changes(name, posted)
        return sorted((member_keys(field, now) - removed) | added)

    def listed_members_saved(self, name: str, posted) -> list[str] | None:
        """The names the listed set `name` (listed_sets), changed here and behind the page,
        is saved with: the row's, with those this person added to what the page showed and
        without those they removed; None when what the page showed, the row, what was
        posted or the merge is no list of names or an empty one (refused)."""
        try:
            shown = self.fields[name].to_python(self.shown_data(name))
        except ValidationError:
            return None
        lists = (shown, self[name].initial, posted)
        if not all(isinstance(value, list) and value
                   and all(isinstance(member, str) for member in value) for value in lists):
            return None
        shown, row, posted = (set(value) for value in lists)
        saved = (row - (shown - posted)) | (posted - shown)
        return sorted(saved) or None

    def saved_value(self, name: str, posted):
        """What the save writes for field `name`, posted as `posted` (cleaned): for a rule
        of a clean_ method to judge that, not a value the page showed and another admin has
        changed since."""
        if self.is_of_a_new_row():
            return posted
        field = self.fields[name]
        if holds_members(field):
            return field.clean(self.members_saved(name, posted, self[name].initial))
        if name in self.changed_data:
            if name in self.listed_sets and self.changed_behind_the_page(name) and \
                    (merged := self.listed_members_saved(name, posted)) is not None:
                return merged
            return posted
        return getattr(self.instance, name)

    def changed_behind_the_page(self, name: str) -> bool:
        """Whether the row's value of field `name` is neither what the page showed nor what
        this person posted: changed by someone else since the page was shown."""
        bound = self[name]
        if not (self.is_bound and bound.field.show_hidden_initial):
            return False  # what was shown is the row
        return bound.field.has_changed(bound.initial, self.shown_data(name)) \
            and bound.field.has_changed(bound.initial, bound.data)

    def changed_columns(self) -> list[str]:
        """The names of the model's columns this person changed: what a save of the row
        writes (Model.save's update_fields)."""
        columns = {field.name for field in self.instance._meta.concrete_fields}
        return [name for name in self.changed_data if name in columns]

    def _post_clean(self):
        # Before a model form writes cleaned_data to its instance (ModelForm._post_clean):
        # the instance is to hold what the save writes, which the access chain records.
        if not self.is_of_a_new_row():
            for name in self.shown_fields:
                field = self.fields.get(name)
                if field is None or field.disabled or name not in self.cleaned_data:
                    continue
                posted = self.cleaned_data[name]
                if not holds_members(field) and name in self.changed_data \
                        and self.changed_behind_the_page(name) and not (
                            name in self.listed_sets
                            and self.listed_members_saved(name, posted) is not None):
                    self.add_error(name, CHANGED_BEHIND_THE_PAGE)
                    continue
                try:
                    self.cleaned_data[name] = self.saved_value(name, posted)
                except ValidationError as exc:
                    self.add_error(name, exc)
        super()._post_clean()


class RowLockedAdmin:
    """An admin mixin, listed before the admin class: the post of a change page (in the
    admin's transaction of the save) reads its row FOR UPDATE. The form judges what was
    changed behind the page from that row (ShownValuesForm), and a save committed elsewhere
    while it judged would be written over by the one it judged: it waits instead, and is
    seen."""

    def get_object(self, request, object_id, from_field=None):
        obj = super().get_object(request, object_id, from_field)
        if obj is None or request.method != "POST" or not transaction.get_connection(
                router.db_for_write(self.model)).in_atomic_block:
            return obj
        # Read again, as committed once the lock is had; None if it was deleted meanwhile.
        return type(obj)._default_manager.select_for_update().filter(pk=obj.pk).first()

    def save_model(self, request, obj, form, change):
        if not change:
            super().save_model(request, obj, form, change)
            return
        # The columns this person changed, no more: the rest is the row's anyway.
        obj.save(update_fields=form.changed_columns())
