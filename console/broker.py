"""The Redis transport of the broker, keeping one client per channel.

kombu's Redis channel makes a new redis-py client for every command it sends outside the
consumer's own connection: each published wake-up hint, and on a worker each delivered
message's bookkeeping (noting it unacknowledged, then acknowledging it). A redis-py client
is cheap to share but not to make: building one copies its table of response callbacks,
which costs more than the LPUSH it then sends (about 140 us against 90 us here). The
clients all use the channel's one connection pool, so one client per channel serves every
command the same, on the same connections, and is safe to share between threads (redis-py
clients are; a pipeline, made per use, is not shared).

The channel also keeps the parameters of its connection to Redis from the time its transport
was open. Celery 5.7's consumer, on a lost broker link, collects the connection (kombu
closes the transport and forgets its client even when closing the channel timed out) and
then closes it: the channel, closed at last, gives back its unacknowledged messages through
a pool it must make again, from a transport with no client. kombu reads the host from that
client and fails; the AttributeError is not a connection error, so it ends the worker. With
the parameters kept, the channel gives its messages back (or meets the connection error of
a link still down, which Celery expects) and the worker reconnects.

console.celery maps the redis:// and rediss:// schemes to this transport: brokers
configured as before use it; amqp:// is not concerned.
"""

from kombu.transport import TRANSPORT_ALIASES
from kombu.transport import redis as kombu_redis

TRANSPORT = "console.broker:Transport"


class Channel(kombu_redis.Channel):
    _shared_client = None
    connection_parameters = None  # {asynchronous: kombu's parameters} while the transport was open

    def _create_client(self, asynchronous=False):
        if asynchronous:  # the consumer's BRPOP connection: kombu keeps that one itself
            return super()._create_client(asynchronous=True)
        client = self._shared_client
        # A channel whose pools were dropped (a lost connection) makes a new pool: the
        # client of the old one is replaced with it.
        if client is None or client.connection_pool is not self.pool:
            client = self._shared_client = super()._create_client()
        return client

    def _connparams(self, asynchronous=False):
        kept = self.connection_parameters
        if self.connection.client is None and kept and asynchronous in kept:
            return dict(kept[asynchronous])
        parameters = super()._connparams(asynchronous=asynchronous)
        self.connection_parameters = {**(kept or {}), asynchronous: dict(parameters)}
        return parameters


class Transport(kombu_redis.Transport):
    Channel = Channel


def use_shared_client_transport() -> None:
    """Resolve redis:// and rediss:// broker URLs to this module's Transport."""
    for scheme in ("redis", "rediss"):
        TRANSPORT_ALIASES[scheme] = TRANSPORT
