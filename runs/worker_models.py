"""The worker registry: each process that runs steps, as its heartbeats describe it."""

from django.db import models


class Worker(models.Model):
    """One worker process, named as in its leases (host:pid, see executor.worker_name).
    It writes its own row: when it starts, every WORKER_HEARTBEAT_SECONDS, and when it
    stops cleanly. A process killed outright stops beating: its row stays, silent."""

    name = models.CharField(max_length=200, unique=True)
    host = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    queues = models.CharField(max_length=500, blank=True)
    # The database server's clock, as for leases: a worker with a wrong clock still reads
    # as alive or silent correctly.
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["heartbeat_at"], name="worker_heartbeat_idx")]

    def __str__(self):
        return self.name
