from django.core.management.base import CommandError

from audit.arguments import ValuesCutShortCommand
from audit.chain import Actor
from runs.operator.audit_keys import ReasonRefused, ResealRefused, reseal_heads


class Command(ValuesCutShortCommand):
    help = ("Seal every chain head again with the key that signs now (the first of "
            "AUDIT_SEAL_KEYS), so that an older key can be removed from the ring. Runs "
            "verify_audit first and seals nothing unless every chain verifies. --reason is "
            "kept in the access chain.")

    def add_arguments(self, parser):
        parser.add_argument("--reason", required=True,
                            help="why the heads are sealed again (a key rotated or leaked)")

    def handle(self, *args, reason: str, **options):
        try:
            done = reseal_heads(reason=reason,
                                actor=Actor.system("manage.py reseal_audit_heads"))
        except ReasonRefused as exc:
            raise CommandError(f"--reason{exc}") from None
        except ResealRefused as exc:
            raise CommandError(f"nothing was sealed again: {exc}") from None
        self.stdout.write(
            f"sealed {done.run_heads} run head(s) again with key {done.key_id!r} "
            f"({done.already} were sealed with it already)"
            f"{' and the access chain head' if done.access_head else ''}; once the older "
            "keys are removed from AUDIT_SEAL_KEYS, verify_audit passes with it alone")
