"""Refuse migrations that would lock or rewrite a big table (run by `make test`).

A year of work puts millions of rows in runs_run, runs_step, runs_runevent and
audit_auditrecord. On such a table a plain CREATE INDEX blocks writes for the length of the
build, a column type change or a volatile default rewrites the table under an exclusive
lock, and SET NOT NULL, a CHECK or a foreign key scans it under one: the runtime stops
while the migration runs. This command lints the SQL of every migration (sqlmigrate) with
django-migration-linter, plus the checks below that it lacks, and fails on:

- CREATE INDEX / DROP INDEX / REINDEX without CONCURRENTLY (use
  audit.migration_operations.AddIndexConcurrently, or RemoveIndexConcurrently, in a
  migration with `atomic = False`), and unique constraints added to an existing table;
- ALTER COLUMN ... TYPE (a rewrite, unless binary-coercible: decide, then ignore by name);
- a NOT NULL column without a database default (`db_default`, kept by Django, where a
  Python `default` is dropped after the ADD COLUMN), and SET NOT NULL;
- a column whose default is volatile (gen_random_uuid(), random(), clock_timestamp(), a
  sequence, an identity or a stored generated column): every row is rewritten;
- a CHECK or FOREIGN KEY constraint added to an existing table without NOT VALID.

It holds for every table, not only the big ones: doing it right costs nothing on a small
table, and a small table does not stay small (the archive's will not). A table created by
the same migration is exempt: it is empty. A migration that is safe despite a finding
(e.g. a type change PostgreSQL does without a rewrite) goes in SAFE_DESPITE_FINDINGS with
the reason.

It reads migration files and writes nothing; sqlmigrate needs a connection to quote
values, so it runs against any database of the server (`make test` gives it `postgres`).
"""

import logging
import re
from pathlib import Path

from django.conf import settings
from django.core.management.base import CommandError

from audit.arguments import ValuesCutShortCommand
from audit.quoting import quoted

# The migrations written before the lock rules (issue 13), excluded by name. They were
# applied when the tables were new or small, on every database that has them, and
# changing an applied migration changes nothing on such a database; several of them
# would not pass (plain CREATE INDEX in audit 0003 and runs 0002/0006/0007, NOT NULL
# columns in runs 0002/0009, the demo's dropped stand-in tables in demo 0002). Every
# later migration, in any app of this project (runs 0012 on, and every new app), is
# linted. Third-party apps' migrations (guardian, axes, django.contrib) are not ours to
# change and are not linted.
BEFORE_LOCK_RULES = frozenset({
    ("api", "0001_initial"), ("api", "0002_webhooks"), ("api", "0003_token_expiry"),
    ("approvals", "0001_initial"),
    ("audit", "0001_initial"), ("audit", "0002_append_only_trigger"),
    ("audit", "0003_lean_indexes"),
    ("console", "0001_roles"), ("console", "0002_approvers_view_runs"),
    ("demo", "0001_initial"), ("demo", "0002_drop_standins"),
    ("sandbox", "0001_initial"), ("sandbox", "0002_queue_fault_permission"),
    ("runs", "0001_initial"), ("runs", "0002_compensation"), ("runs", "0003_lean_indexes"),
    ("runs", "0004_fillfactor"), ("runs", "0005_approval_rejected"),
    ("runs", "0006_runs_list_index"), ("runs", "0007_step_error_index"),
    ("runs", "0008_run_events"), ("runs", "0009_safety_rules"),
    ("runs", "0010_step_intended_action"), ("runs", "0011_step_outcome_events"),
})

# (app_label, migration name): why it is safe although the linter has a finding.
SAFE_DESPITE_FINDINGS: dict[tuple[str, str], str] = {
    ("runs", "0032_agent_turn_and_tool_call_generation"):
        "its unique indexes are built CONCURRENTLY (writes go on) before the old ones go; "
        "ADD_UNIQUE does not tell that from a CREATE UNIQUE INDEX that blocks them",
    ("api", "0006_one_delivery_per_record"):
        "its one operation builds the unique index CONCURRENTLY (writes go on); ADD_UNIQUE "
        "does not tell that from a CREATE UNIQUE INDEX that blocks them",
    ("approvals", "0004_bulk_job_start_key"):
        "its partial unique index is built CONCURRENTLY (writes go on), after a column with "
        "a constant default; ADD_UNIQUE does not tell that from a blocking one",
    ("api", "0012_subscriber_secrets_sealed"):
        "it widens a varchar (128 to 400), which PostgreSQL does without a rewrite or a "
        "scan; its data change reads the few subscriber rows with the historical model",
}

# django-migration-linter's PostgreSQL checks report these as warnings; here they fail.
LOCKING_WARNINGS = ["CREATE_INDEX", "CREATE_INDEX_EXCLUSIVE", "DROP_INDEX", "REINDEX"]

_TABLE = r'"?(\w+)"?'
_VOLATILE = re.compile(
    r"ADD COLUMN .*(DEFAULT .*\b(GEN_RANDOM_UUID|RANDOM|CLOCK_TIMESTAMP|TIMEOFDAY|"
    r"UUID_GENERATE_\w+|NEXTVAL)\s*\(|\b(BIG|SMALL)?SERIAL\b|GENERATED .*IDENTITY|"
    r"GENERATED ALWAYS AS .* STORED)", re.IGNORECASE)
