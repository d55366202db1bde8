"""The transaction id a lost COMMIT is asked about by (runs.execution.lost_commit) costs a
round trip per commit: it is read on the commits of a person's change at a door (here a
terminate posted on the console), never on a worker's checkpoints, whose commits stay one
round trip each (the worker settles an effect by its key), nor on a page that is only read.
Seen in the bytes the process sends PostgreSQL, through a forwarder of the test's."""

from django.db import connection

from runs.execution import executor
from runs.models import Run, RunStatus
from tests.cuttable_proxy import database_behind_a_cuttable_link
from tests.factories import new_run, place

ID_READ = b"pg_current_xact_id_if_assigned"
COMMIT = b"COMMIT\x00"


def test_a_workers_steps_and_a_page_read_no_transaction_id_and_a_persons_change_does(
        operator, client_for, transactional_db):
    client = client_for(operator)
    with database_behind_a_cuttable_link() as proxy:
        # The change first: this thread's connection has served a door when the worker's
        # steps and the page come after it.
        stuck = place(new_run(wake=False), status=RunStatus.ATTENTION)
        run = new_run(wake=False)
        proxy.sent = bytearray()
        response = client.post(f"/runs/{stuck.pk}/terminate/",
                               {"reason": "stop it", "seen": str(stuck.audit_seq)})
        change_sent, proxy.sent = bytes(proxy.sent), bytearray()

        executor.advance_run(run.pk, worker="w1")
        worker_sent, proxy.sent = bytes(proxy.sent), bytearray()
        assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED

        assert client.get(f"/runs/{run.pk}/").status_code == 200
        page_sent = bytes(proxy.sent)
    connection.close()

    assert response.status_code == 302, response.content
    assert Run.objects.get(pk=stuck.pk).status == RunStatus.TERMINATED
    # Its checkpoints were seen (on PostgreSQL most are one statement each, committed as
    # they run; the others end in a COMMIT).
    assert worker_sent.count(b"runs_step") >= 3 and COMMIT in worker_sent
    assert ID_READ not in worker_sent
    assert ID_READ not in page_sent
    assert change_sent.count(ID_READ) == change_sent.count(COMMIT) >= 1
