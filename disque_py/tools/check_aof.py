"""`disque-py check-aof [--fix] FILE`: is an AOF readable, and where not.

Reports what persistence/check.py finds: the first record that cannot be
read, with its byte offset, and whether it is a torn tail or corruption
with more data after it. --fix cuts the file at that offset, keeping every
whole record before it, and after cutting corruption says how a node of a
cluster gets back the copies it lost with the records after it.

Progress goes to stderr, so stdout stays the report scripts read: on a
terminal click's progress bar, otherwise a plain line at each
PLAIN_STEP_PERCENT of the data (a log keeps a few lines, not a bar's
redraws). A file under PROGRESS_MIN_BYTES is read too fast for either.
"""

from __future__ import annotations

import contextlib
import os
import sys

import click

from disque_py.persistence.progress import ProgressMeter

PROGRESS_MIN_BYTES = 1024 * 1024
# Corruption cut away whole records the node may have confirmed to its
# peers; restarted with its start epoch they would take those copies as back.
CUT_CORRUPTION_ADVICE = (
    "Records after the damage are gone, copies this node had confirmed among them: in a "
    "cluster, delete the 'vars' line of the node's nodes.conf before starting it, so that it "
    "takes a new start epoch and its peers copy its jobs back (docs/healing.md).")
PLAIN_STEP_PERCENT = 10


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
    # Imported here: the reader needs the compiled engine, the rest of
    # `disque-py` does not (a stale build must not stop `disque-py cluster`).
    from disque_py.persistence.check import check_file, cut
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
    cut(path, damage.offset)
    click.echo(f"Successfully truncated the AOF to {damage.offset} bytes.")
    if not damage.torn:
        click.echo(CUT_CORRUPTION_ADVICE)
