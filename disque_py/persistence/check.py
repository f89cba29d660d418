"""`disque-py check-aof [--fix] FILE`: is an AOF readable, and where not.

Reads the file with the loader's own reader (persistence/aof_format.py) and
reports the first record that cannot be read, with its byte offset and
whether it looks like a torn tail (the file ends inside it: a crash during
a write) or corruption with more data after it. --fix cuts the file at that
offset, keeping every whole record before it; nothing is rewritten in place.
"""

from __future__ import annotations

import mmap
import os

import click

from disque_py.persistence import aof_format


def check_file(path: str) -> tuple[int, int, aof_format.AofDamage | None]:
    """(records read, byte offset where they end, the damage found or None)."""
    size = os.path.getsize(path)
    if size == 0:
        return 0, 0, aof_format.AofDamage(0, "empty file: no header", torn=True)
    count, end = 0, 0
    with open(path, "rb") as handle, \
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        try:
            for record in aof_format.records(data):
                count += 1
                end = record.end
        except aof_format.AofDamage as damage:
            return count, end, damage
    return count, end, None


@click.command("check-aof")
@click.option("--fix", is_flag=True, help="Cut the file at the first unreadable record.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
def check_aof(fix: bool, path: str) -> None:
    """Check an append-only file (and optionally truncate it to its last whole record)."""
    count, end, damage = check_file(path)
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
