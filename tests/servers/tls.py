"""A self-signed certificate for 127.0.0.1 and localhost, made with the ``openssl`` command."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def openssl_available() -> bool:
    """Whether the ``openssl`` command is on the PATH."""
    return shutil.which("openssl") is not None


def self_signed(directory: Path) -> tuple[Path, Path]:
    """``(cert.pem, key.pem)`` in ``directory``, valid for a day for 127.0.0.1 and localhost."""
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key
