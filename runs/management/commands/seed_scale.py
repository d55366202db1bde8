"""Seed PostgreSQL with a production-sized history for the console's timings: by default
1,000,000 runs of the ten-step benchmark workflow and their 10,000,000 steps, in set-based
SQL (minutes, not hours). Runs already seeded are kept: running it again adds nothing.

The runs are seeded without audit records: their chain is empty (seq 0, audit_seal NULL),
with no head to seal (audit.head_seals). A seeded database is for timings, not a system of
record: verify_audit names its seeded runs, since every run the runtime starts is started
with its first record and a run with none is one whose chain was removed."""

from django.core.management.base import CommandError
from django.db import connection, transaction

from audit.arguments import ValuesCutShortCommand
from runs import store
from runs.machine.storable import whole_number_argument, whole_number_in_range

WORKFLOW = "bench-noop-10"
STEPS = 10

RUNS_SQL = """
INSERT INTO runs_run (workflow_id, workflow_name, workflow_version, business_key, input,
    input_hash, status, attention_reason, status_message, current_step, step_count,
    steps_done, cancel_requested, fencing_token, lease_owner, audit_seq, audit_head,
    created_at, updated_at)
SELECT wf.id, %(workflow)s, 1, 'scale:' || g, jsonb_build_object('n', g), md5(g::text),
    CASE WHEN g %% 200 = 0 THEN 'attention' WHEN g %% 211 = 0 THEN 'compensation_failed'
         WHEN g %% 53 = 0 THEN 'waiting' WHEN g %% 101 = 0 THEN 'terminated'
         ELSE 'completed' END,
    CASE WHEN g %% 200 = 0 THEN 'unknown_outcome'
         WHEN g %% 211 = 0 THEN 'compensation_failed' ELSE '' END,
    CASE WHEN g %% 200 = 0 THEN 'step-7: ReadTimeout after the request was sent' ELSE '' END,
    CASE WHEN g %% 200 = 0 THEN 'step-7' ELSE '' END, %(steps)s,
    CASE WHEN g %% 200 = 0 THEN 6 ELSE %(steps)s END, false, 1, '', 0, '',
    now() - make_interval(secs => g * 3), now() - make_interval(secs => g * 3)
FROM generate_series(%(start)s, %(stop)s) AS g,
     (SELECT id FROM runs_workflow WHERE name = %(workflow)s) AS wf
"""

STEPS_SQL = """
INSERT INTO runs_step (run_id, name, position, kind, impact, version, status,
    idempotency_key, attempt, budget_attempt_base, format_failures, lookup_failures,
    compensation_key,
    compensation_attempt, compensation_ref, remote_ref, error_class, error_message,
    lease_owner, started_at, finished_at, updated_at)
SELECT r.id, 'step-' || (p + 1), p, 'write', 'low', 1,
    CASE WHEN r.status = 'attention' AND p = 6 THEN 'unknown'
         WHEN r.status = 'attention' AND p > 6 THEN 'pending' ELSE 'succeeded' END,
    md5(r.business_key || ':' || p) || md5(p || ':' || r.business_key), 1, 0, 0, 0, '', 0, '',
    'REF-' || r.id || '-' || p,
    CASE WHEN r.status = 'attention' AND p = 6 THEN 'unknown' ELSE '' END,
    CASE WHEN r.status = 'attention' AND p = 6 THEN 'ReadTimeout after the request was sent'
         ELSE '' END, '', r.created_at, r.updated_at, r.updated_at
FROM runs_run AS r CROSS JOIN generate_series(0, %(last)s) AS p
WHERE r.workflow_name = %(workflow)s AND r.business_key LIKE 'scale:%%'
  AND r.id > %(after)s
"""


# Ten times the scale the console is measured at: some 30 GB of hot rows.
MOST_RUNS = 10_000_000


class Command(ValuesCutShortCommand):
    help = "Seed a million runs and ten million steps (PostgreSQL) for the console timings."

    def add_arguments(self, parser):
        parser.add_argument("--runs", type=whole_number_argument, default=1_000_000,
                            help=f"how many runs the database should hold (1 to {MOST_RUNS})")

    def handle(self, *args, runs, **options):
        whole_number_in_range(runs, option="--runs", low=1, high=MOST_RUNS,
                              then="ten steps a run, one statement for them all; nothing "
                                   "was done")
        if store.current().name != "postgresql":
            raise CommandError("seed_scale needs PostgreSQL (set DATABASE_URL=postgres://...)")
        with transaction.atomic(), connection.cursor() as cursor:
            # Two seeders at once would both count the same runs and collide on their keys:
            # the second waits for the first, then finds its runs.
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext('seed_scale'))")
            cursor.execute("INSERT INTO runs_workflow (name, created_at) VALUES (%s, now()) "
                           "ON CONFLICT (name) DO NOTHING", [WORKFLOW])
            cursor.execute("SELECT count(*), coalesce(max(id), 0) FROM runs_run "
                           "WHERE workflow_name = %s AND business_key LIKE 'scale:%%'",
                           [WORKFLOW])
            have, last_id = cursor.fetchone()
            if have >= runs:
                self.stdout.write(f"already seeded: {have} runs")
                return
            cursor.execute(RUNS_SQL, {"workflow": WORKFLOW, "steps": STEPS,
                                      "start": have + 1, "stop": runs})
            cursor.execute(STEPS_SQL, {"workflow": WORKFLOW, "last": STEPS - 1,
                                       "after": last_id})
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE runs_run")
            cursor.execute("ANALYZE runs_step")
        self.stdout.write(f"seeded {runs - have} runs and {(runs - have) * STEPS} steps")
