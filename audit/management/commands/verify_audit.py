from contextlib import closing, nullcontext
from itertools import groupby
from operator import attrgetter
from pathlib import Path

from django.conf import settings
from django.core.exceptions import SuspiciousFileOperation
from django.core.files.storage import FileSystemStorage, storages
from django.core.management.base import CommandError

from audit.access import access_chain_break, access_head
from audit.arguments import ValuesCutShortCommand
from audit.chain import chain_break, checked_tombstones, one_snapshot, recorded_heads
from audit.head_seals import ACCESS_CHAIN, head_seal_problem
from audit.models import AccessRecord, AuditRecord
from audit.offline import check_archive, compare_with_recorded, recorded_archive
from audit.quoting import file_name


class _Passing:
    """One run's records as they stream past: the last one and how many, kept."""

    def __init__(self, records):
        self._records, self.last, self.count = records, None, 0

    def __iter__(self):
        for record in self._records:
            self.last, self.count = record, self.count + 1
            yield record


class Command(ValuesCutShortCommand):
    help = ("Verify every run's audit hash chain and the access chain (permission "
            "changes), each chain's head against its seal (AUDIT_SEAL_KEYS), and each "
            "archived run's tombstone against the archive file it names; exit "
            "non-zero naming the first broken record, head or tombstone. "
            "With --archive FILE, verify an archive file instead, offline: every run against "
            "its seal (ARCHIVE_SIGNING_KEYS) and its chain, the file against its own seal, "
            "and against its recorded sha256 and chain heads when the database has them.")

    def add_arguments(self, parser):
        parser.add_argument(
            "--archive", metavar="FILE",
            help="a local .jsonl.gz file, or a name in the archive storage (STORAGES "
                 "'archive', else VAR_DIR/archive)")

    def handle(self, *args, archive=None, **options):
        if archive is not None:
            if not archive.strip():
                raise CommandError("--archive needs a file name; without --archive the "
                                   "database's chains are verified")
            return self.verify_archive(archive)
        # One snapshot for the heads and the records: a run that records a step (or an
        # admin who grants a permission) between the two reads would otherwise look cut
        # short at its end.
        with one_snapshot():
            runs, records = self.verify_runs()
            access = self.verify_access()
            tombstones = self.verify_tombstones()
        self.stdout.write(f"verified {records} audit records in {runs} runs: all chains intact, "
                          "every head sealed")
        self.stdout.write(f"verified {tombstones} archived runs: each closed by the archive "
                          "file its tombstone names")
        self.stdout.write(f"verified {access} access records (permission changes): "
                          "chain intact" + (", its head sealed" if access else ""))

    def verify_access(self) -> int:
        """The access chain, record by record, and its end against its head row. Returns
        the records verified; raises CommandError naming the first problem."""
        count, last = 0, (0, "")

        def read(stream):
            nonlocal count, last
            for record in stream:
                count, last = count + 1, (record.seq, record.hash)
                yield record

        with closing(AccessRecord.objects.order_by("seq").iterator(chunk_size=2000)) as stream:
            broken = access_chain_break(read(stream))
        if broken is not None:
            record, why = broken
            raise CommandError(f"the access chain is broken at record id={record.pk} "
                               f"seq={record.seq} action={record.action}: {why}")
        head_seq, head_hash, seal = access_head()
        if last != (head_seq, head_hash):
            raise CommandError(
                f"the access chain ends at seq={last[0]} but its head keeps seq={head_seq} "
                f"hash={head_hash[:12] or '-'}: records were removed from its end, or its "
                "head was changed")
        # An empty chain has nothing to vouch for (and a database flushed by the tests has
        # no head row to carry a seal).
        problem = head_seal_problem(ACCESS_CHAIN, head_seq, head_hash, seal) if head_seq else None
        if problem is not None:
            raise CommandError(f"the access chain's head seq={head_seq} "
                               f"hash={head_hash[:12]}: {problem}")
        return count

    def verify_tombstones(self) -> int:
        """Each tombstone against the archive file it names: the audit trigger lets a run's
        records go once a tombstone names the file, so a tombstone no file backs is a run
        removed with its whole chain outside the archive. Returns the tombstones checked;
        raises CommandError naming the first problem."""
        count = 0
        # Closed on the way out, as the streams of verify_runs are.
        with closing(checked_tombstones()) as tombstones:
            for run_id, archive_name, why in tombstones:
                if why is not None:
                    raise CommandError(
                        f"archived run {run_id}: its tombstone names archive file "
                        f"{file_name(archive_name)}, but {why}: the run and its audit chain "
                        "were removed outside the archive")
                count += 1
        return count

    def verify_runs(self) -> tuple[int, int]:
        """Each run's chain, record by record, and its end against the head its run row
        keeps. Both are read in run id order, streamed side by side. Returns (runs,
        records) verified; raises CommandError naming the first problem."""
        heads = recorded_heads()
        head = next(heads, None) if heads is not None else None
        runs = records = 0

        def check(run_id: int, chain: "_Passing") -> None:
            nonlocal head
            while head is not None and head[0] < run_id:
                no_records(head)
                head = next(heads, None)
            broken = chain_break(chain)
            if broken is not None:
                record, why = broken
                raise CommandError(
                    f"audit chain of run {run_id} is broken at record id={record.pk} "
                    f"seq={record.seq} action={record.action}: {why}")
            if heads is None:
                return
            head_seq, head_hash, seal = (head[1:] if head and head[0] == run_id
                                         else (0, "", ""))
            if head and head[0] == run_id:
                head = next(heads, None)
            last = chain.last
            if (last.seq, last.hash) != (head_seq, head_hash):
                raise CommandError(
                    f"audit chain of run {run_id} ends at seq={last.seq} but its run keeps "
                    f"the head seq={head_seq} hash={head_hash[:12] or '-'}: records were "
                    "removed from its end, or the run's head was changed")
            # The chain and its head agree; only the seal tells whether the runtime wrote
            # them, or someone who rewrote the records and recomputed every hash.
            problem = head_seal_problem(run_id, head_seq, head_hash, seal)
            if problem is not None:
                raise CommandError(f"audit chain of run {run_id} (head seq={head_seq} "
                                   f"hash={head_hash[:12]}): {problem}")

        def no_records(head) -> None:
            if not head[1]:
                # Every run is started with its first record in the same statement: a run
                # with no record and an empty head had both taken away, not never written.
                raise CommandError(
                    f"audit chain of run {head[0]} has no records and its run keeps no head "
                    "(seq=0): every run is started with its first audit record, so its "
                    "records were removed and its head cleared")
            raise CommandError(f"audit chain of run {head[0]} has no records but its run "
                               f"keeps the head seq={head[1]}: its records were removed")

        stream = AuditRecord.objects.order_by("run_id", "seq").iterator(chunk_size=2000)
        # Closed on the way out, a problem found or not: each stream is a server-side cursor
        # of the snapshot's transaction, which a caller's transaction outlives (tests, or
        # another command calling this one); closed later, it would fail that transaction.
        with closing(stream), closing(heads) if hasattr(heads, "close") else nullcontext():
            # Each run's chain is verified as its records stream past, never held whole: a
            # run of 100,000 records held them all in memory at once.
            for run_id, chain in groupby(stream, key=attrgetter("run_id")):
                passing = _Passing(chain)
                check(run_id, passing)
                records += passing.count
                runs += 1
            if head is not None:
                no_records(head)
        return runs, records

    def verify_archive(self, name: str):
        path, shown = Path(name), file_name(name)
        try:
            path.is_file()
        except OSError as exc:  # a name the file system cannot take (too long, ...)
            raise CommandError(f"no archive file {shown}: {exc.strerror}") from None
        if path.is_file():
            with path.open("rb") as handle:
                report = check_archive(handle)
            stored_name = path.name
        elif path.is_dir():
            raise CommandError(f"{shown} is a directory, not an archive file")
        else:
            store = (storages["archive"] if "archive" in settings.STORAGES
                     else FileSystemStorage(location=Path(settings.VAR_DIR) / "archive"))
            try:
                if not store.exists(name):
                    raise CommandError(f"no archive file {shown} on disk or in the archive "
                                       "storage")
                with store.open(name, "rb") as handle:
                    report = check_archive(handle)
            except SuspiciousFileOperation:
                # The storage refuses a name that leads out of its location (an absolute
                # path, ..): as a file on disk it was not found either.
                raise CommandError(f"no archive file {shown} on disk, and the name leads "
                                   "outside the archive storage") from None
            except IsADirectoryError:
                raise CommandError(f"{shown} is a directory in the archive storage, not an "
                                   "archive file") from None
            stored_name = name
        problems = list(report.problems)
        recorded = None
        try:
            recorded = recorded_archive(stored_name, report.sha256)
        except Exception as exc:  # noqa: BLE001 - offline: the database is optional here
            self.stderr.write(f"the archive's record could not be read ({exc}); "
                              "checking the file alone")
        if recorded is not None:
            problems += compare_with_recorded(report, recorded)
        elif report.unsealed:
            problems.append("the file says it was written before archives were sealed "
                            "(format 1) and this database has no record of its sha256: "
                            "nothing vouches for its content")
        if problems:
            raise CommandError(f"archive {shown}: " + "; ".join(problems))
        against = ("its seals and its recorded sha256 and chain heads" if recorded is not None
                   else "its seals and the file alone (no record of it in this database)")
        self.stdout.write(
            f"verified archive {shown}: {report.records} audit records in {report.runs} runs, "
            f"sha256 {report.sha256}, against {against}: all chains intact")
