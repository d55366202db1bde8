from django import forms


class DecisionForm(forms.Form):
    """Approve or reject, with a comment. decision_id is made when the page is rendered: the
    same form submitted twice carries the same id, and the second submission changes
    nothing."""

    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("reject", "Reject")])
    comment = forms.CharField(required=False, max_length=2000,
                              widget=forms.Textarea(attrs={"rows": 3}))
    decision_id = forms.UUIDField(widget=forms.HiddenInput)

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("decision") == "reject" and not cleaned.get("comment", "").strip():
            self.add_error("comment", "Say why you reject it.")
        return cleaned

    @property
    def approved(self) -> bool:
        return self.cleaned_data["decision"] == "approve"
