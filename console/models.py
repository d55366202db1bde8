from django.conf import settings
from django.db import models


class SavedView(models.Model):
    """A named runs list: its filters, search, time range and sort, as the list's query
    string. Its owner's own, or shared with everyone who may see runs (each still sees
    only the runs of the workflows they may view: a view holds filters, not runs)."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="saved_views")
    name = models.CharField(max_length=100)
    query = models.TextField()
    shared = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "name"],
                                               name="savedview_unique_owner_name")]
        indexes = [models.Index(fields=["name"], name="savedview_shared_idx",
                                condition=models.Q(shared=True))]

    def __str__(self):
        return self.name
