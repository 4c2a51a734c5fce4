"""The kinds of the entries an import of a bernstein workdir writes in the native chain
(``importer.py``): what verify looks for before it loads the bernstein machinery."""

from __future__ import annotations

IMPORT_KIND = "import.bernstein"
"""One per imported run, in that run's chain: the journal's digest, path and import."""
WORKDIR_KIND = "import.bernstein.workdir"
"""One per import, in the bookkeeping run: the manifest of every file imported."""
