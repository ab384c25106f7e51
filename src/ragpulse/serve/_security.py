"""Who may send to ``ragpulse serve``: a bearer token, TLS, and a warning when neither guards it.

The token (``--auth-token-file``) is read once at start; every OTLP request must
carry ``authorization: Bearer <token>`` (an HTTP header or gRPC metadata),
compared in constant time. ``/healthz`` and ``/readyz`` stay open to probes.
TLS (``--tls-cert``/``--tls-key``) covers both receivers; the pair is checked before
either starts (PEM files, a key that matches the certificate), so a bad pair is one line
and exit 2 whichever receivers are on. A receiver that
listens beyond loopback without both is logged as a warning at start: anyone
who reaches the port could then send spans, or read them on the wire.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
import ssl
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

BEARER = b"bearer "


class SecurityConfigError(ValueError):
    """A token or certificate file that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Security:
    """The token requests must carry, and the TLS certificate and key; each optional."""

    token: bytes | None = None
    cert: Path | None = None
    key: Path | None = None

    @property
    def tls(self) -> bool:
        """Both receivers serve TLS."""
        return self.cert is not None

    def allows(self, authorization: bytes | str | None) -> bool:
        """Whether an ``authorization`` header value carries the token (always, without one)."""
        if self.token is None:
            return True
        if authorization is None:
            return False
        value = authorization.encode("latin-1") if isinstance(authorization, str) else authorization
        value = value.strip()
        if value[: len(BEARER)].lower() != BEARER:
            return False
        return hmac.compare_digest(value[len(BEARER) :].strip(), self.token)

    def tls_pair(self) -> tuple[bytes, bytes]:
        """The PEM key and certificate chain (for the gRPC receiver)."""
        assert self.cert is not None and self.key is not None
        return self.key.read_bytes(), self.cert.read_bytes()


def load_security(token_file: Path | None, cert: Path | None, key: Path | None) -> Security:
    """A ``Security`` from the files named; raises ``SecurityConfigError`` for unusable ones."""
    token = None
    if token_file is not None:
        try:
            token = token_file.read_bytes().strip()
        except OSError as exc:
            raise SecurityConfigError(f"--auth-token-file {token_file}: {exc.strerror}") from None
        if not token:
            raise SecurityConfigError(f"--auth-token-file {token_file} is empty")
        if any(byte < 0x21 or byte > 0x7E for byte in token):
            raise SecurityConfigError(
                f"--auth-token-file {token_file}: the token must be printable ASCII "
                "without spaces (it travels in a header)"
            )
    if (cert is None) != (key is None):
        raise SecurityConfigError("--tls-cert and --tls-key go together")
    for name, path in (("--tls-cert", cert), ("--tls-key", key)):
        if path is not None and not path.is_file():
            raise SecurityConfigError(f"{name} {path}: no such file")
    if cert is not None and key is not None:
        check_tls_pair(cert, key)
    return Security(token, cert, key)


def _no_password() -> str:
    # An encrypted key cannot be used unattended: refuse it rather than prompt on a terminal.
    return ""


def check_tls_pair(cert: Path, key: Path) -> None:
    """Raise ``SecurityConfigError`` unless ``cert`` is a PEM certificate chain and ``key``
    its unencrypted PEM private key.

    Checked here, once, for both receivers: gRPC's own check comes only when its port is
    bound, as its internal log lines and "Failed to bind to address".
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_verify_locations(cafile=str(cert))
    except (ssl.SSLError, OSError, ValueError):
        raise SecurityConfigError(f"--tls-cert {cert}: not a PEM certificate") from None
    try:
        context.load_cert_chain(str(cert), str(key), password=_no_password)
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            raise SecurityConfigError(
                f"--tls-key {key} is not the private key of --tls-cert {cert}"
            ) from None
        raise SecurityConfigError(f"--tls-key {key}: not an unencrypted PEM private key") from None
    except (OSError, ValueError):
        raise SecurityConfigError(f"--tls-key {key}: cannot be read") from None


def port_number(text: str) -> int | None:
    """The port a listen address names (ASCII digits, five at most); None: no port.

    ``str.isdigit`` alone also takes "²" and "٣", which ``int`` cannot read or reads
    as another number.
    """
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 5 else None


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warnings(hosts: Iterable[str], security: Security) -> list[str]:
    """One line per receiver host beyond loopback that lacks a token or TLS."""
    missing = [
        what
        for what, present in (
            ("no --auth-token-file", security.token is not None),
            ("no TLS (--tls-cert/--tls-key)", security.tls),
        )
        if not present
    ]
    if not missing:
        return []
    return [
        f"listening on {host} beyond loopback with {' and '.join(missing)}: anyone who "
        "reaches it can send spans" + ("" if security.tls else " or read them on the wire")
        for host in hosts
        if not is_loopback(host)
    ]


_WILDCARDS = frozenset({"0.0.0.0", "::", "[::]", ""})


_DEFAULT_PORTS = {"http": 80, "https": 443}

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def _addresses(host: str) -> frozenset[_Address]:
    """The addresses ``host`` resolves to, an IPv4-mapped IPv6 address read as its IPv4 one
    (``127.1`` and ``::ffff:127.0.0.1`` are both 127.0.0.1); empty when it does not resolve."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        return frozenset()
    found: set[_Address] = set()
    for info in infos:
        try:
            address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        except ValueError:
            continue
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        found.add(address)
    return frozenset(found)


def _this_machine(addresses: frozenset[_Address]) -> bool:
    """Whether a connection to one of ``addresses`` stays on this machine: loopback, the
    unspecified address (which connects to this host), or an address of its own names."""
    if any(a.is_loopback or a.is_unspecified for a in addresses):
        return True
    own = _addresses(socket.gethostname()) | _addresses(socket.getfqdn())
    return bool(addresses & own)


def self_target(endpoint: str | None, listens: Iterable[str]) -> str | None:
    """The listen address ``endpoint`` (an OTLP export URL) reaches, if it is one of ours.

    Exporting to itself would loop every record back in without end. The endpoint's host
    is resolved and compared by address, not spelling (``127.1``, ``[::ffff:127.0.0.1]``,
    ``localhost`` and this host's name all reach a listener on ``127.0.0.1``).
    """
    if not endpoint:
        return None
    parsed = urllib.parse.urlsplit(endpoint if "//" in endpoint else f"//{endpoint}")
    try:
        port = parsed.port or _DEFAULT_PORTS.get(parsed.scheme.lower())
    except ValueError:
        return None
    host = (parsed.hostname or "").lower()
    if port is None or not host:
        return None
    for listen in listens:
        listen_host, _, listen_port = listen.rpartition(":")
        if port_number(listen_port) != port:
            continue
        # Resolved only for a listener on the endpoint's port: no lookup for a backend
        # elsewhere, which is the usual case.
        listen_host = listen_host.strip("[]").lower()
        targets = _addresses(host)
        if listen_host == host or (is_loopback(listen_host) and is_loopback(host)):
            return listen
        if not targets:
            continue
        if listen_host in _WILDCARDS:
            if _this_machine(targets):
                return listen
            continue
        listening = _addresses(listen_host)
        loopback_only = bool(listening) and all(a.is_loopback for a in listening)
        if targets & listening or (
            loopback_only and any(a.is_loopback or a.is_unspecified for a in targets)
        ):
            return listen
    return None
