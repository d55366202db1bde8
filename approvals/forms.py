import uuid

from django import forms
from django.core.validators import MaxLengthValidator, ProhibitNullCharactersValidator

from runs.machine.storable import PERSON_TEXT_MAX

from .decisions import decision_refusal

# What a refused form is told, field by field: the decision and its id come from the page
# (buttons, a hidden field), so a person can only have sent them wrong by a broken or
# altered page, and Django's own "This field is required." would name a field they never saw.
DECISION_WRONG = ("The decision was missing or not one of approve / reject; nothing was "
                  "recorded.")
DECISION_ID_WRONG = ("The form was incomplete (its decision id is missing or altered); "
                     "nothing was recorded. Decide again from the request page.")


class DecisionForm(forms.Form):
    """Approve or reject, with a comment. decision_id is made when the page is rendered: the
    same form submitted twice carries the same id, and the second submission changes
    nothing."""

    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    comment = forms.CharField(required=False, max_length=PERSON_TEXT_MAX,
                              widget=forms.Textarea(attrs={"rows": 3}))
    decision_id = forms.UUIDField(widget=forms.HiddenInput)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A NUL in the comment, or one too long, is decision_refusal's to word, as it is at
        # the API and the command line, not Django's "Null characters are not allowed." or
        # "Ensure this value has at most ..." (the field's maxlength stays on the page).
        field = self.fields["comment"]
        field.validators = [v for v in field.validators if not isinstance(
            v, ProhibitNullCharactersValidator | MaxLengthValidator)]

    def clean(self):
        cleaned = super().clean()
        # A comment refused already (too long) has its own error.
        if cleaned.get("decision") in ("approve", "reject") and "comment" in cleaned:
            refusal = decision_refusal(approved=cleaned["decision"] == "approve",
                                       comment=cleaned["comment"])
            if refusal is not None:
                self.add_error("comment", refusal)
        return cleaned

    @property
    def approved(self) -> bool:
        return self.cleaned_data["decision"] == "approve"

    def refusal(self) -> list[str]:
        """What was wrong with the submitted form, a sentence each, for the page that
        refuses it (whether or not it shows the form again)."""
        said = []
        if "decision" in self.errors:
            said.append(DECISION_WRONG)
        if "decision_id" in self.errors:
            said.append(DECISION_ID_WRONG)
        for error in self.errors.get("comment", []):
            said.append(f"{error} Nothing was recorded.")
        said.extend(f"{error} Nothing was recorded." for error in self.non_field_errors())
        return said

    def renew_decision_id(self) -> None:
        """Give the form shown again a new decision id in place of a missing or altered
        one, which the person can neither see nor fix: deciding from it then works. A
        valid id is kept, so that the same decision sent again is still recognised."""
        if self.is_bound and "decision_id" in self.errors:
            self.data = self.data.copy()
            self.data["decision_id"] = str(uuid.uuid4())