_VALIDATED_CONSTRAINT = re.compile(
    rf"ALTER TABLE {_TABLE} ADD CONSTRAINT .*\b(CHECK|FOREIGN KEY)\b", re.IGNORECASE)


def _created(table: str, statements: list[str]) -> bool:
    return any(re.match(rf'CREATE TABLE "?{table}"?\W', s) for s in statements)


def has_volatile_default(statements: list[str], **kwargs) -> bool:
    for sql in statements:
        match = re.match(rf"ALTER TABLE {_TABLE} ", sql)
        if match and _VOLATILE.search(sql) and not _created(match.group(1), statements):
            return True
    return False


def has_validated_constraint(statements: list[str], **kwargs) -> bool:
    for sql in statements:
        match = _VALIDATED_CONSTRAINT.search(sql)
        if match and "NOT VALID" not in sql.upper() and not _created(match.group(1),
                                                                      statements):
            return True
    return False


def _project_apps() -> list[str]:
    """The labels of this project's apps (under BASE_DIR, not installed packages)."""
    from django.apps import apps

    base = Path(settings.BASE_DIR).resolve()
    return [config.label for config in apps.get_app_configs()
            if Path(config.path).resolve().is_relative_to(base)
            and ".venv" not in Path(config.path).parts]


def lint(*, app_labels: list[str] | None = None, database: str = "default",
         stdout=None) -> bool:
    """Lint the migrations of `app_labels` (default: every app of the project); print a
    line per migration and its findings; True when none fails."""
    try:
        from django_migration_linter import MigrationLinter
        from django_migration_linter.sql_analyser.base import Check, CheckMode, CheckType
        from django_migration_linter.sql_analyser.postgresql import PostgresqlAnalyser
    except ImportError as exc:  # a development dependency
        raise CommandError("django-migration-linter is missing: pip install -e '.[dev]'") \
            from exc

    class Analyser(PostgresqlAnalyser):
        migration_checks = PostgresqlAnalyser.migration_checks + [
            Check(code="VOLATILE_DEFAULT", fn=has_volatile_default,
                  message="a column with a volatile default rewrites the table",
                  mode=CheckMode.TRANSACTION, type=CheckType.ERROR),
            Check(code="VALIDATED_CONSTRAINT", fn=has_validated_constraint,
                  message="CHECK / FOREIGN KEY on an existing table scans it under lock: "
                          "add it NOT VALID, VALIDATE CONSTRAINT in a later migration",
                  mode=CheckMode.TRANSACTION, type=CheckType.ERROR),
        ]

    labels = set(app_labels or _project_apps())
    # It logs each sqlmigrate call at INFO; the lines printed below say the same.
    logging.getLogger("django_migration_linter").setLevel(logging.WARNING)

    class Linter(MigrationLinter):
        def should_ignore_migration(self, app_label, migration_name, operations=(),
                                    is_initial=False):
            return (app_label not in labels
                    or (app_label, migration_name) in BEFORE_LOCK_RULES
                    or (app_label, migration_name) in SAFE_DESPITE_FINDINGS
                    or super().should_ignore_migration(app_label, migration_name,
                                                       operations, is_initial))

        def print_linting_msg(self, app_label, migration_name, msg, lint_result):
            # Only the migrations linted: the excluded ones are listed above.
            if lint_result.value != "ignore" and stdout is not None:
                stdout.write(f"migration {app_label}.{migration_name}: {msg}\n")

        def print_errors(self, errors):
            for error in errors if stdout is not None else ():
                where = f" ({error.table}.{error.column})" if error.table else ""
                stdout.write(f"    {error.code}: {error.message}{where}\n")

        print_warnings = print_errors

    linter = Linter(no_cache=True, database=database, no_output=True,
                    warnings_as_errors_tests=LOCKING_WARNINGS)
    linter.sql_analyser_class = Analyser
    linter.lint_all_migrations()
    if stdout is not None:
        stdout.write(f"migrations linted: {linter.nb_total - linter.nb_ignored}, "
                     f"failing: {linter.nb_erroneous}\n")
    return not linter.has_errors


class Command(ValuesCutShortCommand):
    help = "Fail on migrations that would lock or rewrite a big table (see the module)."
    # It reads migrations, not models: the models' checks are the test suite's business.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("app_label", nargs="*",
                            help="only these apps (default: every app of the project)")

    def handle(self, *args, app_label=(), **options):
        # A label that lints nothing would print "failing: 0" and pass a CI gate.
        from django.apps import apps

        known = {config.label for config in apps.get_app_configs()}
        ours = _project_apps()
        unknown = sorted(set(app_label) - known)
        if unknown:
            # Quoted as Python writes them: an empty label, or one with a space or a line
            # break in it, is seen for what it is.
            raise CommandError(f"unknown app label(s): {', '.join(map(quoted, unknown))}; the "
                               f"project's apps: {', '.join(sorted(ours))}")
        third_party = sorted(set(app_label) - set(ours))
        if third_party:
            raise CommandError(
                f"not an app of this project: {', '.join(third_party)} (third-party apps' "
                "migrations are not ours to change and are not linted); the project's apps: "
                f"{', '.join(sorted(ours))}")
        if not lint(app_labels=list(app_label) or None, stdout=self.stdout):
            raise CommandError("a migration would lock or rewrite a table (see above)")
