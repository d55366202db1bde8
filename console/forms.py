from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join

from audit.given_times import calendar_problem, given_time
from audit.models import AuditRecord
from runs.machine.storable import whole_number
from runs.models import ErrorClass, RunStatus, StepStatus
from runs.reads.filter_problems import run_filter_problems
from runs.reads.selectors import DEFAULT_SORT, SORTS, TIME_FIELDS, RunFilters


def _choices(values):
    return [("", "any")] + [(v, v.replace("_", " ")) for v in values]


class PlainSelect(forms.Select):
    """A select of plain (value, label) choices whose options are drawn here rather than
    through Django's widget templates, one template render per option: the filter form's
    thirty options cost 2 ms that way, a tenth of a search that finds one run."""

    def render(self, name, value, attrs=None, renderer=None):
        chosen = set(self.format_value(value))
        options = format_html_join(
            "\n", '<option value="{}"{}>{}</option>',
            ((key, " selected" if str(key) in chosen else "", label)
             for key, label in self.choices))
        return format_html('<select name="{}"{}>\n{}\n</select>', name,
                           flatatt(self.build_attrs(self.attrs, attrs)), options)


class TimeField(forms.DateTimeField):
    """A time a filter is given, read as Django reads one (without an offset, in the current
    time zone), refused as one naming no date is when its UTC value lies outside the years 1
    to 9999 (audit.given_times.calendar_problem: on the demo's SQLite every page filtering
    by it answered 500, and its export a file of its header alone), and cleaned to UTC
    (given_time: PostgreSQL refuses an offset past 15:59, which Python reads)."""

    def to_python(self, value):
        when = super().to_python(value)
        if when is None:
            return None
        if (problem := calendar_problem(when)) is not None:
            raise forms.ValidationError(f"Enter a valid date/time: {problem}.",
                                        code="invalid")
        return given_time(when)


def _time_field(**kwargs) -> TimeField:
    return TimeField(required=False, widget=forms.DateTimeInput(
        attrs={"type": "datetime-local"}), **kwargs)


class FilterForm(forms.Form):
    """A list's filter, refused as a whole when any field of it is invalid, never read as no
    filter: whoever mistyped one field would otherwise be shown every row."""

    def problems(self) -> list[str]:
        """What makes the filter invalid: each field by its name and label, with why."""
        return [(f"{name} ({self[name].label}): " if name in self.fields
                 and not self.worded(name, errors) else "")
                + " ".join(errors) for name, errors in self.errors.items()]

    def worded(self, name: str, errors) -> bool:
        """Whether `errors` are a rule's own words, which name the field themselves."""
        return False


class RunFilterForm(FilterForm):
    q = forms.CharField(required=False, label="Search",
                        widget=forms.TextInput(attrs={
                            "placeholder": "business key (or its end), key (or its first "
                                           "12 characters), reference or run id"}))
    status = forms.ChoiceField(required=False, choices=_choices(RunStatus.values),
                               widget=PlainSelect)
    workflow = forms.CharField(required=False, widget=forms.TextInput(
        attrs={"placeholder": "all or part of its name"}))
    step_status = forms.ChoiceField(required=False, label="Step status",
                                    choices=_choices(StepStatus.values), widget=PlainSelect)
    error_class = forms.ChoiceField(required=False, label="Error class",
                                    choices=_choices(ErrorClass.values), widget=PlainSelect)
    attention = forms.BooleanField(required=False, label="Needs attention")
    stuck = forms.BooleanField(required=False, label="Stuck")
    drills = forms.BooleanField(required=False, label="Drill runs too")
    time_field = forms.ChoiceField(required=False, label="Time of",
                                   choices=[(f, f) for f in TIME_FIELDS], widget=PlainSelect)
    period = forms.ChoiceField(required=False, label="In the last",
                               choices=[("", "any time"), ("1h", "hour"), ("24h", "day"),
                                        ("7d", "week")], widget=PlainSelect)
    since = _time_field(label="From")
    until = _time_field(label="Until")
    sort = forms.ChoiceField(required=False, label="Sort by", widget=PlainSelect, choices=[
        (f"{sign}{name}", f"{name} {label}") for name in SORTS
        for sign, label in (("-", "(descending)"), ("", "(ascending)"))])

    def clean(self):
        # Each error on a field, so that whoever refuses the filter (a bulk job) can say
        # which one is wrong.
        data = super().clean()
        # A status none of the runs have, a search holding a NUL: in the words GET
        # /api/runs and manage.py list_runs refuse them in (runs.reads.filter_problems).
        self._worded = run_filter_problems(status=self.data.get("status") or "",
                                           q=self.data.get("q") or "")
        for name, problem in self._worded.items():
            self.errors.pop(name, None)
            data.pop(name, None)
            self.add_error(name, problem)
        since, until = data.get("since"), data.get("until")
        if since and until and since >= until:
            self.add_error("until", "The time range is empty: From must be before Until.")
        elif data.get("period") and (since or until):
            self.add_error("period", "Choose either a period (\"In the last\") or dates "
                                     "(From, Until), not both.")
        return data

    def worded(self, name: str, errors) -> bool:
        return list(errors) == [getattr(self, "_worded", {}).get(name)]

    def given(self) -> dict[str, str]:
        """The filter as it was submitted, field by field (the value the form reads, each
        one given): what a form posting it again carries. Not cleaned_data, whose dates a
        page would print in its display format, which the form cannot read back, and
        localise, which fails for a date at the limits of the calendar."""
        return {name: self.data[name] for name in self.fields
                if self.data.get(name, "") != ""}

    def filters(self) -> RunFilters:
        data = dict(self.cleaned_data)
        data["time_field"] = data.get("time_field") or "updated"
        data["sort"] = data.get("sort") or DEFAULT_SORT
        return RunFilters(**data)

    def list_filters(self) -> RunFilters | None:
        """The filter the runs list shows: every run when none is given (an unbound form),
        None when the filter given is invalid. An invalid filter is refused, never read as
        no filter: an operator who mistyped it would see every run and might act on the
        wrong ones (problems() says what to correct)."""
        if not self.is_bound:
            return RunFilters()
        return self.filters() if self.is_valid() else None


