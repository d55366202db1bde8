from django import forms

from runs.models import ErrorClass, RunStatus, StepStatus
from runs.selectors import RunFilters


def _choices(values):
    return [("", "any")] + [(v, v.replace("_", " ")) for v in values]


class RunFilterForm(forms.Form):
    q = forms.CharField(required=False, label="Search",
                        widget=forms.TextInput(attrs={
                            "placeholder": "business key, idempotency key or remote ref"}))
    status = forms.ChoiceField(required=False, choices=_choices(RunStatus.values))
    workflow = forms.CharField(required=False)
    step_status = forms.ChoiceField(required=False, label="Step status",
                                    choices=_choices(StepStatus.values))
    error_class = forms.ChoiceField(required=False, label="Error class",
                                    choices=_choices(ErrorClass.values))
    attention = forms.BooleanField(required=False, label="Needs attention")
    stuck = forms.BooleanField(required=False, label="Stuck")

    def filters(self) -> RunFilters:
        return RunFilters(**self.cleaned_data)


class AuditFilterForm(forms.Form):
    actor = forms.CharField(required=False)
    action = forms.CharField(required=False)
    run = forms.IntegerField(required=False, min_value=1)
    since = forms.DateTimeField(required=False, widget=forms.DateTimeInput(
        attrs={"type": "datetime-local"}))
    until = forms.DateTimeField(required=False, widget=forms.DateTimeInput(
        attrs={"type": "datetime-local"}))
