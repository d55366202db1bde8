from django import template

register = template.Library()

# Request statuses in the stylesheet's status colours.
_BADGES = {"pending": "s-waiting", "approved": "s-succeeded", "rejected": "s-failed",
           "expired": "s-attention", "superseded": "s-skipped", "withdrawn": "s-skipped"}


@register.filter
def approval_badge(status: str) -> str:
    """The badge class for an approval request's status."""
    return _BADGES.get(status, "")


@register.filter
def approver_names(names) -> str:
    """"group:finance", "user:ann" -> "finance (group), ann"."""
    out = []
    for name in names or ():
        kind, _, value = str(name).partition(":")
        out.append(f"{value} (group)" if kind == "group" else value)
    return ", ".join(out)
