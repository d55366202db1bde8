import os

from django.core.wsgi import get_wsgi_application

from console.env import load_settings_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
# A setting the environment gives wrong stops the server in one line, as manage.py does.
load_settings_or_exit("wsgi")

from django.conf import settings  # noqa: E402  (read once the settings are known good)

from console.lock_waits import bound_lock_waits  # noqa: E402

# The web server's requests are people's: none waits without end for a row another session
# holds (DB_LOCK_TIMEOUT). Before any connection is made; runserver serves this application
# too.
bound_lock_waits(settings.DB_LOCK_TIMEOUT)
application = get_wsgi_application()
