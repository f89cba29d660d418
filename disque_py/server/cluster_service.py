"""The cluster, running: membership's decisions carried out over the bus.

Owns the Membership state machine and the ClusterBus transport, runs the
cluster cron (every CRON_PERIOD_MS), turns effects into frames, writes
nodes.conf (at most once per loop turn, atomically; a failed write, such as
on a full disk, is logged once, shown by INFO and retried every second) and
keeps the node's view of the cluster (size, reachable peers, leaving)
current.
Messages arriving on the bus are routed here: membership ones (and EPOCH)
to Membership; job ones to the node once it speaks to peers. It also
chooses the node's start epoch once the AOF is loaded (kept from nodes.conf
when jobs were loaded from an AOF, new otherwise; see node/healing.py) and
tells the node which peers are FAIL and their epochs. It also
holds the bus's authentication settings (cluster-secret, -mode): a change
closes every link, which then reconnect under the new settings.
"""

from __future__ import annotations

import asyncio
import os
from typing import Callable

from disque_py.base import log
from disque_py.formats import bus as msg
from disque_py.cluster import nodes_conf
from disque_py.cluster.bus import ClusterBus
from disque_py.cluster.membership import Membership
from disque_py.cluster.nodes import BUS_PORT_OFFSET, FAIL, HANDSHAKE, options_version_read
from disque_py.base.effects import Connect, DropLink, ReplyOn, SaveConfig, Send
from disque_py.base.disk_faults import DiskFaults
from disque_py.base.errors import StartupError
from disque_py.engine import BusOutbox

CRON_PERIOD_MS = 100
INBOUND_CHECK_TICKS = 10          # check inbound bus links once a second
MAX_PORT = 65535
CHOOSE_PORT = "Choose another port: disque-server --port N (make run PORT=N)."
SAVE_RETRY_TICKS = 10             # a failed nodes.conf save is tried again once a second
INBOUND_IDLE_MIN_MS = 10_000
HEARTBEAT_TYPES = (msg.PING, msg.PONG, msg.MEET)
EPOCH_VAR = "start-epoch"         # nodes.conf: vars start-epoch <n>
NODES_CONF_WAY_OUT = ("Move it away to start this node as a new one (a new ID; its AOF's jobs "
                      "are kept), then CLUSTER MEET it from a member and CLUSTER FORGET its "
                      "old ID on every other node (docs/checking.md, the runbook).")


def load_identity(path: str, port: int, announce_ip: str) -> tuple[bytes, list]:
    """This node's ID from nodes.conf (made and saved at first start), and
    every record the file holds. StartupError if the file is damaged."""
    try:
        records = nodes_conf.load(path)
    except nodes_conf.NodesConfError as error:
        raise StartupError(f"Unrecoverable error: {error}. {NODES_CONF_WAY_OUT}") from None
    if records is None:
        node_id = nodes_conf.new_node_id()
        records = [nodes_conf.NodeRecord(node_id, announce_ip, port, {"myself"})]
        nodes_conf.save(path, records)
        log.notice("No cluster configuration found, I'm %s", node_id)
        return node_id.encode(), records
    myself = next(record for record in records if "myself" in record.flags)
    log.notice("Node configuration loaded, I'm %s", myself.node_id)
    return myself.node_id.encode(), records


