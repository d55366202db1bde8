from django.conf import settings
from django.core.management.base import CommandError

from audit.arguments import ValuesCutShortCommand
from audit.chain import Actor
from runs.operator.field_keys import KeyCounts, ResealRefused, key_counts, reseal_fields


class Command(ValuesCutShortCommand):
    help = ("Seal every stored sensitive value again with the key that seals now (the first "
            "of FIELD_ENCRYPTION_KEYS), so that an older key can be removed from the ring; "
            "with --count, only say which keys the stored values name. Runs a worker holds "
            "are left for a later pass. --reason is kept in the access chain and in each "
            "run's chain. Exits 3 when a value is left sealed with another key (a run a "
            "worker held, a value no key opens).")

    def add_arguments(self, parser):
        parser.add_argument("--reason", help="why the values are sealed again (a key "
                                             "rotated or leaked); needed unless --count")
        parser.add_argument("--count", action="store_true",
                            help="change nothing: count the stored values by the key they name")

    def handle(self, *args, reason: str | None, count: bool, **options):
        if count:
            self.stdout.write(self.counted(key_counts()))
            return
        if reason is None:
            raise CommandError("--reason is needed: say why the values are sealed again "
                               "(or use --count to change nothing)")
        try:
            done = reseal_fields(reason=reason, actor=Actor.system("manage.py reseal_fields"))
        except ResealRefused as exc:
            raise CommandError(f"--reason{exc}") from None
        others = "".join(f", {rows} row(s) of {name}" for name, rows in done.other_rows.items())
        self.stdout.write(f"sealed {done.resealed} value(s) again with key {done.key_id!r}: "
                          f"{done.runs} run(s){others}")
        if done.runs_held:
            self.stdout.write(f"left {len(done.runs_held)} run(s) a worker holds now (run the "
                              "command again once they have stopped): "
                              + ", ".join(map(str, done.runs_held[:20]))
                              + (" ..." if len(done.runs_held) > 20 else ""))
        for left in done.files_left:
            # Its row refers to the artifact written anew: nothing reads this file, which
            # the retired key opens.
            self.stdout.write(f"not removed (remove it from the artifact storage by hand): "
                              f"the old file of an artifact written anew, {left}")
        self.stdout.write(self.counted(done))
        if done.runs_held or done.unreadable or done.unreadable_artifacts:
            # Scripts and runbooks check the status: a key is not free to go yet.
            raise CommandError("not every stored value is sealed with "
                               f"{done.key_id!r} yet (said above)", returncode=3)

    @staticmethod
    def counted(counts: KeyCounts) -> str:
        held = set(settings.FIELD_ENCRYPTION_KEYS)
        lines = [f"key {key_id!r}: {n} value(s)"
                 + (" (the key that seals now)" if key_id == counts.key_id else "")
                 + ("; not in this process's FIELD_ENCRYPTION_KEYS: they cannot be opened "
                    "here" if key_id not in held else "")
                 + (f", {counts.unreadable[key_id]} of them no key held opens"
                    if counts.unreadable[key_id] else "")
                 for key_id, n in sorted(counts.by_key.items())]
        lines += [f"not read: {problem}" for problem in counts.unreadable_artifacts]
        left = counts.left
        if not left and not counts.unreadable_artifacts:
            lines.append(f"no stored value names another key than {counts.key_id!r}: every "
                         "other key may leave FIELD_ENCRYPTION_KEYS")
        else:
            lines.append("still needed: " + ", ".join(repr(k) for k in sorted(left))
                         + " (each stays in FIELD_ENCRYPTION_KEYS, or is put back, until no "
                         "value names it)"
                         if left else "an artifact could not be read: its values are not "
                         "counted")
        return "\n".join(lines)
