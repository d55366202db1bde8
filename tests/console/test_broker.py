"""The Redis transport of the broker: one redis-py client per channel, on the real Redis."""

import redis
from django.conf import settings

from console.broker import Channel
from console.celery import app
from runs.machine.wakeup import send_wakeups


def queue_length(client, name: str) -> int:
    return client.llen(name)


def test_redis_broker_urls_resolve_to_the_transport_that_shares_one_client_per_channel():
    assert settings.CELERY_BROKER_URL.startswith("redis://")
    with app.connection_for_write() as conn:
        assert isinstance(conn.default_channel, Channel)


def test_every_command_of_a_channel_goes_through_one_client_of_its_pool():
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
            assert first.connection_pool is channel.pool


def test_a_channel_whose_pool_was_dropped_makes_a_client_of_its_new_pool():
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        with channel.conn_or_acquire() as before:
            pass
        channel._disconnect_pools()  # what kombu does when the connection to Redis is lost
        with channel.conn_or_acquire() as after:
            assert after is not before
            assert after.connection_pool is channel.pool
            assert after.ping()


def test_hints_published_through_the_shared_client_all_reach_the_queue():
    queue = app.conf.task_default_queue
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete(queue)
    try:
        assert send_wakeups([101, 102, 103]) == 3
        assert queue_length(client, queue) == 3
    finally:
        client.delete(queue)
