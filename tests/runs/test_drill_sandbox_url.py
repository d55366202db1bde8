"""drill --sandbox with a URL that is no URL (a typo) is reported like a sandbox that does not
answer: which URL it tried and why, with a message, not a traceback."""

import io

import pytest
from django.core.management import CommandError, call_command

from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["http://[::1", "http://[zz]/sandbox", "http://a:b:c/sandbox"])
def test_a_malformed_sandbox_url_is_refused_naming_it(url, settings):
    settings.SANDBOX_ENABLED = True
    with pytest.raises(CommandError, match=r"no demo sandbox answers; tried .*Invalid"):
        call_command("drill", "invoice-approval", "--sandbox", url, stdout=io.StringIO())
    assert not Run.objects.exists()
