"""The package version, importable without loading the compiled core (``--version`` is fast).

It is the workspace version in ``Cargo.toml``; a test checks it equals
``agentledger._core.__version__`` and the installed distribution's.
"""

__version__ = "0.1.0"
