"""SQLite storage: the connection, its pragmas and transactions, and the schema migrations."""

from agentledger.storage.connection import Database, quote_identifier

__all__ = ["Database", "quote_identifier"]
