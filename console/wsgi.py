import os

from django.core.wsgi import get_wsgi_application

from console.env import load_settings_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
# A setting the environment gives wrong stops the server in one line, as manage.py does.
load_settings_or_exit("wsgi")
application = get_wsgi_application()