class AuditFilterForm(FilterForm):
    actor = forms.CharField(required=False)
    # Whose records: people's (an operator's action, an approver's decision) or the
    # system's (workers, the sweeper, API tokens, commands), as each record says.
    by = forms.ChoiceField(required=False, label="By", choices=[
        ("", "anyone"), (AuditRecord.ActorKind.USER, "a person"),
        (AuditRecord.ActorKind.SYSTEM, "the system")])
    action = forms.CharField(required=False)
    # Text read by whole_number, not an IntegerField: that one reads "٣" as 3 and takes
    # more digits than an id column holds.
    run = forms.CharField(required=False)
    since = _time_field()
    until = _time_field()

    def clean_run(self) -> int | None:
        text = self.cleaned_data["run"]
        if text == "":
            return None
        number = whole_number(text)
        if not number:
            raise forms.ValidationError("Enter a run id: a whole number from 1, in the digits "
                                        "0-9.")
        return number

    def clean(self):
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since >= until:
            self.add_error("until", "The time range is empty: Since must be before Until.")
        return data

    def list_filters(self) -> dict | None:
        """The filters of the log shown: none when none is given (an unbound form), None
        when one given is invalid (problems() says which), refused as RunFilterForm's are."""
        if not self.is_bound:
            return {}
        return dict(self.cleaned_data) if self.is_valid() else None


class AccessFilterForm(AuditFilterForm):
    """The access log's filter: its records are of no run, so it has no run field, and
    refuses one given rather than showing every record as if it had filtered by it."""

    run = None

    def clean(self):
        data = super().clean()
        if self.data.get("run", "") != "":
            self.add_error(None, "run: the access log's records are of no run; leave it out.")
        return data


class LoginForm(AuthenticationForm):
    """The console's sign-in form. A username longer than any user's is refused as a wrong
    password is, before authentication: Django gives the field the user model's max_length
    without checking it, and django-axes records each failed name in a column of 255
    characters, failing on a longer one (django-axes issue 1381). The name checked is the
    normalised one (NFKC can lengthen it), the name authentication would be given."""

    # The id of the page's alert saying a sign-in was refused (templates/registration/
    # login.html), which both fields name as their description once it is; "" where the
    # page shows the refusal under no id (Django admin's).
    refusal_id = "login-error"

    def clean(self):
        username = self.cleaned_data.get("username")
        if username is not None and len(username) > self.fields["username"].max_length:
            raise self.get_invalid_login_error()
        return super().clean()

    def full_clean(self):
        super().full_clean()
        # A refused sign-in is neither field's error alone (Django marks a field invalid for
        # its own errors only): both are marked, and read with the refusal.
        if self.is_bound and self.non_field_errors():
            for name in ("username", "password"):
                attrs = self.fields[name].widget.attrs
                attrs["aria-invalid"] = "true"
                if self.refusal_id:
                    attrs["aria-describedby"] = self.refusal_id


class AdminLoginForm(LoginForm, AdminAuthenticationForm):
    """Django admin's sign-in form (staff only), with the console's refusal of a username
    no user can have."""

    refusal_id = ""


# The most runs one bulk form acts on: more than a page of the list ever offers.
BULK_MOST = 500


def selected_run_ids(texts: list[str]) -> list[int]:
    """The ids of the runs a bulk form selects (its `run` values), ascending, once each; or
    ValueError saying why the selection is refused as a whole: no run, more than BULK_MOST,
    or a value that is no id (runs.machine.storable.whole_number), which no form of the list
    posts. Acting on the rest would leave the person believing each run named was handled."""
    if not texts:
        raise ValueError("no run was selected")
    if len(texts) > BULK_MOST:
        raise ValueError(f"{len(texts)} runs were given, at most {BULK_MOST} at once")
    ids = [whole_number(text) for text in texts]
    wrong = sum(1 for n in ids if not n)
    if wrong:
        raise ValueError(f"{wrong} of the {len(texts)} runs given "
                         f"{'is' if wrong == 1 else 'are'} not a run id (a whole number from "
                         "1, in the digits 0-9)")
    return sorted(set(ids))
