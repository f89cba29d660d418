"""The RESP codec: the engine's request parser against Disque's, and the
reply encoders byte for byte.

The parser reads a command over any number of reads, keeping what it
parsed; feeding a stream whole, one byte at a time and at random cuts must
give the same commands and the same error.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from disque_py.base.errors import (AckedError, CommandError, LeavingError, NoJobError, NoReplError,
                                   PausedError, ProtocolError)
from disque_py.engine import (BULK_MAX_LENGTH, INLINE_MAX_SIZE, MULTIBULK_MAX_COUNT,
                              RequestParser as RequestReader)
from disque_py.formats.resp import (EMPTY_ARRAY, NULL_ARRAY, NULL_BULK, OK, PONG, Map, Raw,
                                    SetReply, Verbatim, encode, encode_bulk, encode_command)
from disque_py.base.splitargs import UnbalancedQuotes, split_line


def mb(*args: bytes) -> bytes:
    """A canonical multibulk request."""
    return encode_command(*args)


def _outcome(commands, reader):
    return commands, reader.error


def feed_whole(data: bytes):
    reader = RequestReader()
    commands = reader.feed(data)
    return _outcome(commands, reader)


def feed_bytewise(data: bytes):
    reader = RequestReader()
    commands = []
    for i in range(len(data)):
        commands += reader.feed(data[i:i + 1])
    return _outcome(commands, reader)


def feed_chunks(data: bytes, cuts):
    reader = RequestReader()
    commands, start = [], 0
    for cut in sorted(set(cuts)) + [len(data)]:
        commands += reader.feed(data[start:cut])
        start = cut
    return _outcome(commands, reader)


def message(error):
    if error is None or isinstance(error, str):
        return error
    return error.message


def protocol_error(detail: str) -> str:
    return "Protocol error: " + detail


# ---------------------------------------------------------------- multibulk


def test_multibulk_single_command():
    assert feed_whole(mb(b"PING")) == ([[b"PING"]], None)


def test_multibulk_binary_arguments():
    body = bytes(range(256)) + b"\r\n\r\n"
    assert feed_whole(mb(b"ADDJOB", b"q", body, b"0"))[0] == [[b"ADDJOB", b"q", body, b"0"]]


def test_multibulk_empty_argument():
    assert feed_whole(b"*2\r\n$4\r\nPING\r\n$0\r\n\r\n")[0] == [[b"PING", b""]]


def test_multibulk_pipeline():
    data = mb(b"PING") + mb(b"QLEN", b"q") + mb(b"GETJOB", b"FROM", b"a", b"b")
    assert feed_whole(data)[0] == [[b"PING"], [b"QLEN", b"q"], [b"GETJOB", b"FROM", b"a", b"b"]]


def test_multibulk_many_arguments_and_long_lengths():
    args = [b"x" * n for n in (0, 1, 9, 10, 99, 100, 1000, 100_000)] * 2
    assert feed_whole(mb(*args))[0] == [args]


def test_multibulk_incomplete_returns_nothing_yet():
    reader = RequestReader()
    data = mb(b"QLEN", b"queue")
    assert reader.feed(data[:-3]) == []
    assert reader.error is None
    assert reader.feed(data[-3:]) == [[b"QLEN", b"queue"]]


def test_multibulk_zero_count_is_skipped():
    assert feed_whole(b"*0\r\n" + mb(b"PING")) == ([[b"PING"]], None)


def test_multibulk_negative_count_is_skipped():
    assert feed_whole(b"*-1\r\n*-5\r\n" + mb(b"PING")) == ([[b"PING"]], None)


def test_multibulk_bulk_trailer_not_checked_as_disque():
    # Disque skips the two bytes after a bulk without looking at them.
    assert feed_whole(b"*1\r\n$4\r\nPINGxx" + mb(b"PING"))[0] == [[b"PING"], [b"PING"]]


def test_multibulk_max_count_accepted():
    commands, error = feed_whole(b"*%d\r\n" % MULTIBULK_MAX_COUNT)
    assert (commands, error) == ([], None)


def test_multibulk_count_above_limit_refused_even_when_complete():
    count = MULTIBULK_MAX_COUNT + 1
    data = mb(b"PING") + b"*%d\r\n" % count + b"$1\r\na\r\n" * count
    commands, error = feed_whole(data)
    assert commands == [[b"PING"]]
    assert message(error) == protocol_error("invalid multibulk length")


def test_multibulk_max_bulk_length_header_accepted_without_buffering():
    reader = RequestReader()
    assert reader.feed(b"*1\r\n$%d\r\n" % BULK_MAX_LENGTH) == []
    assert reader.error is None
    assert reader.buffered < 64


def test_huge_bulk_header_refused_at_once():
    reader = RequestReader()
    assert reader.feed(b"*1\r\n$2147483648\r\n") == []
    assert message(reader.error) == protocol_error("invalid bulk length")
    assert reader.buffered == 0


def test_huge_bulk_header_refused_at_once_bytewise():
    commands, error = feed_bytewise(b"*1\r\n$2147483648\r\n")
    assert message(error) == protocol_error("invalid bulk length")


# ------------------------------------------------------------------- inline


def test_inline_command():
    assert feed_whole(b"PING\r\n") == ([[b"PING"]], None)


def test_inline_with_lf_only():
    assert feed_whole(b"QLEN q\n")[0] == [[b"QLEN", b"q"]]


def test_inline_splits_on_spaces_and_tabs():
    assert feed_whole(b"  ADDJOB\tq   body  0 \r\n")[0] == [[b"ADDJOB", b"q", b"body", b"0"]]


def test_inline_double_quotes():
    assert feed_whole(b'ADDJOB q "hello world" 0\r\n')[0] == [[b"ADDJOB", b"q", b"hello world", b"0"]]


def test_inline_single_quotes():
    assert feed_whole(b"PING 'a \"b\" c'\r\n")[0] == [[b"PING", b'a "b" c']]


def test_inline_hex_escape():
    assert feed_whole(b'PING "a\\x41\\x00\\xffb"\r\n')[0] == [[b"PING", b"aA\x00\xffb"]]


def test_inline_backslash_escapes():
    assert feed_whole(b'PING "\\n\\r\\t\\b\\a\\"\\\\\\q"\r\n')[0] == \
        [[b"PING", b"\n\r\t\b\a\"\\q"]]


def test_inline_incomplete_hex_escape_is_literal():
    assert feed_whole(b'PING "\\x4"\r\n')[0] == [[b"PING", b"x4"]]


def test_inline_single_quote_escape():
    assert feed_whole(b"PING 'a\\'b'\r\n")[0] == [[b"PING", b"a'b"]]


def test_inline_single_quotes_keep_other_backslashes():
    assert feed_whole(b"PING 'a\\nb'\r\n")[0] == [[b"PING", b"a\\nb"]]


def test_inline_empty_quoted_argument_dropped():
    assert feed_whole(b'PING ""\r\n')[0] == [[b"PING"]]


def test_inline_empty_lines_skipped():
    assert feed_whole(b"\r\n\n   \r\nPING\r\n") == ([[b"PING"]], None)


def test_inline_vertical_tab_inside_a_word_is_kept():
    # Disque ends an unquoted word only at space, \t, \r, \n (sdssplitargs).
    assert feed_whole(b"PING a\x0bb\r\n")[0] == [[b"PING", b"a\x0bb"]]


def test_inline_form_feed_inside_a_word_is_kept():
    assert feed_whole(b"PING a\x0cb\r\n")[0] == [[b"PING", b"a\x0cb"]]


def test_inline_extra_cr_before_newline():
    assert feed_whole(b"PING\r\r\n")[0] == [[b"PING"]]


@pytest.mark.parametrize("line", [
    b'PING "abc\r\n',
    b"PING 'abc\r\n",
    b'PING "abc"d\r\n',
    b"PING 'abc'd\r\n",
    b'PING "a\\"\r\n',
])
def test_inline_unbalanced_quotes(line):
    commands, error = feed_whole(line)
    assert commands == []
    assert message(error) == protocol_error("unbalanced quotes in request")
    assert isinstance(error, ProtocolError)


def test_split_line_refuses_unbalanced_quotes():
    with pytest.raises(UnbalancedQuotes):
        split_line(b'"open')
    assert split_line(b"a b") == [b"a", b"b"]


def test_too_big_inline_request():
    reader = RequestReader()
    assert reader.feed(b"x" * INLINE_MAX_SIZE) == []
    assert reader.error is None
    reader.feed(b"x")
    assert message(reader.error) == protocol_error("too big inline request")


def test_inline_at_the_size_limit_is_accepted():
    line = b"PING " + b"x" * (INLINE_MAX_SIZE - 5)
    assert feed_whole(line + b"\n")[0] == [[b"PING", b"x" * (INLINE_MAX_SIZE - 5)]]


# ------------------------------------------------------------- mixed streams


def test_mixed_inline_and_multibulk():
    data = b"PING\r\n" + mb(b"QLEN", b"q") + b"QLEN r\r\n" + mb(b"PING")
    expected = [[b"PING"], [b"QLEN", b"q"], [b"QLEN", b"r"], [b"PING"]]
    assert feed_whole(data) == (expected, None)
    assert feed_bytewise(data) == (expected, None)


def test_fast_path_resumes_after_slow_path():
    reader = RequestReader()
    assert reader.feed(b"PING\r\n") == [[b"PING"]]
    assert reader.feed(mb(b"QLEN", b"q")) == [[b"QLEN", b"q"]]
    assert reader.feed(mb(b"QLEN")[:5]) == []
    assert reader.feed(mb(b"QLEN")[5:] + mb(b"PING")) == [[b"QLEN"], [b"PING"]]
    assert reader.buffered == 0


# -------------------------------------------------------- split everywhere

STREAM = (mb(b"ADDJOB", b"queue", b"body\r\nwith\r\nnewlines", b"0", b"RETRY", b"10")
          + b"PING\r\n"
          + b'ADDJOB q "quoted \\x41 body" 0\n'
          + mb(b"GETJOB", b"COUNT", b"10", b"FROM", b"a", b"b", b"c")
          + b"*0\r\n"
          + mb(b"x" * 300, b"")
          + b"  \r\n"
          + mb(*[b"%d" % i for i in range(12)]))
STREAM_COMMANDS = [
    [b"ADDJOB", b"queue", b"body\r\nwith\r\nnewlines", b"0", b"RETRY", b"10"],
    [b"PING"],
    [b"ADDJOB", b"q", b"quoted A body", b"0"],
    [b"GETJOB", b"COUNT", b"10", b"FROM", b"a", b"b", b"c"],
    [b"x" * 300, b""],
    [b"%d" % i for i in range(12)],
]


def test_stream_whole():
    assert feed_whole(STREAM) == (STREAM_COMMANDS, None)


def test_stream_byte_by_byte():
    assert feed_bytewise(STREAM) == (STREAM_COMMANDS, None)


def test_stream_split_at_every_single_boundary():
    for cut in range(1, len(STREAM)):
        assert feed_chunks(STREAM, [cut]) == (STREAM_COMMANDS, None), cut


def test_stream_random_chunkings():
    rng = random.Random(5)
    for _ in range(300):
        cuts = rng.sample(range(1, len(STREAM)), rng.randrange(1, 30))
        assert feed_chunks(STREAM, cuts) == (STREAM_COMMANDS, None), sorted(cuts)


# ------------------------------------------------------------ protocol errors


@pytest.mark.parametrize("data, detail", [
    (b"*x\r\n", "invalid multibulk length"),
    (b"*+1\r\n", "invalid multibulk length"),
    (b"*01\r\n", "invalid multibulk length"),
    (b"*-0\r\n", "invalid multibulk length"),
    (b"* 1\r\n", "invalid multibulk length"),
    (b"*1 \r\n", "invalid multibulk length"),
    (b"*\r\n", "invalid multibulk length"),
    (b"*%d\r\n" % (MULTIBULK_MAX_COUNT + 1), "invalid multibulk length"),
    (b"*99999999999999999999\r\n", "invalid multibulk length"),
    (b"*1\r\n$x\r\n", "invalid bulk length"),
    (b"*1\r\n$-1\r\n", "invalid bulk length"),
    (b"*1\r\n$04\r\nPING\r\n", "invalid bulk length"),
    (b"*1\r\n$+4\r\nPING\r\n", "invalid bulk length"),
    (b"*1\r\n$\r\n", "invalid bulk length"),
    (b"*1\r\n$%d\r\n" % (BULK_MAX_LENGTH + 1), "invalid bulk length"),
    (b"*1\r\nx4\r\n", "expected '$', got 'x'"),
    (b"*1\r\n:1\r\n", "expected '$', got ':'"),
    (b"*1\r\n*1\r\n$1\r\na\r\n", "expected '$', got '*'"),
    (b'PING "x\r\n', "unbalanced quotes in request"),
])
def test_protocol_error_messages(data, detail):
    for feed in (feed_whole, feed_bytewise):
        commands, error = feed(data)
        assert commands == []
        assert message(error) == protocol_error(detail), feed.__name__


def test_protocol_error_encodes_as_err_reply():
    _, error = feed_whole(b"*1\r\nx4\r\n")
    assert encode(error) == b"-ERR Protocol error: expected '$', got 'x'\r\n"


def test_too_big_mbulk_count_string():
    commands, error = feed_whole(b"*" + b"1" * (INLINE_MAX_SIZE + 1))
    assert message(error) == protocol_error("too big mbulk count string")


def test_too_big_mbulk_count_string_in_pieces():
    commands, error = feed_chunks(b"*" + b"1" * (INLINE_MAX_SIZE + 1), [1, 1000, 40_000])
    assert message(error) == protocol_error("too big mbulk count string")


def test_too_big_bulk_count_string():
    commands, error = feed_whole(b"*1\r\n$" + b"1" * (INLINE_MAX_SIZE + 1))
    assert message(error) == protocol_error("too big bulk count string")


def test_too_big_bulk_count_string_in_pieces():
    data = b"*1\r\n$" + b"1" * (INLINE_MAX_SIZE + 1)
    commands, error = feed_chunks(data, [4, 5, 30_000])
    assert message(error) == protocol_error("too big bulk count string")


def test_commands_before_a_protocol_error_are_returned():
    data = mb(b"PING") + b"PING\r\n" + mb(b"QLEN", b"q") + b"*1\r\nx4\r\n" + mb(b"PING")
    for feed in (feed_whole, feed_bytewise):
        commands, error = feed(data)
        assert commands == [[b"PING"], [b"PING"], [b"QLEN", b"q"]]
        assert message(error) == protocol_error("expected '$', got 'x'")


def test_an_empty_read_before_any_bytes_is_no_command():
    # Found by the sanitizers (make test-asan): the first append, of no
    # bytes, copied them into a buffer not allocated yet (memcpy to NULL,
    # undefined behaviour UBSan stops on). It fails only under them.
    reader = RequestReader()
    assert reader.feed(b"") == [] and reader.error is None
    assert reader.feed(mb(b"PING")) == [[b"PING"]]


def test_reader_ignores_input_after_an_error():
    reader = RequestReader()
    reader.feed(b"*x\r\n")
    assert reader.feed(mb(b"PING")) == []
    assert message(reader.error) == protocol_error("invalid multibulk length")


@pytest.mark.parametrize("element", [b"+OK\r\n", b"(123\r\n", b"=8\r\ntxt:abcd\r\n"])
def test_non_bulk_element_refused_on_the_fast_path(element):
    """hiredis hands these back as bytes; Disque accepts only '$' bulks."""
    data = b"*2\r\n$4\r\nPING\r\n" + element + mb(b"PING")
    commands, error = feed_whole(data)
    assert commands == []
    assert message(error) == protocol_error("expected '$', got '%s'" % chr(element[0]))


def test_status_element_does_not_desynchronise_the_stream():
    data = b"*2\r\n$4\r\nECHO\r\n+O\r\n" + mb(b"PING")
    assert feed_whole(data) == feed_bytewise(data)


@pytest.mark.parametrize("data", [
    b"*1\r\n%1\r\n*1\r\n$1\r\na\r\n$1\r\nb\r\n",     # map keyed by an array
    b"*1\r\n%1\r\n%1\r\n",                              # map keyed by a map
    b"*1\r\n%1\r\n>1\r\n1",                               # map keyed by a push
])
def test_resp3_shapes_are_a_protocol_error_not_an_exception(data):
    reader = RequestReader()
    commands = reader.feed(mb(b"PING") + data)
    assert commands == [[b"PING"]]
    assert message(reader.error) == protocol_error("expected '$', got '%'")


# ----------------------------------------------------------- property tests

TOKENS = [b"*", b"$", b"\r\n", b"\r", b"\n", b"0", b"1", b"2", b"3", b"-1", b"10",
          b"PING", b" ", b'"', b"'", b"\\", b"x", b"\\x41", b"+OK", b":", b"*1\r\n",
          b"$1\r\n", b"$4\r\nPING\r\n", b"*2\r\n", b"a",
          # RESP3 types hiredis knows and Disque does not
          b"%1\r\n", b"~1\r\n", b">1\r\n", b"|1\r\n", b"_", b"#t", b",1.5", b"(1", b"=5\r\ntxt:a"]

command_lists = st.lists(
    st.lists(st.binary(max_size=40), min_size=1, max_size=6), min_size=1, max_size=8)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS) | st.binary(max_size=4), max_size=40))
@example([b"*2\r\n", b"$1\r\n", b"a", b"\r\n", b"+OK", b"\r\n"])
@example([b"*1\r\n", b"%1\r\n", b"*1\r\n"])
def test_random_streams_agree_with_bytewise_parsing(tokens):
    data = b"".join(tokens)
    commands, error = feed_whole(data)          # must not raise
    assert all(type(cmd) is list and cmd and all(type(a) is bytes for a in cmd)
               for cmd in commands)
    assert error is None or isinstance(error, ProtocolError)
    slow_commands, slow_error = feed_bytewise(data)
    assert (commands, message(error)) == (slow_commands, message(slow_error))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_raise(data):
    commands, error = feed_whole(data)
    assert error is None or isinstance(error, ProtocolError)
    assert isinstance(commands, list)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(TOKENS) | st.binary(max_size=4), max_size=40),
       st.lists(st.integers(1, 200), max_size=10))
@example([b"*1\r\n$4\r\nPING\r\n", b"*2\r\n$1\r\na\r\n+OK\r\n", b"*1\r\n$4\r\nPI"], [20])
def test_random_streams_agree_with_bytewise_parsing_under_any_split(tokens, cuts):
    stream = b"".join(tokens)
    commands, error = feed_chunks(stream, [cut for cut in cuts if cut < len(stream)])
    slow_commands, slow_error = feed_bytewise(stream)
    assert (commands, message(error)) == (slow_commands, message(slow_error))


def test_a_command_of_a_million_arguments_over_many_reads_is_read_once():
    # The parser keeps what it parsed of a command between reads (its
    # arguments are offsets into its buffer), so the largest command Disque
    # accepts, cut into 64 KB reads, completes in one pass over its bytes.
    stream = b"*%d\r\n" % MULTIBULK_MAX_COUNT + b"$0\r\n\r\n" * MULTIBULK_MAX_COUNT
    cuts = list(range(65536, len(stream), 65536))
    (command,), error = feed_chunks(stream, cuts)
    assert error is None and len(command) == MULTIBULK_MAX_COUNT and command[-1] == b""


@settings(max_examples=300, deadline=None)
@given(command_lists, st.data())
def test_encoded_commands_round_trip_under_any_split(commands, data):
    stream = b"".join(mb(*cmd) for cmd in commands)
    assert feed_whole(stream) == (commands, None)
    cuts = data.draw(st.lists(st.integers(1, max(len(stream) - 1, 1)), max_size=20))
    assert feed_chunks(stream, cuts) == (commands, None)


@settings(max_examples=100, deadline=None)
@given(command_lists)
def test_encoded_commands_round_trip_byte_by_byte(commands):
    stream = b"".join(mb(*cmd) for cmd in commands)
    assert feed_bytewise(stream) == (commands, None)


# ----------------------------------------------------------------- encoders


def test_encode_bulk():
    assert encode(b"hello") == b"$5\r\nhello\r\n"
    assert encode(b"") == b"$0\r\n\r\n"
    assert encode_bulk(b"a\r\nb") == b"$4\r\na\r\nb\r\n"


def test_encode_bytearray_and_memoryview_as_bulk():
    assert encode(bytearray(b"ab")) == b"$2\r\nab\r\n"
    assert encode(memoryview(b"ab")) == b"$2\r\nab\r\n"


def test_encode_int():
    assert encode(0) == b":0\r\n"
    assert encode(42) == b":42\r\n"
    assert encode(-7) == b":-7\r\n"
    assert encode(2 ** 63 - 1) == b":9223372036854775807\r\n"


def test_encode_bool_as_int():
    assert encode(True) == b":1\r\n"
    assert encode(False) == b":0\r\n"


def test_encode_status():
    assert encode("OK") == b"+OK\r\n"
    assert encode("none") == b"+none\r\n"


def test_encode_none_is_null_bulk():
    assert encode(None) == b"$-1\r\n"


def test_encode_arrays():
    assert encode([]) == b"*0\r\n"
    assert encode(()) == b"*0\r\n"
    assert encode([b"a", 1, None, "st", [b"x", []]]) == \
        b"*5\r\n$1\r\na\r\n:1\r\n$-1\r\n+st\r\n*2\r\n$1\r\nx\r\n*0\r\n"


def test_encode_raw_passes_through():
    assert encode(Raw(b"+whatever\r\n")) == b"+whatever\r\n"
    assert encode([Raw(b":1\r\n"), Raw(b"*-1\r\n")]) == b"*2\r\n:1\r\n*-1\r\n"


@pytest.mark.parametrize("value, resp2, resp3", [
    (None, b"$-1\r\n", b"_\r\n"),
    (NULL_ARRAY, b"*-1\r\n", b"_\r\n"),
    ([b"a", None], b"*2\r\n$1\r\na\r\n$-1\r\n", b"*2\r\n$1\r\na\r\n_\r\n"),
    (Map([b"port", b"7711", b"hz", None]),
     b"*4\r\n$4\r\nport\r\n$4\r\n7711\r\n$2\r\nhz\r\n$-1\r\n",
     b"%2\r\n$4\r\nport\r\n$4\r\n7711\r\n$2\r\nhz\r\n_\r\n"),
    (Map([]), b"*0\r\n", b"%0\r\n"),
    (SetReply(["fast", "write"]), b"*2\r\n+fast\r\n+write\r\n", b"~2\r\n+fast\r\n+write\r\n"),
    (Verbatim(b"a:1\r\n"), b"$5\r\na:1\r\n\r\n", b"=9\r\ntxt:a:1\r\n\r\n"),
    ([Map([b"k", [None, NULL_ARRAY]])],
     b"*1\r\n*2\r\n$1\r\nk\r\n*2\r\n$-1\r\n*-1\r\n",
     b"*1\r\n%1\r\n$1\r\nk\r\n*2\r\n_\r\n_\r\n"),
    (b"x", b"$1\r\nx\r\n", b"$1\r\nx\r\n"),
    (7, b":7\r\n", b":7\r\n"),
    ("OK", b"+OK\r\n", b"+OK\r\n"),
])
def test_encode_under_each_protocol(value, resp2, resp3):
    assert encode(value) == resp2
    assert encode(value, resp3=False) == resp2
    assert encode(value, resp3=True) == resp3


def test_shared_constants():
    assert (OK, PONG, NULL_BULK, encode(NULL_ARRAY), EMPTY_ARRAY) == (
        b"+OK\r\n", b"+PONG\r\n", b"$-1\r\n", b"*-1\r\n", b"*0\r\n")


@pytest.mark.parametrize("error, wire", [
    (CommandError("syntax error"), b"-ERR syntax error\r\n"),
    (NoJobError("Job not known in the context of this node."),
     b"-NOJOB Job not known in the context of this node.\r\n"),
    (AckedError("x"), b"-ACKED x\r\n"),
    (NoReplError("y"), b"-NOREPL y\r\n"),
    (PausedError("z"), b"-PAUSED z\r\n"),
    (LeavingError("w"), b"-LEAVING w\r\n"),
    (ProtocolError("invalid bulk length"), b"-ERR Protocol error: invalid bulk length\r\n"),
])
def test_encode_errors(error, wire):
    assert encode(error) == wire
    assert encode([error]) == b"*1\r\n" + wire


def test_encode_error_cannot_break_the_frame():
    assert encode(CommandError("unknown command 'a\r\nb'")) == \
        b"-ERR unknown command 'a  b'\r\n"


def test_encode_unknown_type_refused():
    with pytest.raises(TypeError):
        encode(1.5)


def test_encode_command():
    assert encode_command("ADDJOB", b"q", 5) == \
        b"*3\r\n$6\r\nADDJOB\r\n$1\r\nq\r\n$1\r\n5\r\n"


def test_a_protocol_error_kept_by_the_reader_holds_no_frames():
    # The reader keeps its error until the connection answers it; a
    # traceback would tie it to the parser's frames in a reference cycle.
    reader = RequestReader()
    reader.feed(b"*1\r\n$x\r\n")
    assert reader.error is not None
    assert reader.error.__traceback__ is None and reader.error.__context__ is None
