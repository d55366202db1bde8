"""No module of runs/ or approvals/ is above 500 lines: a module that grows past it mixes
concerns (the agent's tool calls once grew into a second copy of the step machinery)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
LIMIT = 500


def test_no_module_of_runs_or_approvals_is_above_500_lines():
    too_long = {}
    for app in ("runs", "approvals"):
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            lines = len(path.read_text().splitlines())
            if lines > LIMIT:
                too_long[str(path.relative_to(ROOT))] = lines
    assert too_long == {}
