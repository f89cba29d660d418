"""The client's URLs (disque_py/client/settings.py), without sockets: the
node addresses (several, IPv6, ports), AUTH, TLS, redis-py's connection
options from the query and from keyword arguments, and every malformed
URL refused with a ValueError that says what is wrong.
"""

from __future__ import annotations

import warnings

import pytest
from redis.connection import Connection

from disque_py.client.settings import DEFAULT_PORT, settings_from


def parsed(url, nodes=None, **options):
    return settings_from(url, nodes, options)


@pytest.mark.parametrize("url, addresses", [
    (None, [("127.0.0.1", DEFAULT_PORT)]),
    ("disque://db.example", [("db.example", 7711)]),
    ("disque://a:7001,b:7002,c", [("a", 7001), ("b", 7002), ("c", 7711)]),
    ("disque:// a:1 , ,b:2", [("a", 1), ("b", 2)]),
    ("disque://[::1]:7712,[fe80::2]", [("::1", 7712), ("fe80::2", 7711)]),
    ("disque://::1", [("::1", 7711)]),
    ("disque://h:65535/ignored-path", [("h", 65535)]),
])
def test_addresses_are_read_in_order_with_7711_by_default(url, addresses):
    assert parsed(url).addresses == addresses


def test_nodes_add_addresses_once_and_alone_make_the_list():
    settings = parsed("disque://a:1", nodes=["b:2", ("c", "3"), "a:1", ("a", 1)])
    assert settings.addresses == [("a", 1), ("b", 2), ("c", 3)]
    assert parsed(None, nodes=["[::1]:9"]).addresses == [("::1", 9)]


@pytest.mark.parametrize("userinfo, password", [
    (":s3cret", "s3cret"),
    ("s3cret", "s3cret"),
    ("alice:s3cret", "s3cret"),                  # Disque has no users: the name is dropped
    ("al%40ice:p%3Ass%40%20w", "p:ss@ w"),
])
def test_the_password_comes_from_the_userinfo(userinfo, password):
    settings = parsed(f"disque://{userinfo}@h:1,k:2")
    assert settings.options == {"password": password, "protocol": 2}
    assert settings.addresses == [("h", 1), ("k", 2)]


def test_query_options_are_redis_pys_typed_as_it_types_them():
    settings = parsed("disque://h?socket_timeout=0.5&protocol=2&socket_keepalive=yes"
                      "&health_check_interval=30&ssl_cert_reqs=none")
    assert settings.options == {"socket_timeout": 0.5, "protocol": 2, "socket_keepalive": True,
                                "health_check_interval": 30, "ssl_cert_reqs": "none"}
    assert settings.tls is False


def test_keyword_options_add_to_the_urls_and_win():
    settings = parsed("disque://:pw@h?socket_timeout=0.5", socket_timeout=2, protocol=3)
    assert settings.options == {"socket_timeout": 2, "protocol": 3, "password": "pw"}


def test_disques_is_tls():
    settings = parsed("disques://:pw@h:6380?ssl_ca_certs=/ca.pem")
    assert settings.tls is True
    assert settings.options == {"password": "pw", "ssl_ca_certs": "/ca.pem", "protocol": 2}


def test_connection_options_name_the_node_and_turn_off_client_setinfo():
    options = parsed("disque://a:1,b:2?socket_timeout=3").connection_options(("b", 2))
    assert (options["host"], options["port"], options["socket_timeout"]) == ("b", 2, 3.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # and without a deprecated option
        connection = Connection(**options)
    assert getattr(connection, "driver_info", None) is None    # no CLIENT SETINFO


@pytest.mark.parametrize("url, words", [
    ("redis://h:7711", "a client URL is disque://"),
    ("disque:/h", "a client URL is disque://"),
    ("h:7711", "a client URL is disque://"),
    ("disque://", "no node address"),
    ("disque://:pw@", "no node address"),
    ("disque://h:port", "bad port"),
    ("disque://h:", "bad port"),
    ("disque://h:0", "bad port"),
    ("disque://h:-1", "bad port"),
    ("disque://h:65536", "bad port"),
    ("disque://h:+1", "bad port"),
    ("disque://[::1]:x", "bad port"),
    ("disque://:7711", "no host"),
    ("disque://[]:7711", "no host"),
    ("disque://[::1", "IPv6"),
    ("disque://[::1]7711", "IPv6"),
    ("disque://h:1:2", "IPv6"),
    ("disque://h?socket_timeout=soon", "socket_timeout"),
    ("disque://h?protocol=three", "protocol"),
])
def test_a_malformed_url_is_refused_with_what_is_wrong(url, words):
    with pytest.raises(ValueError, match=words):
        parsed(url)


def test_a_malformed_extra_node_is_refused():
    with pytest.raises(ValueError, match="bad port"):
        parsed("disque://h", nodes=["k:70000"])


def test_resp2_unless_asked_for_resp3():
    assert parsed("disque://h").options["protocol"] == 2
    assert parsed("disque://h?protocol=3").options["protocol"] == 3
