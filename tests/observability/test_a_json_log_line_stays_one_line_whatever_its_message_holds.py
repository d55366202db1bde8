"""A JSON log line is one line for every reader: JSON leaves U+0085, U+2028 and U+2029 as they
are, and readers that split text into lines (Python's str.splitlines, log shippers) break
there, so a remote system's error text holding one would cut the line in two and forge the
second half. They are escaped as JSON escapes a newline, and read back as they were."""

import json
import logging

import pytest

from observability.logs import JsonFormatter


@pytest.mark.parametrize("separator", ["\x85", "\u2028", "\u2029", "\n", "\r"])
def test_a_message_holding_a_line_separator_is_one_line_that_reads_back_whole(separator):
    message = f'remote said: nope{separator}{{"level": "INFO", "message": "all fine"}}'
    record = logging.LogRecord("runs.execution", logging.ERROR, __file__, 1, message, (), None)

    line = JsonFormatter().format(record)

    assert line.splitlines() == [line]
    assert json.loads(line)["message"] == message
