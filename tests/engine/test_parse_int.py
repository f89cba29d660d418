"""The engine's integer rule for command arguments (hot.pxi's _parse_int,
exported as parse_int): strtoll as Disque's commands use it, checked
against a plain Python model on random and edge-case inputs."""

from hypothesis import given, settings
from hypothesis import strategies as st

from disque_py.engine import parse_int

INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


def model(value: bytes):
    text = value.split(b"\0", 1)[0]           # a NUL ends the argument
    if not text:
        return 0
    digits = text[1:] if text[:1] in (b"+", b"-") else text
    if not digits or not all(48 <= byte <= 57 for byte in digits):
        return None
    number = int(text)
    return number if INT64_MIN <= number <= INT64_MAX else None


EDGES = [b"", b"0", b"007", b"+5", b"-5", b"+", b"-", b"-0", b" 5", b"5s", b"5\0junk",
         b"\0", b"+\0", str(INT64_MAX).encode(), str(INT64_MAX + 1).encode(),
         str(INT64_MIN).encode(), str(INT64_MIN - 1).encode(), b"99999999999999999999",
         b"922337203685477580", b"9223372036854775799", b"\xff"]


def test_edge_cases_follow_strtoll():
    for value in EDGES:
        assert parse_int(value) == model(value), value


@settings(max_examples=2000, derandomize=True)
@given(st.one_of(st.binary(max_size=24),
                 st.integers(min_value=-2 ** 65, max_value=2 ** 65).map(lambda n: str(n).encode()),
                 st.text("+-0123456789\0 ", max_size=22).map(str.encode)))
def test_any_argument_parses_as_the_model_says(value):
    assert parse_int(value) == model(value)
