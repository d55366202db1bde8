"""A bulk job is stored before it is handed to a worker; the hand-over is a hint the
approvals sweep makes up for (stalled jobs). With the broker down it must not raise: the
console answered 500 and the API 500 for a job that had started, which a client retrying
would start a second time (a real process, against a port where no broker listens)."""

import socket

import pytest

from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_handing_a_job_over_with_the_broker_down_says_so_and_raises_nothing():
    broker = f"redis://127.0.0.1:{_closed_port()}/0"
    handing = manage("shell", "-c",
                     "from approvals.bulk_lease import hand_over; print(hand_over(987654))",
                     CELERY_BROKER_URL=broker)
    out, err = handing.communicate(timeout=60)
    assert handing.returncode == 0, err
    assert out.strip().splitlines()[-1] == "False"
    assert "bulk job 987654 not handed to a worker now" in err
    assert "the approvals sweep will" in err and "Traceback" not in err
