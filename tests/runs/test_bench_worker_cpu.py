"""make bench's worker CPU: the figure with a target is the pool processes' (they execute the
tasks); the worker's main process (broker, hand-off, acks) is read apart and printed beside
it, so neither hides in the other."""

import subprocess
import sys
import time

from runs.bench_processes import Worker, proc_cpu_seconds

# A stand-in for `celery worker`: a main process with one pool child, each burning CPU for
# a different time, so the two readings can be told apart.
TWO_PROCESSES = """
import os, time
def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
if os.fork() == 0:
    burn(0.6)
    time.sleep(60)
    os._exit(0)
burn(0.2)
time.sleep(60)
"""


def test_the_pool_and_the_main_process_are_read_apart():
    worker = Worker.__new__(Worker)
    worker.process = subprocess.Popen([sys.executable, "-c", TWO_PROCESSES],
                                      start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            children = worker.children()
            if children and worker.cpu_seconds() >= 0.55 \
                    and worker.consumer_cpu_seconds() >= 0.15:
                break
            time.sleep(0.05)
        assert children, "the stand-in's pool child never appeared"
        pool, consumer = worker.cpu_seconds(), worker.consumer_cpu_seconds()
        assert 0.55 <= pool < 1.0
        assert 0.15 <= consumer < 0.5
        assert consumer == proc_cpu_seconds(worker.process.pid)
    finally:
        worker.stop()
