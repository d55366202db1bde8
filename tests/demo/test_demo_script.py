"""bin/demo (what `make demo` runs): a busy port stops it before it starts anything."""

import os
import signal
import socket
import sqlite3
import subprocess
import time

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


def _demo(tmp_path, port: int) -> subprocess.Popen:
    return subprocess.Popen(
        [str(ROOT / "bin" / "demo")], cwd=ROOT,
        # The demo's own sandbox, on its own port, as `make demo` has it (not the test's);
        # and its workflows alone: the tests' include a schedule that starts a run each
        # minute, which a second start crossing a minute would count as one it added.
        env=child_env(PORT=port, VAR_DIR=tmp_path / "var", RUNS_EXTRA_WORKFLOW_MODULES="",
                      DATABASE_URL=f"sqlite:///{tmp_path}/demo.sqlite3",
                      SANDBOX_BASE_URL=f"http://127.0.0.1:{port}/sandbox",
                      MODEL_BASE_URL=f"http://127.0.0.1:{port}/sandbox/model/v1"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def _until_banner(demo: subprocess.Popen) -> list[str]:
    lines = []
    for line in demo.stdout:
        lines.append(line)
        if "start another run:" in line:
            return lines
    raise AssertionError("the demo ended before its banner:\n" + "".join(lines))


def _stop(demo: subprocess.Popen) -> None:
    demo.terminate()  # what Ctrl-C does to the script: its trap stops what it started
    demo.wait(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(demo.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    os.killpg(demo.pid, signal.SIGKILL)
    raise AssertionError("processes of the demo were left running")


def test_the_demo_shows_its_banner_not_logs_and_a_second_start_adds_no_runs(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    demo = _demo(tmp_path, port)
    try:
        screen = _until_banner(demo)
    finally:
        _stop(demo)
    text = "".join(screen)
    assert "admin / admin-demo" in text and f"http://127.0.0.1:{port}/" in text
    assert "/api/docs" in text
    assert '"GET ' not in text and " ERROR " not in text, text
    assert "demo scenarios failed" not in text, _scenarios_log(tmp_path)
    assert len(screen) < 40
    made = _runs(tmp_path)
    assert made >= 12
    demo = _demo(tmp_path, port)
    try:
        screen = _until_banner(demo)
    finally:
        _stop(demo)
    assert "the demo's scenario runs are already in place" in "".join(screen), screen
    assert _runs(tmp_path) == made


def _scenarios_log(tmp_path) -> str:
    return (tmp_path / "var" / "log" / "scenarios.log").read_text()


def _runs(tmp_path) -> int:
    with sqlite3.connect(tmp_path / "demo.sqlite3") as db:
        return db.execute("SELECT count(*) FROM runs_run").fetchone()[0]
