"""A RabbitMQ node of the test's own, for what the shared server cannot be asked without
changing its global configuration (RabbitMQ before 3.12 takes consumer_timeout from its
configuration only, not from a queue's arguments or a policy): started on free ports with
its data under the test's directory, stopped with the test."""

import os
import signal
import socket
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # not the wrapper that changes user


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"AMQP\x00\x00\x09\x01")
            return bool(conn.recv(8))
    except OSError:
        return False


@contextmanager
def rabbitmq_node(directory: Path, *, consumer_timeout_ms: int):
    """Yield the amqp:// URL of a new RabbitMQ node whose consumer_timeout is the one given,
    checked each second (the server checks it at each channel tick, every minute by
    default)."""
    directory.mkdir(parents=True, exist_ok=True)
    port, dist_port = _free_port(), _free_port()
    (directory / "rabbitmq.conf").write_text(
        f"listeners.tcp.default = {port}\nconsumer_timeout = {consumer_timeout_ms}\n"
        "loopback_users = none\n")
    (directory / "advanced.config").write_text("[{rabbit, [{channel_tick_interval, 1000}]}].\n")
    (directory / "enabled_plugins").write_text("[].\n")
    env = {**os.environ, "HOME": str(directory),
           "RABBITMQ_NODENAME": f"test{port}@localhost", "RABBITMQ_NODE_PORT": str(port),
           "RABBITMQ_DIST_PORT": str(dist_port), "RABBITMQ_BASE": str(directory),
           "RABBITMQ_MNESIA_BASE": str(directory / "mnesia"),
           "RABBITMQ_LOG_BASE": str(directory / "log"),
           "RABBITMQ_CONFIG_FILE": str(directory / "rabbitmq.conf"),
           "RABBITMQ_ADVANCED_CONFIG_FILE": str(directory / "advanced.config"),
           "RABBITMQ_ENABLED_PLUGINS_FILE": str(directory / "enabled_plugins"),
           "RABBITMQ_PID_FILE": str(directory / "pid")}
    log = open(directory / "server.log", "w")  # noqa: SIM115 - closed with the node
    node = subprocess.Popen([SERVER], env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while not _answers(port):
            assert node.poll() is None, (directory / "server.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "the test's RabbitMQ node did not start"
            time.sleep(0.5)
        yield f"amqp://guest:guest@127.0.0.1:{port}//"
    finally:
        try:
            os.killpg(node.pid, signal.SIGTERM)
            node.wait(timeout=30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(node.pid, signal.SIGKILL)
            node.wait(timeout=10)
        log.close()
