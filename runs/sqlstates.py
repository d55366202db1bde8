"""The SQLSTATEs by which the runtime tells what the database said, in one place for the store
(runs.store, which the transitions ask) and for what the tasks and the doors say
(runs.execution.database_outage). Nothing is imported here: manage.py reads these before
Django's apps are loaded."""

# The database answered, but would not wait: a row held by another session past lock_timeout
# (55P03), or the statement cancelled (57014: statement_timeout, pg_cancel_backend).
WOULD_NOT_WAIT = frozenset({"55P03", "57014"})

# The database answered, but rolled the transaction back for its clash with another session:
# a serialization failure (40001, under a REPEATABLE READ or SERIALIZABLE isolation a role or a
# database may set) or a deadlock (40P01).
ROLLED_BACK = frozenset({"40001", "40P01"})

# Either: the transaction under way was rolled back, nothing of it written, on a session that
# still works; trying again is right.
CLASHED = WOULD_NOT_WAIT | ROLLED_BACK
