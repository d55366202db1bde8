"""A long list shown a page at a time (a bulk job's outcomes, the runs of a bulk job's
request): which page of how many, and which rows of the count, counted from 1."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    """Page `number` of `pages`: rows `first` to `last` (counted from 1) of `count`."""

    number: int
    pages: int
    first: int
    last: int
    count: int

    @property
    def previous(self) -> int | None:
        return self.number - 1 if self.number > 1 else None

    @property
    def next(self) -> int | None:
        return self.number + 1 if self.number < self.pages else None


def page_window(count: int, size: int, number: int | None) -> tuple[int, int, int]:
    """(number, pages, start) of page `number` (from 1; None, or past either end: the
    nearest page) of `count` rows `size` a page; `start`, the offset of its first row."""
    pages = max(1, -(-count // size))
    number = min(max(number or 1, 1), pages)
    return number, pages, (number - 1) * size
