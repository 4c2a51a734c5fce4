"""SQLite storage: the connection, its pragmas and transactions, and the schema migrations."""

from agentledger.storage.connection import Database

__all__ = ["Database"]
