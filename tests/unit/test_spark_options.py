"""The `disque` data source's options and the ADDJOB bytes they make,
checked without a JVM (pyspark's Python side only): what reaches the
server is exactly Disque's ADDJOB, with DEDUP and PRIORITY where asked."""

from __future__ import annotations

import pytest
from pyspark.sql.types import LongType, MapType, StringType, StructField, StructType

from disque_py.formats.resp import encode_command
from disque_py.spark.datasource import OptionError, SinkOptions
from disque_py.spark.partition_writer import PartitionWriter, WriteOptions
from disque_py.spark.rows import body_encoder, map_columns

SCHEMA = StructType([StructField("id", LongType()), StructField("email", StringType())])


def parse(streaming=False, **options):
    given = {"queue": "q", "nodes": "h:2,h:1"}
    given.update(options)
    return SinkOptions.parse(given, SCHEMA, streaming)


def test_batch_defaults_follow_the_cluster_without_dedup():
    options = parse()
    assert (options.write.dedup, options.write.follow_cluster, options.routed) == \
        (False, True, [])
    assert options.write.nodes == ["h:2", "h:1"]


def test_streaming_always_routes_by_key_over_the_sorted_nodes():
    options = parse(streaming=True)
    assert (options.write.dedup, options.write.follow_cluster) == (True, False)
    assert options.routed == ["h:1", "h:2"]
    with pytest.raises(OptionError, match="always uses DEDUP"):
        parse(streaming=True, dedup="false")


@pytest.mark.parametrize("options, message", [
    ({"queue": ""}, "option queue is required"),
    ({"nodes": " , "}, "option nodes is required"),
    ({"ttl": "1h"}, "option ttl must be an integer"),
    ({"async": "perhaps"}, "option async must be true or false"),
    ({"body_column": "missing"}, "no column 'missing'"),
    ({"Colour": "red"}, r"unknown option\(s\) colour"),
])
def test_bad_options_name_the_option(options, message):
    with pytest.raises(OptionError, match=message):
        parse(**options)


def test_spark_options_are_not_ours_to_refuse():
    assert parse(checkpointLocation="/tmp/x").write.queue == "q"


def sent(options: WriteOptions, rows) -> bytes:
    """The bytes a writer puts on the wire for `rows`."""
    writer = PartitionWriter(options, 0)
    wire = []
    writer._send = lambda commands: wire.extend(command for _, command in commands)
    writer.send(rows)
    return b"".join(wire)


def test_dedup_and_priority_are_adjob_options():
    options = WriteOptions(queue="q", nodes=["h:1"], ttl=60, priority=7, dedup=True)
    assert sent(options, [("k1", b"body")]) == encode_command(
        "ADDJOB", "q", "body", "5000", "TTL", "60", "PRIORITY", "7", "DEDUP", "k1")


def test_without_dedup_the_key_stays_off_the_wire():
    options = WriteOptions(queue="q", nodes=["h:1"], asynchronous=True)
    assert sent(options, [("k1", b"body")]) == encode_command("ADDJOB", "q", "body", "5000",
                                                              "ASYNC")


def test_bodies_carry_the_key_and_maps_become_objects():
    encode = body_encoder(lambda row: row)
    assert encode({"id": 1, "tags": {"a": 1}}, "k") == \
        b'{"id":1,"tags":{"a":1},"_disque_key":"k"}'
    assert body_encoder(lambda row: row, "email", row_key=False)({"email": "x@y"}, "k") == b"x@y"
    assert body_encoder(lambda row: row, "email")({"email": "x@y"}, "k") == \
        b'{"_disque_key":"k","body":"x@y"}'
    schema = StructType([StructField("tags", MapType(StringType(), LongType()))])
    assert map_columns(schema.fields) == ["tags"]
