from django.conf import settings
from django.contrib.auth.models import Group, Permission, User
from django.core.management.base import CommandError

from audit.arguments import ValuesCutShortCommand
from audit.chain import Actor
from console.roles import ensure_roles
from runs.machine.errors import RunArchived, StartRefused
from runs.machine.transitions import start_run

DEMO_USERS = [
    # username, password, superuser, groups
    ("admin", "admin-demo", True, ()),
    ("operator", "operator-demo", False, ("operators",)),
    ("approver", "approver-demo", False, ("approvers",)),
    # The invoice approval escalates to finance-deputies when nobody decides in time. The
    # deputy is an operator too: the second person an operator's four-eyes request needs.
    ("deputy", "deputy-demo", False, ("finance-deputies", "operators")),
    ("auditor", "auditor-demo", False, ("auditors",)),
]

INVOICES = [
    ("tenant-42:INV-1847", {"tenant": "tenant-42", "invoice_number": "INV-1847",
                            "approver_email": "approver@example.com"}),
    ("tenant-42:INV-1848", {"tenant": "tenant-42", "invoice_number": "INV-1848",
                            "approver_email": "approver@example.com"}),
]

# The invoice-triage agent: one below the ledger's approval threshold (runs end to end),
# one above it (the posting waits for the approver).
TRIAGES = [
    ("tenant-42:triage-INV-2001", {"tenant": "tenant-42", "invoice_number": "INV-2001",
                                   "requester_email": "requester@example.com"}),
    ("tenant-42:triage-INV-1847", {"tenant": "tenant-42", "invoice_number": "INV-1847",
                                   "requester_email": "requester@example.com"}),
]

CUSTOMERS = [
    ("tenant-42:cus-1001", {"email": "ada@example.com", "name": "Ada Lovelace", "plan": "pro"}),
    ("tenant-42:cus-1002", {"email": "alan@example.com", "name": "Alan Turing", "plan": "free"}),
    ("tenant-7:cus-2001", {"email": "grace@example.com", "name": "Grace Hopper",
                           "plan": "enterprise"}),
]


class Command(ValuesCutShortCommand):
    help = "Create the demo logins and start a few demo runs (safe to run again)."

    def handle(self, *args, **options):
        if not settings.SANDBOX_ENABLED:
            # The demo logins' passwords are in this file: a deployment (which serves no
            # sandbox unless asked to) would get a superuser anyone can sign in as.
            raise CommandError("seed_demo creates logins whose passwords anyone can read in "
                               "the code; it runs only where the demo's simulated systems "
                               "are served (SANDBOX_ENABLED). Nothing was done.")
        # The role groups with their permissions, as the migration made them: a database
        # emptied since (manage.py flush) keeps the tables and loses the groups' rights, and
        # the operators seeded into them could see no run.
        ensure_roles(Group, Permission)
        said = []
        for username, password, superuser, groups in DEMO_USERS:
            user, created = User.objects.get_or_create(username=username)
            if created:
                user.set_password(password)
            # Least privilege: only the admin may open Django admin (is_staff); the others
            # work through the console with their group's permissions. Set on every run,
            # so a database seeded when every demo user was staff is put right; an admin
            # someone demoted since stays demoted (seeding again grants nothing).
            user.is_staff = user.is_superuser = superuser and (created or user.is_superuser)
            if not user.email:
                # Approval notifications go by email (files in var/mail in the demo).
                user.email = f"{username}@example.com"
            user.save()
            for group in groups:
                user.groups.add(Group.objects.get_or_create(name=group)[0])
            # Only a password set now is said: an existing login keeps its own.
            said.append(f"{username} / {password}" if created
                        else f"{username} (existing, password unchanged)")
        archived = []
        for workflow, runs in (("customer-onboarding", CUSTOMERS),
                               ("invoice-approval", INVOICES),
                               ("invoice-triage", TRIAGES)):
            for key, data in runs:
                try:
                    start_run(workflow=workflow, business_key=key, input=data,
                              actor=Actor.system("seed_demo"))
                except RunArchived as exc:
                    if not exc.same_input:
                        raise CommandError(_not_seeded(exc)) from None
                    # The demo's own run, finished and archived since it was seeded (bin/demo
                    # seeds at every start): seeded, as a run still in the hot tables is.
                    archived.append(f"{workflow} {key}")
                except StartRefused as exc:
                    raise CommandError(_not_seeded(exc)) from None
        self.stdout.write("demo logins: " + ", ".join(said))
        if archived:
            self.stdout.write("archived since seeded, not started again: "
                              + ", ".join(archived))


def _not_seeded(exc: StartRefused) -> str:
    return (f"a demo run cannot be started: {exc}. The demo logins, and the demo runs before "
            "it, are in place; seeding again once it is resolved starts the rest")
