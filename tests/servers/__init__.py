"""Real servers on 127.0.0.1 that ragpulse's tests, benchmarks and examples run against.

Import them from their modules (``from tests.servers.chat_server import ChatServer``):
this package stays empty so ``python -m tests.servers.chat_server`` runs cleanly.
"""
