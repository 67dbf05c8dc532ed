"""Memory sizes: what people write in `resources.memory`, read as MiB."""
import pytest

from submarine_py.units import format_memory, parse_memory

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text, mib", [
    ("512 MiB", 512),
    ("512MiB", 512),
    ("2 GiB", 2048),
    ("2G", 2048),
    ("2 GB", 2048),          # decimal units are read as binary ones, as YARN does
    ("0.5 GiB", 512),
    ("1 TiB", 1024 * 1024),
    ("1024 KiB", 1),
    ("  3 gi ", 3072),
    ("4096", 4096),          # a plain number is MiB
    (4096, 4096),
    (1.5, 2),
])
def test_parse_memory_accepts_human_sizes(text, mib):
    assert parse_memory(text) == mib


@pytest.mark.parametrize("bad, message", [
    ("two", "expected a size like '512 MiB' or '2 GiB', got 'two'"),
    ("2 GiBs", "got '2 GiBs'"),
    ("-1", "got '-1'"),
    ("", "got ''"),
    ("1e3", "got '1e3'"),
    (0, "must be at least 1 MiB"),
    ("0 MiB", "must be at least 1 MiB"),
    ("512 KiB", "must be at least 1 MiB"),
    (float("nan"), "must be at least 1 MiB"),
    (float("inf"), "must be at most 1 PiB"),
    (10 ** 30, "must be at most 1 PiB"),
    (True, "got True"),
    (None, "got None"),
    ([2048], "got [2048]"),
])
def test_parse_memory_refuses_with_a_message_for_people(bad, message):
    with pytest.raises(ValueError) as info:
        parse_memory(bad)
    assert message in str(info.value)


@pytest.mark.parametrize("mib, text", [(2048, "2 GiB"), (512, "512 MiB"), (1536, "1536 MiB")])
def test_format_memory_round_trips(mib, text):
    assert format_memory(mib) == text
    assert parse_memory(format_memory(mib)) == mib
