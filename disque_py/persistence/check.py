"""`disque-py check-aof [--fix] FILE`: is an AOF readable, and where not.

Reads the file with the loader's own reader (persistence/aof_format.py) and
reports the first record that cannot be read, with its byte offset and
whether it looks like a torn tail (the file ends inside it: a crash during
a write) or corruption with more data after it. --fix cuts the file at that
offset, keeping every whole record before it; nothing is rewritten in place.

Progress goes to stderr, so stdout stays the report scripts read: on a
terminal click's progress bar, otherwise a plain line at each
PLAIN_STEP_PERCENT of the data (a log keeps a few lines, not a bar's
redraws). A file under PROGRESS_MIN_BYTES is read too fast for either.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import sys

import click

from disque_py.persistence import aof_format
from disque_py.persistence.progress import ProgressMeter

PROGRESS_MIN_BYTES = 1024 * 1024
PROGRESS_EVERY_RECORDS = 10_000      # records read between two reports
PLAIN_STEP_PERCENT = 10


def check_file(path: str, progress=None) -> tuple[int, int, aof_format.AofDamage | None]:
    """(records read, byte offset where they end, the damage found or None).
    `progress(total)`, if given, is a context manager entered around the
    reading of the `total` bytes of data; it gives report(done, records),
    called every PROGRESS_EVERY_RECORDS records and once at the end."""
    size = os.path.getsize(path)
    if size == 0:
        return 0, 0, aof_format.AofDamage(0, "empty file: no header", torn=True)
    with open(path, "rb") as handle, \
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        with (progress or _no_progress)(aof_format.data_end(data)) as report:
            return _read_records(data, report)


def _read_records(data, report) -> tuple[int, int, aof_format.AofDamage | None]:
    count, end, damage = 0, 0, None
    try:
        for record in aof_format.records(data):
            count += 1
            end = record.end
            if report is not None and not count % PROGRESS_EVERY_RECORDS:
                report(end, count)
    except aof_format.AofDamage as found:
        damage = found
    if report is not None:
        report(end, count)
    return count, end, damage


@contextlib.contextmanager
def _no_progress(total: int):
    yield None


def progress_for(path: str, terminal: bool):
    """The progress of checking `path`: a bar on a terminal, plain lines
    otherwise, none for a small file (see the module's opening)."""
    if os.path.getsize(path) < PROGRESS_MIN_BYTES:
        return None
    return _terminal_bar(os.path.basename(path)) if terminal else _plain_lines


def _terminal_bar(name: str):
    @contextlib.contextmanager
    def bar(total: int):
        with click.progressbar(length=total, label=f"Checking {name}", file=sys.stderr,
                               show_percent=True, show_eta=True,
                               item_show_func=lambda n: f"{n} records" if n else None) as shown:
            yield lambda done, records: shown.update(done - shown.pos, records)
    return bar


@contextlib.contextmanager
def _plain_lines(total: int):
    meter = ProgressMeter(total)
    shown = 0                         # the last PLAIN_STEP_PERCENT step shown

    def report(done: int, records: int) -> None:
        nonlocal shown
        meter.update(done, records)
        step = int(meter.percent) // PLAIN_STEP_PERCENT
        if step > shown:
            shown = step
            click.echo(f"check-aof: {meter.describe('records')}", err=True)
    yield report


@click.command("check-aof")
@click.option("--fix", is_flag=True, help="Cut the file at the first unreadable record.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
def check_aof(fix: bool, path: str) -> None:
    """Check an append-only file (and optionally truncate it to its last whole record)."""
    count, end, damage = check_file(path, progress_for(path, sys.stderr.isatty()))
    size = os.path.getsize(path)
    if damage is None:
        click.echo(f"AOF is valid: {count} records, {end} bytes of data"
                   + (f" ({size - end} bytes of reserved space)" if size > end else ""))
        return
    kind = "torn last record" if damage.torn else "corruption"
    click.echo(f"AOF is not valid: {kind}: {damage.reason} at byte offset {damage.offset} "
               f"({count} whole records before it, {size - damage.offset} bytes from there "
               f"to the end)")
    if not fix:
        click.echo(f"Run 'disque-py check-aof --fix {path}' to cut the file at byte offset "
                   f"{damage.offset}.")
        raise SystemExit(1)
    if damage.offset == 0:
        click.echo("Nothing readable to keep: not cutting the file to zero bytes.")
        raise SystemExit(1)
    with open(path, "r+b") as handle:
        handle.truncate(damage.offset)
        handle.flush()
        os.fsync(handle.fileno())
    click.echo(f"Successfully truncated the AOF to {damage.offset} bytes.")
