"""Before/after of an audit record as rows a person can scan."""

from dataclasses import dataclass


@dataclass(frozen=True)
class DiffRow:
    key: str
    before: object
    after: object

    @property
    def changed(self) -> bool:
        return self.before != self.after


def diff_rows(before: dict, after: dict) -> list[DiffRow]:
    """One row per key present before or after, in a stable order."""
    before, after = before or {}, after or {}
    keys = list(dict.fromkeys([*before, *after]))
    return [DiffRow(k, before.get(k, ""), after.get(k, "")) for k in keys]
