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


def test_a_channel_closed_after_its_transport_still_gives_back_its_unacknowledged_message():
    """Celery 5.7's consumer, on a lost broker link, collects its connection (kombu closes
    the transport and forgets its client even when closing the channel timed out), then closes
    it: the channel, closed at last, must give back the message a task was running under, not
    end the worker with an AttributeError."""
    queue = "broker-test-unacked"
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    client.delete(queue)
    try:
        with app.connection_for_write() as conn:
            channel = conn.default_channel
            channel.queue_declare(queue)
            channel.basic_publish(channel.prepare_message("hint"), exchange="", routing_key=queue)
            message = channel.basic_get(queue, no_ack=False)
            assert message is not None and queue_length(client, queue) == 0
            channel._disconnect_pools()  # the lost link: kombu drops the channel's pools
            conn.transport.client = None  # what kombu's collect() leaves on the transport

            channel.close()

            assert queue_length(client, queue) == 1  # given back, not lost
    finally:
        client.delete(queue)