class ClusterService:
    def __init__(self, node, config, records: list, announce_ip: str, tls,
                 apply_node_effects: Callable[[], None]) -> None:
        """`tls`: the node's TLS contexts (server/tls.py: the bus's, when
        tls-cluster is yes); `apply_node_effects()`: carries out what the
        node asked for (server/effects.py), after a message or a view
        change gave it something to do."""
        self.node = node
        self.tls = tls
        self.apply_node_effects = apply_node_effects
        self.loop = None                     # the event loop, once started
        self.config = config
        self.config_path = os.path.abspath(config.cluster_config_file)
        self.membership = Membership(node.id, config.port, config.cluster_node_timeout,
                                     node.clock, announce_ip)
        self.membership.load_records(records)
        self.bus = ClusterBus(self)
        node.bus_out = BusOutbox()               # the server sets its on_frames
        self._save_scheduled = False
        # A failed save (a full disk) is not fatal, as it is in Disque: the
        # cron retries it, INFO shows it, the log says it once.
        self.config_save_ok = True
        self.config_save_error = ""
        self.save_faults = DiskFaults()      # DEBUG NODES-CONF-FAULT
        self._cron = None
        self.auth_secret: bytes | None = None
        self.auth_mode = config.cluster_secret_mode
        self._set_secret(config.cluster_secret)
        config.on_change("cluster-node-timeout", self.membership.set_node_timeout)
        config.on_change("cluster-secret", self._set_secret)
        config.on_change("cluster-secret-mode", self._set_secret_mode)
        self.sync_core()

    def _set_secret(self, secret: str | None) -> None:
        self.auth_secret = secret.encode("latin-1") if secret else None
        if self.bus.loop is not None:
            self.bus.reset_links()

    def _set_secret_mode(self, mode: str) -> None:
        self.auth_mode = mode
        if self.bus.loop is not None:
            self.bus.reset_links()

    def bus_tls(self):
        """(server, client) ssl contexts with tls-cluster yes, else None:
        made at start, and again on a CONFIG SET of a TLS file."""
        return self.tls.bus

    @staticmethod
    def check_port(port: int) -> None:
        """StartupError unless the bus port (port + 10000) exists: checked
        before anything listens."""
        if port + BUS_PORT_OFFSET > MAX_PORT:
            raise StartupError(
                f"Port {port} is too high: the cluster bus listens on the port + "
                f"{BUS_PORT_OFFSET}, so the port must be at most {MAX_PORT - BUS_PORT_OFFSET}. "
                f"{CHOOSE_PORT}")

    async def start(self, hosts: list[str | None], port: int) -> None:
        self.loop = asyncio.get_running_loop()
        self.membership.myself.port = port
        bus_port = port + BUS_PORT_OFFSET
        self.check_port(port)
        try:
            await self.bus.listen(hosts, bus_port)
        except OSError as error:
            reason = os.strerror(error.errno) if error.errno else str(error)
            raise StartupError(
                f"Could not listen on the cluster bus port {bus_port} (the port {port} + "
                f"{BUS_PORT_OFFSET}, for the other nodes): {reason}. Every node needs its "
                f"port and the port + {BUS_PORT_OFFSET} free; another node on this machine "
                f"may have one of them. {CHOOSE_PORT}") from None
        # Link to the known nodes now, not a cron period later: a restarted
        # node must be seen alive (its FAIL flag cleared) as soon as possible.
        self._run_cron()

    def stop(self) -> None:
        if self._cron is not None:
            self._cron.cancel()
        self.bus.close()
        if self._save_scheduled or not self.config_save_ok:
            self._save_or_retry_later()

    # ------------------------------------------------------------ events

    def _run_cron(self) -> None:
        membership = self.membership
        membership.tick()
        if membership.ticks % INBOUND_CHECK_TICKS == 0:
            self.bus.close_idle_inbound(max(membership.node_timeout * 2, INBOUND_IDLE_MIN_MS) / 1000)
        if not self.config_save_ok and membership.ticks % SAVE_RETRY_TICKS == 0:
            self._save_or_retry_later()
        self.apply_effects()
        self._cron = self.loop.call_later(CRON_PERIOD_MS / 1000, self._run_cron)

    def wants_link(self, node, generation: int) -> bool:
        return self.membership.is_current(node, generation)

    def on_link_up(self, node) -> None:
        self.membership.link_up(node)
        self.apply_effects()

    def on_link_failed(self, node, generation: int) -> None:
        if self.membership.is_current(node, generation):
            self.membership.link_failed(node)
            self.apply_effects()

    def on_bus_message(self, link, header: msg.Header, body) -> None:
        membership = self.membership
        membership.messages_received += 1
        if header.type in HEARTBEAT_TYPES:
            membership.on_heartbeat(link.node, link, link.peer_ip, link.local_ip, header, body)
        elif header.type == msg.FAIL:
            membership.on_fail(header, body)
        elif header.type == msg.EPOCH:
            membership.on_epoch(header, body)
        else:
            self._on_job_message(header, body)
            return
        self.apply_effects()

    def _on_job_message(self, header: msg.Header, body) -> None:
        """A job message, from known nodes only. It changes no cluster view
        unless it revives its sender, so only then is the view pushed again."""
        membership = self.membership
        sender = membership.nodes.get(header.sender)
        if sender is None or sender.flags & HANDSHAKE:
            return
        membership.heard_from(sender, self.node.clock.now_ms())
        node = self.node
        node.on_peer_message(header.sender, header.type, header.mflags, body)
        if node.effects:
            self.apply_node_effects()
        if membership.effects:
            self.apply_effects()

    def on_fast_frames(self, sender_id: bytes, frames: int) -> None:
        """The bus's fast path (engine/net/link.pxi) took `frames` job
        messages of a known peer in one read: it is alive; carry out what
        they made."""
        membership = self.membership
        membership.messages_received += frames
        sender = membership.nodes.get(sender_id)
        if sender is not None:
            membership.heard_from(sender, self.node.clock.now_ms())
        if self.node.effects:
            self.apply_node_effects()
        if membership.effects:
            self.apply_effects()

    # ------------------------------------------------------------ job messages

    def write_frames(self) -> None:
        """The node's job messages of this turn, encoded per peer by its
        BusOutbox (engine/net/frames.pxi): one write per peer, those that
        wait for the AOF (confirmations) once their records are written."""
        membership, bus, bus_out = self.membership, self.bus, self.node.bus_out
        for node_id, data, frames in bus_out.take(self.node.aof.released_gen):
            node = membership.nodes.get(node_id)
            if node is None:
                bus_out.forget(node_id)          # a forgotten node: its buffers go too
            elif bus.write_frames(node, data, frames):
                membership.messages_sent += frames

    # ------------------------------------------------------------ effects

    def apply_effects(self) -> None:
        membership = self.membership
        for effect in membership.take_effects():
            kind = type(effect)
            if kind is Send:
                frame = msg.encode(membership.header(effect.kind, effect.mflags), effect.body)
                if self.bus.send(effect.node, frame):
                    membership.messages_sent += 1
            elif kind is ReplyOn:
                effect.link.send(msg.encode(membership.header(effect.kind), effect.body))
                membership.messages_sent += 1
            elif kind is Connect:
                self.bus.connect(effect.node, effect.ip, effect.port, effect.generation)
            elif kind is DropLink:
                self.bus.drop(effect.node)
            elif kind is SaveConfig:
                self._schedule_save()
        self.sync_core()
        if self.node.effects:        # a new view may release parked clients
            self.apply_node_effects()

    def sync_core(self) -> None:
        """The node's view of the cluster, and how its frames name it."""
        membership = self.membership
        header = membership.header(0)
        self.node.bus_out.set_sender(header.sender, header.port, header.flags)
        peers = membership.peers()
        known = {node.id for node in peers if not node.flags & HANDSHAKE}
        linked = [node.id for node in membership.reachable if node.linked]
        failed = [node.id for node in peers if node.flags & FAIL]
        self.node.set_cluster_view(membership.size, known, len(membership.reachable), linked,
                                   membership.leaving, failed, membership.epochs())
        self.node.options_readers = {node.id: options_version_read(node.capabilities)
                                     for node in peers}

    def choose_start_epoch(self, loaded_from_aof: bool, whole: bool = True) -> int:
        """This run's start epoch: the one nodes.conf keeps when the jobs
        were loaded from an AOF (they are back: peers must not think them
        lost), else a new one, saved before any peer can learn it; a new
        one too when the AOF was not `whole` (a record cut short was
        dropped: copies it had confirmed may be gone)."""
        kept = nodes_conf.load_vars(self.config_path).get(EPOCH_VAR, "")
        keep = loaded_from_aof and whole and kept.isdigit() and int(kept)
        epoch = int(kept) if keep else 0
        if not epoch:
            epoch = int.from_bytes(os.urandom(8), "big") or 1
            log.notice("Start epoch %016x (%s)", epoch, _why_new_epoch(kept, loaded_from_aof))
        self.membership.epoch = epoch
        if str(epoch) != kept:
            self._save_or_retry_later()
        return epoch

    def _schedule_save(self) -> None:
        if not self._save_scheduled:
            self._save_scheduled = True
            self.loop.call_soon(self._save_or_retry_later)

    def save_config(self) -> None:
        """Write nodes.conf now (atomically). Raises OSError on failure (the
        temporary file removed); the cron then retries until a save works."""
        self._save_scheduled = False
        try:
            variables = {EPOCH_VAR: str(self.membership.epoch)} if self.membership.epoch else None
            nodes_conf.save(self.config_path, self.membership.records(), self.save_faults,
                            variables)
        except OSError as error:
            reason = error.strerror or str(error)
            if self.config_save_ok or reason != self.config_save_error:   # not every retry
                log.warning("Cannot save the cluster config %s (%s): retrying every second; "
                            "until then a restart would come back with the last saved state",
                            self.config_path, reason)
            self.config_save_ok = False
            self.config_save_error = reason
            raise
        if not self.config_save_ok:
            log.notice("Cluster config saved again: %s", self.config_path)
            self.config_save_ok = True
            self.config_save_error = ""

    def _save_or_retry_later(self) -> None:
        """A save from the loop: its failure is logged, shown by INFO and
        retried by the cron, never raised into the event loop."""
        try:
            self.save_config()
        except OSError:
            pass

    # ------------------------------------------------------------ commands

    def meet(self, ip: str, port: int) -> bool:
        started = self.membership.meet(ip, port)
        self.apply_effects()
        return started

    def forget(self, node) -> None:
        self.membership.forget(node)
        self.apply_effects()

    def reset(self, hard: bool) -> None:
        """CLUSTER RESET: forget every peer and every job; HARD: a new node ID."""
        node = self.node
        node.flush_all()
        new_id = None
        if hard:
            new_id = nodes_conf.new_node_id().encode()
            node.set_node_id(new_id)
        self.membership.reset(new_id)
        self.apply_effects()

    def set_leaving(self, leaving: bool) -> None:
        self.membership.set_leaving(leaving)
        self.apply_effects()

    # ------------------------------------------------------------ views

    def info_fields(self) -> list[tuple[str, object]]:
        membership = self.membership
        return [
            ("cluster_state", "ok"),
            ("cluster_known_nodes", len(membership.nodes)),
            ("cluster_reachable_nodes", len(membership.reachable)),
            ("cluster_size", membership.size),
            ("cluster_stats_messages_sent", membership.messages_sent),
            ("cluster_stats_messages_received", membership.messages_received),
            ("cluster_leaving", "yes" if membership.leaving else "no"),
            ("cluster_config_save_ok", int(self.config_save_ok)),
            ("cluster_config_save_error", self.config_save_error),
            ("cluster_bus_auth", ("off" if self.auth_secret is None else self.auth_mode)),
            *((f"cluster_bus_{name}", count) for name, count in self.bus.stats.items()),
            *self.node.healing.info(),
        ]


def _why_new_epoch(kept: str, loaded_from_aof: bool) -> str:
    if not kept:
        return "none saved before"
    if not loaded_from_aof:
        return ("no jobs loaded from an AOF: the copies this node held are gone, "
                "its peers will copy them again")
    return ("the AOF's last record was cut short and dropped: copies this node had "
            "confirmed may be gone, its peers will copy them again")
