#!/usr/bin/env python
import os
import sys


def main():
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    from console.entry import execute_or_exit
    from console.env import load_settings_or_exit

    load_settings_or_exit("manage.py")
    execute_or_exit("manage.py", sys.argv)


if __name__ == "__main__":
    main()
