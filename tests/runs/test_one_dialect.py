"""The database's dialect lives in one place: runs.store. Code elsewhere asks the store and
never which database it is on, so the demo's SQLite path and production's PostgreSQL path
cannot drift apart branch by branch.

Migrations (and the operations they use) are the exception: they run on the schema
editor's connection, and a migration is history, never edited once applied."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ["runs", "approvals", "audit", "archive", "api", "observability", "console", "demo"]
STORE = Path("runs/store")
MIGRATION_CODE = {Path("audit/migration_operations.py")}

# `connection.vendor` (or any `<database>.vendor` test) and the old `supported()` switch.
BRANCH = re.compile(r"""\.vendor\s*(==|!=|\bin\b)|\bvendor\s*(==|!=)\s*["']|\bsupported\(\)""")


def dialect_branches() -> list[str]:
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            relative = path.relative_to(ROOT)
            if (STORE in relative.parents or relative in MIGRATION_CODE
                    or "migrations" in relative.parts):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if BRANCH.search(line):
                    found.append(f"{relative}:{number}: {line.strip()}")
    return found


def test_no_code_outside_the_store_asks_which_database_it_is_on():
    assert dialect_branches() == [], (
        "database branches outside runs.store (give the store a method instead):\n"
        + "\n".join(dialect_branches()))


def test_the_check_finds_a_branch_where_there_is_one(tmp_path):
    assert BRANCH.search('    if connection.vendor == "postgresql":')
    assert BRANCH.search("    if schema_editor.connection.vendor != 'sqlite':")
    assert BRANCH.search("    if store.supported():")
    assert not BRANCH.search('    path("vendors", views.vendor, name="vendors"),')
    assert not BRANCH.search('    title=f"from {args.vendor}"')
