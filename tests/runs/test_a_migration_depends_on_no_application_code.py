"""A migration of runs must do later what it did when it was written, whatever the
application's code becomes: it imports Django, the standard library and operations written
for migrations (audit.migration_operations), never the runtime's functions or models; its
data changes work on the historical models apps.get_model gives."""

import ast
import sys
from importlib import import_module
from importlib.util import resolve_name
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.db import connection
from django.db.migrations.loader import MigrationLoader
from django.utils import timezone

from runs.machine import transitions
from runs.world_models import ExternalEvent

MIGRATIONS = Path(__file__).resolve().parents[2] / "runs" / "migrations"
# Made for migrations and kept stable for them, as django.db.migrations is.
MIGRATION_MODULES = ("audit.migration_operations", "runs.migrations")


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append(resolve_name("." * node.level + (node.module or ""),
                                      "runs.migrations"))
    return found


def _application_code(module: str) -> bool:
    top = module.split(".")[0]
    if top == "django" or top in sys.stdlib_module_names:
        return False
    return not any(module == m or module.startswith(m + ".") for m in MIGRATION_MODULES)


def test_no_migration_of_runs_imports_application_code():
    offending = {path.name: [m for m in _imports(path) if _application_code(m)]
                 for path in sorted(MIGRATIONS.glob("0*.py"))}
    assert {name: modules for name, modules in offending.items() if modules} == {}


@pytest.mark.django_db
def test_the_awaited_ref_backfill_runs_on_the_historical_models_of_its_migration():
    migration = import_module("runs.migrations.0043_external_event_awaited_ref")
    historical = MigrationLoader(connection).project_state(
        ("runs", "0043_external_event_awaited_ref")).apps
    now = timezone.now()
    for i, key in enumerate(["k-1", "k" * 300]):
        ExternalEvent.objects.create(workflow_name="test-payment-wait", source="psp",
                                     event_id=f"evt-{i}", event_name="payment.settled",
                                     correlation_key=key, payload={}, received_at=now)
    ExternalEvent.objects.create(workflow_name="test-payment-wait", source="psp",
                                 event_id="delivered", event_name="payment.settled",
                                 correlation_key="k-2", payload={}, received_at=now,
                                 consumed_at=now)
    ExternalEvent.objects.update(awaited_ref="")

    migration.backfill(historical, SimpleNamespace(connection=connection))
    kept = ExternalEvent.objects.filter(consumed_at__isnull=True).order_by("pk")
    # The same references the runtime writes with a kept row today.
    assert [e.awaited_ref for e in kept] == [
        transitions.awaiting_ref(e.event_name, e.correlation_key) for e in kept]
    assert ExternalEvent.objects.get(event_id="delivered").awaited_ref == ""
