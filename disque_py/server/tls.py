"""TLS: the configuration (tls-* directives) turned into ssl.SSLContext objects.

Nothing here listens or connects: TlsContexts builds the contexts the
configuration asks for (the client TLS listener's, server_context(); the
cluster bus's when `tls-cluster yes`, bus_server_context() and
bus_client_context()) and builds them again when CONFIG SET changes a TLS
file.

The directives are Redis 6's, with Redis's meaning:
  tls-cert-file / tls-key-file  the node's certificate and private key (PEM),
                                shown to clients and, on the bus, to other nodes
  tls-ca-cert-file              the CA bundle client (and peer) certificates are
                                checked against
  tls-auth-clients              yes: a client must present a certificate signed
                                by that CA; optional: checked if presented;
                                no: not asked for
  tls-protocols                 the TLS versions offered (default TLSv1.2 and TLSv1.3)
The bus is always mutual TLS: each side presents the node certificate and
checks the other's against tls-ca-cert-file. Peers are reached by IP, so,
as in Redis, the peer's host name is not checked, only its chain.

Every failure raises TlsConfigError naming the directive and the file, so
that start-up (or CONFIG SET) can say exactly what to fix.
"""

from __future__ import annotations

import ssl

from disque_py.base.errors import CommandError, StartupError
from disque_py.base.replies import TLS_NOT_UPDATED

# tls-protocols words, oldest first (config/kinds.py: TlsProtocols keeps this order).
VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}


class TlsConfigError(Exception):
    """A TLS directive cannot be put into effect (message names it)."""


class TlsContexts:
    """The node's TLS contexts: `listener`, the client TLS listener's (the
    one it was opened with); `current`, the one new TLS clients get (they
    differ after a CONFIG SET of a TLS file); `bus`, (server, client)
    contexts for the cluster bus when tls-cluster is yes, else None."""

    def __init__(self, config) -> None:
        self.config = config
        self.listener = None
        self.current = None
        self.bus = None

    def load(self) -> None:
        """Build the contexts at start-up; StartupError (naming the
        directive and file) if they cannot be."""
        config = self.config
        if config.tls_port and config.tls_port == config.port:
            raise StartupError(f"tls-port {config.tls_port} is also the plain port: "
                               "give TLS clients a port of their own")
        try:
            self._build()
        except TlsConfigError as error:
            raise StartupError(f"Failed to configure TLS: {error}") from None
        listener = self.listener = self.current
        if listener is not None:
            # A context cannot be swapped under a listening server; instead,
            # each handshake is moved, before the certificate is chosen, to
            # the newest context (reload). Verification mode and protocol
            # versions stay the listener's: they cannot be SET.
            listener.sni_callback = self._use_current

    def reload(self, _value) -> None:
        """CONFIG SET of a TLS file reads every TLS file again: new
        connections (clients and bus) get them, open ones keep theirs. If one
        cannot be loaded the SET is refused and the old contexts stay."""
        try:
            self._build()
        except TlsConfigError as error:
            raise CommandError(TLS_NOT_UPDATED % error) from None

    def _build(self) -> None:
        config = self.config
        client = server_context(config) if config.tls_port else None
        bus = (bus_server_context(config), bus_client_context(config)) \
            if config.tls_cluster else None
        self.current, self.bus = client, bus

    def _use_current(self, ssl_object, server_name, listener) -> None:
        current = self.current
        if current is not listener:
            ssl_object.context = current


def server_context(config) -> ssl.SSLContext:
    """The context of the client TLS listener (tls-port)."""
    context = _context(ssl.PROTOCOL_TLS_SERVER, config)
    _load_identity(context, config)
    auth = config.tls_auth_clients
    ca_file = config.tls_ca_cert_file
    if auth != "no" and not ca_file:
        raise TlsConfigError(f"tls-auth-clients is '{auth}' but tls-ca-cert-file is not set: "
                             "set it to the CA that signs client certificates, or set "
                             "tls-auth-clients no")
    if ca_file:
        _load_ca(context, ca_file)
    context.verify_mode = {"yes": ssl.CERT_REQUIRED, "optional": ssl.CERT_OPTIONAL,
                           "no": ssl.CERT_NONE}[auth]
    return context


