"""The console's permission rule is runs' one rule (runs.permissions), named here for the
console's modules."""

from runs.permissions import VIEW, Grant, grant_for, grants_of

__all__ = ["VIEW", "Grant", "grant_for", "grants_of"]
