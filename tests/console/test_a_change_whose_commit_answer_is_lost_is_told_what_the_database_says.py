"""A person's change whose connection is cut as its COMMIT is under way is told what became of
it, as PostgreSQL answers when asked afterwards on a new connection (the transaction's id,
read before the COMMIT: runs.execution.lost_commit), at each door: the console's page, the
API and manage.py.

The link between the process and PostgreSQL runs through a TCP forwarder of the test's,
which cuts it at the COMMIT: once the server has committed and answered (the answer lost:
"it was done"), or as the COMMIT is sent (the server never has it: "it was not done, try
again"). Only where the database cannot be asked (the link stays cut) is it still "it may
have been done". In each case the action stands once or not at all: one audit record, never
two, and done again where told so, it is done once."""

import json

import pytest
from django.core.management import call_command
from django.db import connection

from api.tokens import token_create
from audit.models import AuditRecord
from console.entry import execute_or_exit
from runs.models import Run, RunStatus
from tests import cuttable_proxy

pytestmark = pytest.mark.django_db(transaction=True)

DONE, NOT_DONE, MAYBE = "done", "not done", "maybe"
# How the link is cut at the COMMIT for each case: (the COMMIT reaches the server, the
# link stays cut so that nothing can ask afterwards).
CUTS = {DONE: (True, False), NOT_DONE: (False, False), MAYBE: (True, True)}


@pytest.fixture
def database_behind_a_cuttable_link():
    with cuttable_proxy.database_behind_a_cuttable_link() as proxy:
        yield proxy


def terminated(run) -> int:
    return AuditRecord.objects.filter(run=run, action="terminated").count()


def through_the_api(client, run, operator) -> tuple[str, int, str | None]:
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=operator)
    client.raise_request_exception = False

    def send():
        response = client.post(f"/api/runs/{run.pk}/actions/terminate",
                               json.dumps({"reason": "stop it"}),
                               content_type="application/json",
                               HTTP_AUTHORIZATION=f"Bearer {plaintext}")
        if response.status_code == 503:
            assert response.json()["error"] in ("database_unavailable", "done_answer_lost")
            return (response.json()["detail"] + " code:" + response.json()["error"],
                    503, response.get("Retry-After"))
        return response.content.decode(), response.status_code, None

    return send


def on_the_page(client_for, run, operator):
    client = client_for(operator)
    client.raise_request_exception = False

    def send():
        seen = Run.objects.get(pk=run.pk).audit_seq
        response = client.post(f"/runs/{run.pk}/terminate/",
                               {"reason": "stop it", "seen": str(seen)})
        return response.content.decode(), response.status_code, response.get("Retry-After")

    return send


def at_the_command_line(capsys):
    def send():
        code = 0
        try:
            execute_or_exit("manage.py", ["manage.py", "run_action", str(run_id[0]),
                                          "terminate", "--user", "olga", "--reason",
                                          "stop it"])
        except SystemExit as exit_status:
            code = exit_status.code
        said = capsys.readouterr().err.strip().splitlines()
        return "\n".join(said), code, None

    run_id: list[int] = []
    return send, run_id


@pytest.mark.parametrize("case", [DONE, NOT_DONE, MAYBE])
def test_the_api_says_what_the_database_says_of_a_terminate_whose_commit_lost_its_link(
        case, operator, stuck_run, client, database_behind_a_cuttable_link):
    proxy = database_behind_a_cuttable_link
    send = through_the_api(client, stuck_run, operator)
    proxy.lose_next_commit(reaches_server=CUTS[case][0], stay_cut=CUTS[case][1])
    detail, status, retry_after = send()
    proxy.restore()
    assert proxy.commits_lost == (["sent"] if case == NOT_DONE else ["answered"])
    assert status == 503, detail
    if case == DONE:
        assert "it was done" in detail and "code:done_answer_lost" in detail
        assert "may have been done" not in detail and retry_after is None
    elif case == NOT_DONE:
        assert "it was not done; try again" in detail and "code:database_unavailable" in detail
        assert retry_after == "30"
    else:
        assert "may have been done" in detail and "it was done" not in detail
    _stands_once_whatever_is_done_next(case, stuck_run, send, done_again_status=200)


