import logging

from celery import shared_task

from . import checkpoints

logger = logging.getLogger(__name__)


@shared_task(name="audit.write_checkpoint")
def write_checkpoint() -> dict:
    """Beat's checkpoint of every audit chain's head, into the checkpoint storage."""
    name, chains = checkpoints.store_checkpoint()
    logger.info("audit checkpoint %s: the heads of %d chain(s)", name, chains)
    return {"name": name, "chains": chains}
