"""The lines of our code a call executes: a measure of the work a read or a transition does
that grows with what it is given, counted rather than timed, so that a test can tell work in
proportion to its input from work in proportion to its square."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
RUNTIME = f"{ROOT}runs{os.sep}"
NOT_OURS = (f"{ROOT}.venv{os.sep}", f"{ROOT}tests{os.sep}")


def lines_of_runtime_code(call) -> tuple[object, int]:
    """`call()`'s result and the lines of runs/ it executed."""
    return lines_executed(call, lambda name: name.startswith(RUNTIME))


def lines_of_project_code(call) -> tuple[object, int]:
    """`call()`'s result and the lines of the project's code (not its tests, not libraries)
    it executed."""
    return lines_executed(
        call, lambda name: name.startswith(ROOT) and not name.startswith(NOT_OURS))


def lines_executed(call, counted) -> tuple[object, int]:
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if counted(frame.f_code.co_filename):
            if event == "line":
                count += 1
            return trace
        return None

    sys.settrace(trace)
    try:
        result = call()
    finally:
        sys.settrace(None)
    return result, count
