"""Protected mode's decision (config/protected_mode.py) and the TLS directives' parsing.

No sockets: the decision is a function of the peer address and the config.
"""

from __future__ import annotations

import pytest

from disque_py.config import Config
from disque_py.base.errors import ConfigError
from disque_py.config.protected_mode import DENIED, allows, is_local

REMOTE = ("10.200.0.2", 40000)


def config(*args: str) -> Config:
    return Config.load(None, list(args))


@pytest.mark.parametrize("peer", [
    ("127.0.0.1", 5000), ("127.3.4.5", 5000), ("::1", 5000, 0, 0),
    ("::ffff:127.0.0.1", 5000, 0, 0),     # IPv4 loopback through a dual-stack socket
    "", "/tmp/disque.sock", b"\0abstract",  # Unix socket clients
])
def test_loopback_and_unix_clients_are_local(peer):
    assert is_local(peer)
    assert allows(peer, config())


@pytest.mark.parametrize("peer", [
    REMOTE, ("192.168.1.7", 1), ("::ffff:10.0.0.1", 1, 0, 0), ("2001:db8::1", 1, 0, 0),
    ("fe80::1%eth0", 1, 0, 2), ("0.0.0.0", 1), ("not-an-address", 1), None, (),
])
def test_other_clients_are_refused_by_default(peer):
    assert not is_local(peer)
    assert not allows(peer, config())


@pytest.mark.parametrize("args", [
    ["--protected-mode", "no"],
    ["--bind", "0.0.0.0"],                # an explicit bind, even to every interface
    ["--bind", "127.0.0.1", "10.200.0.1"],
    ["--requirepass", "secret"],
])
def test_any_way_out_serves_other_clients(args):
    assert allows(REMOTE, config(*args))


def test_config_set_turns_it_off_and_on():
    settings = config()
    settings.set(b"protected-mode", b"no")
    assert allows(REMOTE, settings)
    settings.set(b"protected-mode", b"yes")
    assert not allows(REMOTE, settings)
    settings.set(b"requirepass", b"pw")
    assert allows(REMOTE, settings)
    settings.set(b"requirepass", b"")     # no password again: protected again
    assert not allows(REMOTE, settings)


def test_denied_reply_is_one_resp_error_naming_the_ways_out():
    assert DENIED.startswith(b"-DENIED ") and DENIED.endswith(b"\r\n")
    assert DENIED.count(b"\r") == 1 and DENIED.count(b"\n") == 1
    for hint in (b"CONFIG SET protected-mode no", b"--protected-mode no", b"bind",
                 b"requirepass", b"protected-mode no"):
        assert hint in DENIED


def test_protected_mode_shows_and_defaults():
    assert config().protected_mode is True
    assert config().get_matching(b"protected-mode") == [b"protected-mode", b"yes"]
    assert config("--protected-mode", "no").protected_mode is False


# --------------------------------------------------------------------------
# TLS directives


def test_tls_defaults_are_redis_6s():
    settings = config()
    assert settings.tls_port == 0
    assert settings.tls_cert_file is None and settings.tls_key_file is None
    assert settings.tls_ca_cert_file is None
    assert settings.tls_auth_clients == "yes"
    assert settings.tls_protocols == ("TLSv1.2", "TLSv1.3")
    assert settings.tls_cluster is False
    shown = dict(zip(*[iter(settings.get_matching(b"tls-*"))] * 2))
    assert shown == {b"tls-port": b"0", b"tls-cert-file": b"", b"tls-key-file": b"",
                     b"tls-ca-cert-file": b"", b"tls-auth-clients": b"yes",
                     b"tls-protocols": b"TLSv1.2 TLSv1.3", b"tls-cluster": b"no"}


@pytest.mark.parametrize("words, expected", [
    (["TLSv1.3"], ("TLSv1.3",)),
    (["tlsv1.3 TLSv1.2"], ("TLSv1.2", "TLSv1.3")),     # one quoted argument, any case
    (["TLSv1.2", "TLSv1.3"], ("TLSv1.2", "TLSv1.3")),  # or several
    (["TLSv1 TLSv1.1 TLSv1.2"], ("TLSv1", "TLSv1.1", "TLSv1.2")),
])
def test_tls_protocols_parse(words, expected):
    assert config("--tls-protocols", *words).tls_protocols == expected


@pytest.mark.parametrize("words, message", [
    (["SSLv3"], "Unknown TLS protocol 'SSLv3'"),
    (["TLSv1 TLSv1.3"], "consecutive"),
    ([""], "No TLS protocol"),
])
def test_tls_protocols_refused(words, message):
    with pytest.raises(ConfigError) as info:
        config("--tls-protocols", *words)
    assert message in str(info.value) and info.value.directive == "tls-protocols"


@pytest.mark.parametrize("args, message", [
    (["--tls-port", "65536"], "Invalid tls-port"),
    (["--tls-auth-clients", "maybe"], "'yes', 'no' or 'optional'"),
    (["--tls-cluster", "sometimes"], "yes"),
])
def test_bad_tls_values_stop_loading(args, message):
    with pytest.raises(ConfigError) as info:
        config(*args)
    assert message in str(info.value)


def test_only_the_tls_files_can_be_set_at_run_time():
    settings = config()
    settings.set(b"tls-cert-file", b"/etc/disque/node.crt")   # nothing uses TLS: just kept
    assert settings.tls_cert_file == "/etc/disque/node.crt"
    for name in (b"tls-port", b"tls-auth-clients", b"tls-protocols", b"tls-cluster"):
        with pytest.raises(Exception, match="Unsupported CONFIG parameter"):
            settings.set(name, b"no")


def test_tls_directives_survive_rewrite(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "disque.conf"
    path.write_text("port 7711\n")
    settings = Config.load(str(path), ["--tls-port", "7712", "--tls-protocols", "TLSv1.3",
                                       "--tls-cert-file", "my cert.pem",
                                       "--tls-auth-clients", "optional",
                                       "--protected-mode", "no"])
    settings.rewrite()
    text = path.read_text()
    assert 'tls-protocols "TLSv1.3"' in text and 'tls-cert-file "my cert.pem"' in text
    again = Config.load(str(path), [])
    for name in ("tls-port", "tls-protocols", "tls-cert-file", "tls-auth-clients",
                 "protected-mode"):
        assert again.value(name) == settings.value(name)
