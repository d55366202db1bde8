from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from audit.access import AccessAction, record_access_change, reseal_access_head
from audit.chain import Actor
from audit.head_seals import signing_key_id
from runs.machine.storable import person_text_problem
from runs.operator.audit_keys import reseal_run_heads


class Command(BaseCommand):
    help = ("Seal every chain head again with the key that signs now (the first of "
            "AUDIT_SEAL_KEYS), so that an older key can be removed from the ring. Runs "
            "verify_audit first and seals nothing unless every chain verifies. --reason is "
            "kept in the access chain.")

    def add_arguments(self, parser):
        parser.add_argument("--reason", required=True,
                            help="why the heads are sealed again (a key rotated or leaked)")

    def handle(self, *args, reason: str, **options):
        reason = reason.strip()
        if not reason:
            raise CommandError("--reason is empty: say why the heads are sealed again")
        if (problem := person_text_problem(reason)) is not None:
            raise CommandError(f"--reason: {problem}; nothing was sealed")
        try:
            call_command("verify_audit", stdout=self.stdout)
        except CommandError as exc:
            raise CommandError(f"nothing was sealed again: {exc}") from None
        key_id = signing_key_id()
        resealed, already = reseal_run_heads()
        access = reseal_access_head()
        record_access_change(
            action=AccessAction.AUDIT_HEADS_RESEALED, subject=f"AUDIT_SEAL_KEYS {key_id}",
            actor=Actor.system("manage.py reseal_audit_heads"), reason=reason,
            before={}, after={"key_id": key_id, "run_heads": resealed,
                              "access_head": access})
        self.stdout.write(
            f"sealed {resealed} run head(s) again with key {key_id!r} ({already} were sealed "
            f"with it already){' and the access chain head' if access else ''}; once the "
            "older keys are removed from AUDIT_SEAL_KEYS, verify_audit passes with it alone")
