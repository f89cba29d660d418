"""`disque-py worker module:attribute`: run a Worker from the command line.

The attribute is a disque_py.client.Worker with its handlers registered.
--url, --concurrency and --grace replace the worker's own; --queues keeps
only the handlers of the queues (or patterns) named; --burst stops it once
its queues are empty. SIGTERM and SIGINT
stop it cleanly (the Worker's text says what that means); on a terminal a
progress line shows jobs done, failed and the rate. The exit status is 0
after a clean stop, 1 when the worker cannot start.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import sys

import click
import uvloop

from disque_py.client import AsyncClient
from disque_py.client.worker import Worker

PROGRESS_EVERY_S = 1.0


def load_worker(target: str) -> Worker:
    """The Worker at `module:attribute`, the current directory importable."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise click.BadParameter("give the worker as module:attribute, e.g. tasks:worker",
                                 param_hint="TARGET")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise click.BadParameter(f"cannot import {module_name!r}: {error}",
                                 param_hint="TARGET") from None
    worker = getattr(module, attribute, None)
    if not isinstance(worker, Worker):
        raise click.BadParameter(f"{target} is not a disque_py.client.Worker "
                                 f"(it is {type(worker).__name__})", param_hint="TARGET")
    return worker


def keep_only(worker: Worker, sources: list[str]) -> None:
    unknown = [source for source in sources if source not in worker.routes]
    if unknown:
        raise click.BadParameter(f"no handler for {', '.join(unknown)} (the worker has "
                                 f"{', '.join(worker.routes)})", param_hint="'--queues'")
    worker.routes = {source: worker.routes[source] for source in sources}


async def serve_with_progress(worker: Worker, progress: bool, burst: bool) -> None:
    async def show() -> None:
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            click.echo("\r" + worker.stats.line() + "   ", nl=False, err=True)

    shower = asyncio.create_task(show()) if progress else None
    try:
        await worker.serve(install_signals=True, burst=burst)
    finally:
        if shower is not None:
            shower.cancel()
            click.echo("\r" + worker.stats.line(), err=True)


@click.command()
@click.argument("target")
@click.option("--url", envvar="DISQUE_URL", default=None,
              help="The nodes: disque://host:port[,host:port...] (disques:// for TLS) "
                   "[default: the worker's own].")
@click.option("--concurrency", type=click.IntRange(1), default=None,
              help="Jobs run at once [default: the worker's own].")
@click.option("--queues", default=None, metavar="NAME[,NAME...]",
              help="Serve only the handlers of these queues or patterns.")
@click.option("--grace", type=click.FloatRange(min=0), default=None,
              help="Seconds running jobs get to finish after SIGTERM [default: the "
                   "worker's own].")
@click.option("--burst", is_flag=True,
              help="Stop once every queue served is empty and no job runs.")
@click.option("--progress/--no-progress", default=None,
              help="A progress line on stderr [default: when stderr is a terminal].")
def worker(target, url, concurrency, queues, grace, burst, progress) -> None:
    """Run the Worker at TARGET (module:attribute) until SIGTERM or SIGINT."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    running = load_worker(target)
    if url is not None:
        running.client = AsyncClient(url, serializer=running.client.codec)
    if concurrency is not None:
        running.concurrency = running.batch = concurrency
    if grace is not None:
        running.grace = grace
    if queues:
        keep_only(running, [name.strip() for name in queues.split(",") if name.strip()])
    if progress is None:
        progress = sys.stderr.isatty()
    uvloop.run(serve_with_progress(running, progress, burst))
    if running.threads_busy:
        logging.getLogger("disque_py.worker").warning(
            "handlers still running in threads after the grace: exiting without them")
        logging.shutdown()
        os._exit(0)