@pytest.mark.parametrize("case", [DONE, NOT_DONE, MAYBE])
def test_the_page_says_what_the_database_says_of_a_terminate_whose_commit_lost_its_link(
        case, operator, stuck_run, client_for, database_behind_a_cuttable_link):
    proxy = database_behind_a_cuttable_link
    send = on_the_page(client_for, stuck_run, operator)
    proxy.lose_next_commit(reaches_server=CUTS[case][0], stay_cut=CUTS[case][1])
    page, status, retry_after = send()
    proxy.restore()
    assert proxy.commits_lost == (["sent"] if case == NOT_DONE else ["answered"])
    assert status == 503
    told = {DONE: "Asked afterwards, the database says it committed it: it was done",
            NOT_DONE: "the database says it did not commit it: nothing you asked for was done",
            MAYBE: "so it cannot tell whether the database kept it"}
    for other, words in told.items():
        assert (words in page) == (other == case), (other, page)
    assert (retry_after is None) == (case == DONE)
    _stands_once_whatever_is_done_next(case, stuck_run, send, done_again_status=302)


@pytest.mark.parametrize("case", [DONE, NOT_DONE, MAYBE])
def test_the_command_says_what_the_database_says_of_a_terminate_whose_commit_lost_its_link(
        case, operator, stuck_run, capsys, database_behind_a_cuttable_link):
    proxy = database_behind_a_cuttable_link
    send, run_id = at_the_command_line(capsys)
    run_id.append(stuck_run.pk)
    proxy.lose_next_commit(reaches_server=CUTS[case][0], stay_cut=CUTS[case][1])
    said, code, _ = send()
    proxy.restore()
    assert proxy.commits_lost == (["sent"] if case == NOT_DONE else ["answered"])
    assert len(said.splitlines()) == 1, said
    assert "manage.py run_action: the connection to the database was lost as the command's " \
           "change was committed" in said
    if case == DONE:
        assert "the database says it committed it: it was done" in said and code == 0
    elif case == NOT_DONE:
        assert "the database says it did not commit it: it was not done; run the command " \
               "again" in said and code == 1
    else:
        assert "it may have been done" in said and code == 1
        assert "it was done" not in said and "not done" not in said
    _stands_once_whatever_is_done_next(case, stuck_run, send, done_again_status=0)


def _stands_once_whatever_is_done_next(case, run, send, *, done_again_status):
    """What the person was told is what stands; done again, it is done once."""
    # The cut session's transaction has been settled by the server by now: the "may have
    # been done" one committed (its COMMIT reached the server), the one never sent did not.
    connection.close()
    expected = 0 if case == NOT_DONE else 1
    assert terminated(run) == expected
    assert Run.objects.get(pk=run.pk).status == \
        (RunStatus.ATTENTION if case == NOT_DONE else RunStatus.TERMINATED)
    _, status, _ = send()
    if case == NOT_DONE:
        # Told to try again, the person does: it is done now, once.
        assert status == done_again_status
    assert terminated(run) == 1
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    call_command("verify_audit")


def test_a_commit_lost_where_the_server_never_learns_the_link_went_is_told_not_done(
        operator, stuck_run, client, database_behind_a_cuttable_link):
    """The server's end of the link stays open: the session waits in its transaction, which
    pg_xact_status says is "in progress". It can no longer commit (its client is gone), so
    the door ends that session, by its pid and its transaction, and tells "not done"."""
    proxy = database_behind_a_cuttable_link
    send = through_the_api(client, stuck_run, operator)
    proxy.lose_next_commit(reaches_server=False, server_told=False)
    detail, status, retry_after = send()
    assert proxy.commits_lost == ["sent"]
    assert (status, retry_after) == (503, "30")
    assert "the database says it did not commit it: it was not done; try again" in detail
    _stands_once_whatever_is_done_next(NOT_DONE, stuck_run, send, done_again_status=200)
