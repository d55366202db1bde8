#!/usr/bin/env python
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    from django.core.management import execute_from_command_line

    from console.env import load_settings_or_exit

    load_settings_or_exit("manage.py")
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
