"""Migration operations that a big database survives.

AddIndexConcurrently builds an index with CREATE INDEX CONCURRENTLY on PostgreSQL: writes to
the table go on during the build (a plain CREATE INDEX blocks them for as long as it takes,
minutes on the runs or steps table of a year of work). Migrations using it must say
`atomic = False`. Other databases (SQLite, the demo's) build the index the ordinary way:
nobody writes to a demo while it migrates.

The module lives in audit, the lowest of the project's apps, so that the migrations of every
app (audit's own included) may use it.
"""

from django.contrib.postgres import operations as postgres
from django.db.migrations.operations import AddConstraint, AddIndex, AlterField, RemoveIndex
from django.db.migrations.operations.base import Operation


class AddIndexConcurrently(postgres.AddIndexConcurrently):
    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)


class RemoveIndexConcurrently(postgres.RemoveIndexConcurrently):
    """DROP INDEX CONCURRENTLY on PostgreSQL (no lock that blocks writes); the ordinary
    removal elsewhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        return RemoveIndex.database_forwards(self, app_label, schema_editor, from_state,
                                             to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "postgresql":
            return super().database_backwards(app_label, schema_editor, from_state, to_state)
        return RemoveIndex.database_backwards(self, app_label, schema_editor, from_state,
                                              to_state)


class AddUniqueConstraintConcurrently(AddConstraint):
    """A unique constraint whose index is built with CREATE UNIQUE INDEX CONCURRENTLY on
    PostgreSQL (a plain one then adopts that index); the ordinary way elsewhere.
    `atomic = False` in the migration, as for AddIndexConcurrently."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.constraint.condition is None:
            # A plain unique constraint is an ALTER TABLE that builds its index under a
            # lock: build the index concurrently, then make it the constraint (a catalog
            # change).
            quote = schema_editor.quote_name
            table, name = quote(model._meta.db_table), quote(self.constraint.name)
            columns = ", ".join(quote(model._meta.get_field(f).column)
                                for f in self.constraint.fields)
            schema_editor.execute(f"CREATE UNIQUE INDEX CONCURRENTLY {name} ON {table} "
                                  f"({columns})")
            schema_editor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE "
                                  f"USING INDEX {name}")
            return
        sql = str(self.constraint.create_sql(model, schema_editor))
        schema_editor.execute(sql.replace("CREATE UNIQUE INDEX", "CREATE UNIQUE INDEX "
                                          "CONCURRENTLY", 1))


class AlterFieldToNullable(AlterField):
    """A column made nullable, and nothing else: on PostgreSQL one DROP NOT NULL (a catalog
    change). Django's AlterField of a foreign key also drops and re-adds its constraint,
    which scans the table under a lock; the ordinary alteration elsewhere."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor != "postgresql":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        quote = schema_editor.quote_name
        schema_editor.execute(f"ALTER TABLE {quote(model._meta.db_table)} ALTER COLUMN "
                              f"{quote(model._meta.get_field(self.name).column)} DROP NOT NULL")


class LockWaitAtMost(Operation):
    """The statements after it in its migration (which must be atomic) wait at most
    `seconds` for a lock, on PostgreSQL; nothing elsewhere. An ALTER TABLE takes its
    table's ACCESS EXCLUSIVE lock for an instant, but waits for it behind any transaction
    that touched the table, and every later statement on the table, the runtime's, waits
    behind the ALTER: a session left idle in a transaction would stall the previous
    release's work for as long as it is left. Past the bound the migration is rolled back
    whole and `migrate` says the database would not wait: run it again. A lock_timeout the
    session already has (PGOPTIONS) is kept."""

    reversible = True

    def __init__(self, seconds: float):
        self.seconds = seconds

    def deconstruct(self):
        return self.__class__.__qualname__, [], {"seconds": self.seconds}

    def state_forwards(self, app_label, state):
        pass

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        self._bound(schema_editor)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        self._bound(schema_editor)

    def describe(self):
        return f"Wait at most {self.seconds:g} s for a lock"

    def _bound(self, schema_editor):
        if schema_editor.connection.vendor != "postgresql":
            return
        if not schema_editor.connection.in_atomic_block:
            raise ValueError("LockWaitAtMost bounds the statements of one transaction: its "
                             "migration must be atomic")
        schema_editor.execute(
            "SELECT set_config('lock_timeout', %s, true) "
            "WHERE current_setting('lock_timeout') = '0'",
            [f"{round(self.seconds * 1000)}ms"])
