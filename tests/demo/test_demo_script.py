"""bin/demo (what `make demo` runs): a busy port stops it before it starts anything."""

import os
import socket
import subprocess

import pytest

from tests.processes import ROOT, child_env


@pytest.fixture
def stranger():
    """Another server listening on a port of its own."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.setblocking(False)
        yield listener


def test_a_busy_port_stops_the_demo_before_anything_starts(stranger, tmp_path):
    port = stranger.getsockname()[1]
    var = tmp_path / "var"
    demo = subprocess.Popen(
        [str(ROOT / "bin" / "demo")], cwd=ROOT,
        env=child_env(PORT=port, VAR_DIR=var, DATABASE_URL=f"sqlite:///{tmp_path}/demo.db"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    out, err = demo.communicate(timeout=60)
    assert demo.returncode != 0
    assert f"port {port} is already in use" in err and "PORT=" in err
    assert "demo" not in out.lower() or "ready" not in out.lower()
    # Nothing reached the stranger: not a connection, let alone a request.
    with pytest.raises(BlockingIOError):
        stranger.accept()
    # Nothing was started or left behind: no process in the demo's session, no database,
    # no logs, no port file.
    with pytest.raises(ProcessLookupError):
        os.killpg(demo.pid, 0)
    assert not (tmp_path / "demo.db").exists()
    assert not (var / "log").exists() and not (var / "demo.port").exists()
