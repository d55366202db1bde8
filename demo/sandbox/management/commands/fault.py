"""`manage.py fault ENDPOINT KIND [--times N]`, `--list`, `--clear`: queue faults for the
sandbox's endpoints from a shell, e.g. to show an operator how a run recovers from a timeout
after commit."""

from django.core.management.base import CommandError

from audit.arguments import ValuesCutShortCommand
from demo.sandbox import faults
from runs.machine.storable import whole_number_argument, whole_number_in_range


class Command(ValuesCutShortCommand):
    help = ("Queue a fault for the next call(s) to a sandbox endpoint, list the queued faults "
            "or clear them. Endpoints: " + ", ".join(faults.ENDPOINTS) + ". Kinds: "
            + ", ".join(faults.KINDS) + ".")

    def add_arguments(self, parser):
        parser.add_argument("endpoint", nargs="?", help="e.g. tracker.create")
        parser.add_argument("kind", nargs="?", help="e.g. commit_then_timeout")
        # Not type=int, which reads "٣" as 3 and "1_0" as 10: a count no one wrote.
        # None when not given: refused beside --list or --clear, which would drop it.
        parser.add_argument("--times", type=whole_number_argument, default=None,
                            help="how many consecutive calls the fault hits (default 1)")
        parser.add_argument("--list", action="store_true", help="list the queued faults")
        parser.add_argument("--clear", action="store_true", help="remove every queued fault")

    def handle(self, *args, **options):
        endpoint, kind, times = options["endpoint"], options["kind"], options["times"]
        show, clear = options["list"], options["clear"]
        for flag, given in (("--clear", clear), ("--list", show)):
            # Queued beside a list, a fault would hit a call its operator only meant to look at.
            if given and (endpoint or kind):
                raise CommandError(f"{flag} takes no endpoint or kind")
            if given and times is not None:
                raise CommandError(f"{flag} takes no --times")
        if times is not None:
            # Named as the option, as every command names a count out of its range, before
            # anything is queued (faults.add refuses it too, naming the form's field).
            whole_number_in_range(times, option="--times", low=1, high=faults.MOST_TIMES,
                                  then="nothing was queued")
        if clear:
            self.stdout.write(f"cleared {faults.clear()} queued fault(s)")
        elif endpoint or kind:
            if not (endpoint and kind):
                raise CommandError("give both an ENDPOINT and a KIND; valid endpoints: "
                                   f"{', '.join(faults.ENDPOINTS)}; valid kinds: "
                                   f"{', '.join(faults.KINDS)}")
            try:
                fault = faults.add(endpoint, kind, 1 if times is None else times)
            except faults.FaultError as exc:
                raise CommandError(str(exc)) from None
            self.stdout.write(f"queued {fault.kind} for the next {fault.remaining} call(s) to "
                              f"{fault.endpoint} ({faults.ENDPOINTS[fault.endpoint]})")
        elif not show:
            raise CommandError("give ENDPOINT KIND [--times N], --list or --clear")
        if show:
            queued = faults.pending()
            if not queued:
                self.stdout.write("no faults queued")
            for fault in queued:
                self.stdout.write(f"{fault.endpoint}\t{fault.kind}\tx{fault.remaining}\t"
                                  f"queued {fault.created_at:%Y-%m-%d %H:%M:%S}")