def bus_server_context(config) -> ssl.SSLContext:
    """The cluster bus listener's context: peers must present a certificate
    signed by tls-ca-cert-file."""
    context = _context(ssl.PROTOCOL_TLS_SERVER, config)
    _load_identity(context, config)
    _load_ca(context, _bus_ca(config))
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def bus_client_context(config) -> ssl.SSLContext:
    """The context for connecting to a peer's bus: presents the node
    certificate, checks the peer's chain against tls-ca-cert-file (not its
    host name: peers are addressed by IP)."""
    context = _context(ssl.PROTOCOL_TLS_CLIENT, config)
    _load_identity(context, config)
    _load_ca(context, _bus_ca(config))
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def _context(protocol: int, config) -> ssl.SSLContext:
    context = ssl.SSLContext(protocol)
    versions = [VERSIONS[name] for name in config.tls_protocols]
    try:
        context.minimum_version = min(versions)
        context.maximum_version = max(versions)
    except (ValueError, OSError) as exc:
        raise TlsConfigError(f"tls-protocols '{' '.join(config.tls_protocols)}': "
                             f"not supported by this OpenSSL ({exc})") from None
    return context


def _load_identity(context: ssl.SSLContext, config) -> None:
    cert_file, key_file = config.tls_cert_file, config.tls_key_file
    if not cert_file or not key_file:
        missing = "tls-cert-file" if not cert_file else "tls-key-file"
        raise TlsConfigError(f"{missing} is not set: TLS needs the node's certificate "
                             "(tls-cert-file) and private key (tls-key-file)")
    _readable("tls-cert-file", cert_file)
    _readable("tls-key-file", key_file)
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=cert_file)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"tls-cert-file '{cert_file}': can't read a PEM certificate "
                             f"from it ({_reason(exc)})") from None
    try:
        # A callable password: an encrypted key fails here instead of
        # OpenSSL prompting on the terminal of a server.
        context.load_cert_chain(cert_file, key_file, password=_no_password)
    except _EncryptedKey:
        raise TlsConfigError(f"tls-key-file '{key_file}': the key is encrypted; "
                             "give the server an unencrypted key") from None
    except ssl.SSLError as exc:
        if exc.reason == "KEY_VALUES_MISMATCH":
            raise TlsConfigError(f"tls-key-file '{key_file}' is not the key of "
                                 f"tls-cert-file '{cert_file}'") from None
        raise TlsConfigError(f"tls-key-file '{key_file}': can't read a PEM private key "
                             f"from it ({_reason(exc)})") from None


def _load_ca(context: ssl.SSLContext, ca_file: str) -> None:
    _readable("tls-ca-cert-file", ca_file)
    try:
        context.load_verify_locations(cafile=ca_file)
    except ssl.SSLError as exc:
        raise TlsConfigError(f"tls-ca-cert-file '{ca_file}': can't load CA certificates "
                             f"({_reason(exc)})") from None


def _bus_ca(config) -> str:
    ca_file = config.tls_ca_cert_file
    if not ca_file:
        raise TlsConfigError("tls-cluster is yes but tls-ca-cert-file is not set: nodes "
                             "check each other's certificates against that CA")
    return ca_file


def _readable(directive: str, path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise TlsConfigError(f"{directive} '{path}': can't open it "
                             f"({exc.strerror or exc})") from None


class _EncryptedKey(Exception):
    pass


def _no_password() -> bytes:
    raise _EncryptedKey


def _reason(exc: ssl.SSLError) -> str:
    return exc.reason or "not readable as PEM"
