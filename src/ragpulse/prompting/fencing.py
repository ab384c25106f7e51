"""Text fenced as data in a prompt, with a per-call nonce the text cannot forge."""

from __future__ import annotations

import secrets

__all__ = ["fence", "new_nonce"]


def new_nonce() -> str:
    """A fresh random fence nonce (64 bits, hex)."""
    return secrets.token_hex(8)


def fence(tag: str, text: str, nonce: str, *, attributes: str = "") -> str:
    """``text`` fenced as data; any occurrence of the nonce inside it is removed first."""
    # Without the nonce, text cannot forge a closing fence, whatever tags it contains.
    body = text.replace(nonce, "")
    head = f"{tag} {attributes} nonce={nonce}" if attributes else f"{tag} nonce={nonce}"
    return f"<{head}>\n{body}\n</{tag} nonce={nonce}>"
