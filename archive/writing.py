"""An archive file reaches its storage whole or not at all under its name.

A storage writing a file in place (Django's FileSystemStorage does) leaves, when the
process is killed during the write, part of a file under a name like a real archive's,
with no row naming it. So:

- on the file system, the file is written under partial/ in the storage's directory,
  flushed to disk, then linked to its name (one step, on the same file system); the
  partial/ name stays until the file is recorded (`recorded`), the marker of a file saved
  but perhaps never recorded (a process killed between the two);
- in any other storage, a marker partial/<base name> holding the file's name is saved
  first, and deleted once the file is recorded (`recorded`). Object stores (S3 and the
  like) show an object only once its upload is complete, but a storage that writes in
  place (SFTP, FTP) leaves part of one, which the marker names.

The next pass, which holds the archive lock (so no other writes), deletes what such a
write left (`remove_stale_partials`): a partial file, or a marker, with the file it names
(its link, on the file system) when no row records that file: its runs stayed hot and are
archived to a file of their own, so it would hold them a second time, recorded nowhere.
Only past STALE, in case a process that lost the lock with its database session still
writes.
"""

import contextlib
import logging
import os
import posixpath
from datetime import timedelta
from pathlib import Path

from django.core.files import File
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage
from django.utils import timezone

from runs.machine import crashpoints

from .models import ArchiveFile

logger = logging.getLogger(__name__)
PARTIAL = "partial"
# Far longer than writing one file of ARCHIVE_RUNS_PER_FILE runs takes.
STALE = timedelta(hours=1)


class ArchiveBytes(File):
    """An archive file's bytes, read by a storage chunk by chunk. Between chunks is the
    crash point "mid_write:archive_file" (runs.machine.crashpoints), for the test of a
    process killed in the middle of the write."""

    def chunks(self, chunk_size=None):
        for number, chunk in enumerate(super().chunks(chunk_size)):
            if number:
                crashpoints.reach(crashpoints.MID_WRITE, "archive_file")
            yield chunk


def partial_name(name: str) -> str:
    return f"{PARTIAL}/{posixpath.basename(name)}"


def save_whole(where: Storage, name: str, content: File) -> str:
    """Save `content` as `name` in `where` so that nothing is ever found under `name` but
    the whole file; the name saved."""
    if isinstance(where, FileSystemStorage):
        return _save_on_disk(where, name, content)
    where.save(partial_name(name), ContentFile(name.encode()))
    return where.save(name, content)


def recorded(where: Storage, name: str) -> None:
    """The file `name` is recorded (its ArchiveFile committed): its marker goes."""
    with contextlib.suppress(OSError):
        where.delete(partial_name(name))


def discard(where: Storage, name: str) -> None:
    """A file saved, or begun, that no row will record: it goes, and its marker."""
    for each in (name, partial_name(name)):
        with contextlib.suppress(OSError):
            where.delete(each)


def _save_on_disk(where: FileSystemStorage, name: str, content: File) -> str:
    final, partial = where.path(name), where.path(partial_name(name))
    for directory in (os.path.dirname(final), os.path.dirname(partial)):
        os.makedirs(directory, mode=where.directory_permissions_mode or 0o777, exist_ok=True)
    try:
        with open(partial, "wb") as out:
            for chunk in content.chunks():
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if where.file_permissions_mode is not None:
            os.chmod(partial, where.file_permissions_mode)
        try:
            os.link(partial, final)
        except FileExistsError:
            # As a rename would: the name holds this file.
            os.unlink(final)
            os.link(partial, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise
    # The rename itself on disk, before a row names the file.
    directory = os.open(os.path.dirname(final), os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return name


def remove_stale_partials(where: Storage, *, older_than: timedelta = STALE) -> int:
    """Delete what writes killed before the end left in `where` (see the module), older
    than `older_than`; how many files were deleted. A storage that refuses is logged, not
    raised: the pass's own work does not depend on it."""
    try:
        _, names = where.listdir(PARTIAL)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        logger.warning("could not list %s/ in the archive storage: %s", PARTIAL, exc)
        return 0
    cut = timezone.now() - older_than
    removed = 0
    for base in names:
        try:
            removed += _remove_if_stale(where, f"{PARTIAL}/{base}", cut)
        except OSError as exc:
            logger.warning("could not delete %s/%s from the archive storage: %s", PARTIAL,
                           base, exc)
    return removed


def _remove_if_stale(where: Storage, partial: str, cut) -> int:
    try:
        if where.get_modified_time(partial) > cut:
            return 0
    except NotImplementedError:
        pass  # no time to judge by: the archive lock says no pass is writing it
    removed = 0
    if isinstance(where, FileSystemStorage):
        names = _linked_names(where, partial)
    else:
        with where.open(partial) as marker:
            names = [marker.read().decode(errors="replace")]
    for name in names:
        if (name.startswith("runs/") and where.exists(name)
                and not ArchiveFile.objects.filter(name=name).exists()):
            where.delete(name)
            removed += 1
    where.delete(partial)
    logger.warning("deleted %s, left by an archive file's write that did not finish", partial)
    return removed + 1


def _linked_names(where: FileSystemStorage, partial: str) -> list[str]:
    """The names in `where` of the file whose partial/ name is `partial`: the one it was
    linked to, if the write got that far (none for a write cut short)."""
    path = where.path(partial)
    if os.stat(path).st_nlink < 2:
        return []
    base = posixpath.basename(partial)
    return [found.relative_to(where.location).as_posix()
            for found in Path(where.location).glob(f"runs/*/*/*/{base}")
            if os.path.samefile(found, path)]
