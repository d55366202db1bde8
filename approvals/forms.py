from django import forms

from runs.machine.storable import PERSON_TEXT_MAX

from .decisions import decision_refusal


class DecisionForm(forms.Form):
    """Approve or reject, with a comment. decision_id is made when the page is rendered: the
    same form submitted twice carries the same id, and the second submission changes
    nothing."""

    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    comment = forms.CharField(required=False, max_length=PERSON_TEXT_MAX,
                              widget=forms.Textarea(attrs={"rows": 3}))
    decision_id = forms.UUIDField(widget=forms.HiddenInput)

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
