from pathlib import Path

from django.core.exceptions import SuspiciousFileOperation
from django.core.management.base import CommandError

from audit.arguments import ValuesCutShortCommand
from audit.checkpoints import (
    CheckpointError,
    check_checkpoint,
    latest_stored,
    storage,
    store_checkpoint,
    write_checkpoint,
)
from audit.quoting import file_name

RESTORED = ("If the database was restored from a backup older than the checkpoint, this is "
            "expected: follow \"Restoring the database from a backup\" in "
            "docs/operations.md before starting workers; otherwise the chains were set back.")


class Command(ValuesCutShortCommand):
    help = ("Write the head of every audit chain (each run's and the access chain's) to a "
            "sealed checkpoint file, to keep where the database's writers cannot reach; or "
            "check a database against such a file: every head it names must still be in its "
            "chain. A chain set back to an earlier head with that head's seal, or emptied, "
            "passes verify_audit but not this check. Without FILE, write goes to the "
            "checkpoint storage (STORAGES 'audit_checkpoints', else VAR_DIR/audit-checkpoints; "
            "beat writes one there every AUDIT_CHECKPOINT_INTERVAL_SECONDS), and check "
            "--latest reads the newest one there.")

    def add_arguments(self, parser):
        parser.add_argument("operation", choices=["write", "check"])
        parser.add_argument("file", nargs="?",
                            help="a local checkpoint file (.jsonl.gz), or for check a name in "
                                 "the checkpoint storage; write refuses one that exists")
        parser.add_argument("--latest", action="store_true",
                            help="check: the newest checkpoint in the checkpoint storage")

    def handle(self, *args, operation, file, latest, **options):
        if file is not None and not file.strip():
            raise CommandError("name the checkpoint file, or leave it out")
        if latest and (operation != "check" or file is not None):
            raise CommandError("--latest is for check, without a FILE")
        try:
            if operation == "write":
                self.write(file)
                return
            report = check_checkpoint(**self.to_check(file, latest))
        except CheckpointError as exc:
            raise CommandError(str(exc)) from None
        if report.problem_count:
            listed = "\n".join(f"  {problem}" for problem in report.problems)
            more = report.problem_count - len(report.problems)
            files = f" and {report.files} archive file(s)" if report.files else ""
            raise CommandError(
                f"{report.problem_count} of the {report.chains} chain(s){files} checkpointed "
                f"at {report.taken_at} no longer hold their head"
                + (" or record" if files else "") + f":\n{listed}"
                + (f"\n  ... and {more} more" if more else "")
                + f"\n{RESTORED}")
        self.stdout.write(
            f"every one of the {report.chains} chain(s) checkpointed at {report.taken_at} "
            f"still holds its head ({report.archived} of them closed by archive files)"
            + (f", and every one of the {report.files} archive file(s) it names is still "
               "recorded" if report.files else ""))

    def write(self, file: str | None) -> None:
        if file is None:
            try:
                name, chains = store_checkpoint()
            except OSError as exc:  # a storage misplaced or refusing us: the machine's to fix
                raise CommandError(f"the checkpoint storage cannot be written: {exc}") from None
            self.stdout.write(f"wrote the heads of {chains} chain(s) to {file_name(name)} in "
                              "the checkpoint storage")
            return
        chains = write_checkpoint(Path(file))
        self.stdout.write(f"wrote the heads of {chains} chain(s) to {file_name(file)}: keep "
                          "it where the database's writers cannot reach")

    def to_check(self, file: str | None, latest: bool) -> dict:
        if latest:
            try:
                name = latest_stored()
            except OSError as exc:
                raise CommandError(f"the checkpoint storage cannot be read: {exc}") from None
            if name is None:
                raise CommandError("no checkpoint is stored yet: write one first")
            return {"stored": name}
        if file is None:
            raise CommandError("name the checkpoint file to check, or give --latest")
        if not local_exists(file) and stored_exists(file):
            return {"stored": file}
        if local_exists(file) and not Path(file).is_file():
            # A named pipe would hold the command until something writes to it, and is read
            # once where a checkpoint is read twice (its seal first); a directory says so.
            raise CommandError(f"{file_name(file)} is not a regular file: name a checkpoint "
                               "file")
        return {"path": Path(file)}


def local_exists(name: str) -> bool:
    try:
        return Path(name).exists()
    except OSError:  # a name the file system cannot take: reading it says so
        return False


def stored_exists(name: str) -> bool:
    try:
        return storage().exists(name)
    except (SuspiciousFileOperation, ValueError, OSError):  # a name that leaves the storage
        return False
