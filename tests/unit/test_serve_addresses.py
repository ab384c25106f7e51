"""``ragpulse serve`` refuses one port for both receivers: which addresses take the same port."""

from __future__ import annotations

import pytest

from ragpulse.cli.serve import same_port
from ragpulse.serve._service import _host_port


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("127.0.0.1:4318", "127.0.0.1:4318"),
        ("0.0.0.0:4318", "127.0.0.1:4318"),
        ("localhost:4318", "0.0.0.0:4318"),
        ("[::]:4317", "[::1]:4317"),
        ("LOCALHOST:4317", "localhost:4317"),
    ],
)
def test_addresses_that_take_the_same_port(first: str, second: str) -> None:
    assert same_port(first, second)
    assert same_port(second, first)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("127.0.0.1:4318", "127.0.0.1:4317"),
        ("127.0.0.1:4318", "10.0.0.7:4318"),
        ("0.0.0.0:4318", "0.0.0.0:4317"),
        ("not-an-address", "not-an-address"),
    ],
)
def test_addresses_that_do_not(first: str, second: str) -> None:
    assert not same_port(first, second)


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1:²", "127.0.0.1:٣", "127.0.0.1:" + "9" * 5000, "127.0.0.1:", ":4318"],
    ids=["superscript", "arabic-indic", "5000-digits", "no-port", "no-host"],
)
def test_a_listen_address_whose_port_is_not_ascii_digits_is_refused_with_its_form(
    address: str,
) -> None:
    # "²" passes str.isdigit and then failed int() with Python's own message.
    with pytest.raises(ValueError, match="expected HOST:PORT"):
        _host_port(address)


def test_ports_that_are_digits_but_not_ascii_are_no_port_to_compare() -> None:
    assert not same_port("127.0.0.1:²", "127.0.0.1:²")
