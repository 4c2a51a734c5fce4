"""Keys live outside the ledger: the install signing key, the audit HMAC key, trusted signers.

The ledger never supplies its own keys: a receipt is only as trustworthy as the key that
verifies it, so trust comes from files the ledger cannot rewrite. The key folder is
``--home`` / ``$AGENTLEDGER_HOME``, else ``~/.local/state/agentledger/``.

- ``install.key``: the Ed25519 seed (64 hex characters) that signs data/ops receipts.
- ``install.pub``: its public key (``ed25519:<64 hex>``), written next to it whenever a
  writer loads the key, so that verify trusts this install without ever reading the seed.
- ``audit.key``: the audit mirror's master key (at least 32 bytes; created as 64 hex
  characters, used as the bytes of the file, whitespace stripped).
- ``trusted.keys``: one ``ed25519:<64 hex>`` per line (``#`` comments), signers to trust.
  A ``--trust`` file may also hold one Ed25519 SPKI PEM (bernstein's signer format).

Secret key files are created with mode 0600 by commands that write, never by verify; a
secret key file that group or others can read, or that another user owns, is refused.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import re
import secrets
import stat
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol, SupportsBytes

from agentledger import _core
from agentledger.errors import InvalidInput, NotFound
from agentledger.limits import MAX_KEY_FILE_BYTES, read_capped

HOME_ENV = "AGENTLEDGER_HOME"
INSTALL_KEY = "install.key"
INSTALL_PUBLIC_KEY = "install.pub"
AUDIT_KEY = "audit.key"
TRUST_FILE = "trusted.keys"
PUBLIC_KEY = re.compile(r"ed25519:([0-9a-f]{64})")
MIN_AUDIT_KEY_BYTES = 32


class KeyFileError(InvalidInput):
    """A key file that must not be used (readable by others, foreign, malformed)."""

    code = "key-file"


def default_home() -> Path:
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env)
    return Path.home() / ".local" / "state" / "agentledger"


class Ed25519Key(Protocol):
    """What a signer here needs of a key: ``bytes(key)``, its 32-byte seed, and
    ``bytes(key.verify_key)``, its public key. An ``InstallKey`` or PyNaCl's ``SigningKey``."""

    @property
    def verify_key(self) -> SupportsBytes: ...

    def __bytes__(self) -> bytes: ...


class InstallKey:
    """An Ed25519 key from its 32-byte seed, expanded once in Rust (``_core.Ed25519Signer``):
    the install's key, without loading PyNaCl (a seventh of a command line append's
    start-up). The seed is ``bytes(key)``, the public key ``key.verify_key``."""

    __slots__ = ("_seed", "signer", "verify_key")

    def __init__(self, seed: bytes) -> None:
        self.signer = _core.Ed25519Signer(seed)
        self._seed = bytes(seed)
        self.verify_key = self.signer.public_key

    def __bytes__(self) -> bytes:
        return self._seed

    def __repr__(self) -> str:  # never the seed
        return f"InstallKey({public_key_text(self.verify_key)})"


def sign_message(key: Ed25519Key, message: bytes) -> bytes:
    """The Ed25519 signature of ``message`` by ``key``: every signature agentledger makes.
    Made in Rust with the GIL held (PyNaCl's lets it go, and taking it back can wait for a
    busy thread's switch interval); the same bytes libsodium gives (tested). The key is
    expanded once, for as long as ``key`` lives (``InstallKey``, else ``_signers``)."""
    if isinstance(key, InstallKey):
        return key.signer.sign(message)
    signer = _signers.get(id(key))
    if signer is None:
        signer = _signers[id(key)] = _core.Ed25519Signer(bytes(key))
        weakref.finalize(key, _signers.pop, id(key), None)
    return signer.sign(message)


_signers: dict[int, _core.Ed25519Signer] = {}
"""Each live key's expansion, by the key object's identity: a ``SigningKey`` hashes and
compares its secret bytes on every dictionary lookup (21.2 against 18.6 us a signature).
The entry goes when the key is collected, before its id can name another object."""


def public_key_text(public_key: bytes) -> str:
    """``ed25519:<64 hex>``: how a signer is named everywhere."""
    return "ed25519:" + public_key.hex()


def parse_public_key(text: str) -> bytes:
    """The 32 bytes of an ``ed25519:<64 hex>`` string; ``InvalidInput`` otherwise."""
    match = PUBLIC_KEY.fullmatch(text.strip())
    if not match:
        # Never echoed: what was given may be a secret key pasted in the wrong place.
        raise InvalidInput(
            f"not a public key ({len(text.strip())} characters; expected "
            "ed25519:<64 lowercase hex>)",
            code="invalid-key",
        )
    return bytes.fromhex(match.group(1))


def check_private_file(path: Path) -> None:
    """Refuse a secret key file that is not a regular file of ours, private to us."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise NotFound(f"no key file at {path}") from None
    if not stat.S_ISREG(info.st_mode):
        raise KeyFileError(f"{path}: a key file must be a regular file (not a link or folder)")
    if info.st_uid != os.geteuid():
        raise KeyFileError(f"{path}: owned by uid {info.st_uid}, not by this user; refusing it")
    if info.st_mode & 0o077:
        raise KeyFileError(
            f"{path}: mode {stat.S_IMODE(info.st_mode):04o} lets group or others read it; "
            f"refusing it (fix with: chmod 600 {path})"
        )


def _read_private(path: Path) -> bytes:
    check_private_file(path)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_KEY_FILE_BYTES + 1)
    if len(data) > MAX_KEY_FILE_BYTES:
        raise KeyFileError(f"{path}: larger than a key file can be")
    return data


def _create_private(path: Path, content: bytes) -> None:
    """Write a new 0600 file atomically; if another process won the race, keep theirs."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(temp, path)
    finally:
        temp.unlink(missing_ok=True)


class KeyStore:
    """The key folder. Constructing one touches nothing on disk."""

    def __init__(self, home: str | os.PathLike[str] | None = None) -> None:
        self.home = Path(home) if home is not None else default_home()

    def __repr__(self) -> str:
        return f"KeyStore({str(self.home)!r})"

    @property
    def install_key_path(self) -> Path:
        return self.home / INSTALL_KEY

    @property
    def install_public_key_path(self) -> Path:
        return self.home / INSTALL_PUBLIC_KEY

    @property
    def audit_key_path(self) -> Path:
        return self.home / AUDIT_KEY

    @property
    def trust_path(self) -> Path:
        return self.home / TRUST_FILE

    # ---- the install key (Ed25519) ---------------------------------------------------------

    def signing_key(self, *, create: bool = False) -> InstallKey:
        """The install signing key; created (0600) when ``create`` and missing."""
        path = self.install_key_path
        if create and not path.exists():
            if self.install_public_key_path.exists():
                # Verify trusts the key install.pub names: a new seed would not be it.
                raise KeyFileError(
                    f"{path}: missing, but {self.install_public_key_path} names the install "
                    f"key {self.install_public_key()}; nothing was signed. Put its seed back, "
                    f"or remove {self.install_public_key_path} to start a new key"
                )
            _create_private(path, secrets.token_bytes(32).hex().encode() + b"\n")
        raw = _read_private(path).strip()
        try:
            seed = bytes.fromhex(raw.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            seed = b""
        if len(seed) != 32:
            raise KeyFileError(f"{path}: not an Ed25519 seed (expected 64 hex characters)")
        key = InstallKey(seed)
        public = public_key_text(key.verify_key)
        if not self.install_public_key_path.exists():
            _create_private(self.install_public_key_path, public.encode() + b"\n")
        elif self.install_public_key() != public:
            # Verify trusts install.pub: a seed it does not name would sign what this
            # install's own verify refuses (a seed replaced by hand, another machine's).
            raise KeyFileError(
                f"{path}: its public key {public} is not the one {INSTALL_PUBLIC_KEY} names "
                f"({self.install_public_key()}); nothing was signed. Put the matching seed "
                f"back, or remove {self.install_public_key_path} to trust this one"
            )
        return key

    def install_public_key(self) -> str | None:
        """``ed25519:<hex>`` of the install key, or None when there is none yet.

        Read from ``install.pub``: verify never reads (or creates) the signing key. Only a
        key folder written before ``install.pub`` existed has its seed read, once, to write it.
        """
        if self.install_public_key_path.exists():
            keys = read_trust_file(self.install_public_key_path)
            if len(keys) != 1:
                raise KeyFileError(f"{self.install_public_key_path}: expected one public key")
            return keys[0]
        if not self.install_key_path.exists():
            return None
        return public_key_text(bytes(self.signing_key().verify_key))

    # ---- the audit key (HMAC) ----------------------------------------------------------------

    def audit_key(self, *, create: bool = False) -> bytes:
        """The audit master key; created (0600) when ``create`` and missing."""
        path = self.audit_key_path
        if create and not path.exists():
            _create_private(path, secrets.token_bytes(32).hex().encode() + b"\n")
        return read_audit_key(path)

    def has_audit_key(self) -> bool:
        return self.audit_key_path.exists()

    # ---- trusted signers ---------------------------------------------------------------------

    def trusted(self) -> list[str]:
        """Signers this install trusts: its own key and the trust file (never creates)."""
        keys = []
        own = self.install_public_key()
        if own is not None:
            keys.append(own)
        if self.trust_path.exists():
            keys.extend(read_trust_file(self.trust_path))
        return list(dict.fromkeys(keys))

    def add_trust(self, key: str) -> bool:
        """Add a signer to the trust file; False if it was already there."""
        text = public_key_text(parse_public_key(key))
        path = self.trust_path
        current = read_trust_file(path) if path.exists() else []
        if text in current:
            return False
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="ascii") as handle:
            handle.write(text + "\n")
        return True


def read_audit_key(path: Path) -> bytes:
    """An audit master key file's bytes, whitespace stripped (at least 32 bytes)."""
    key = _read_private(Path(path)).strip()
    if len(key) < MIN_AUDIT_KEY_BYTES:
        raise KeyFileError(f"{path}: an audit key needs at least {MIN_AUDIT_KEY_BYTES} bytes")
    return key


def read_trust_file(path: Path) -> list[str]:
    """Public keys listed in a file, one per line; ``#`` starts a comment.

    Public keys are not secret, but whoever can write this file decides whom verify trusts:
    a file that group or others can write, or that another user owns, is refused.
    """
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise NotFound(f"no trust file at {path}") from None
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise KeyFileError(f"{path}: a trust file must be ours and writable only by us")
    try:
        text = read_capped(path, MAX_KEY_FILE_BYTES, "a trust file").decode("utf-8")
    except UnicodeDecodeError:
        raise KeyFileError(f"{path}: not UTF-8 text") from None
    if PEM_BEGIN in text:
        return [public_key_text(_spki_ed25519(text, path))]
    keys = []
    for number, line in enumerate(text.splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            keys.append(public_key_text(parse_public_key(text)))
        except InvalidInput:
            raise KeyFileError(f"{path}:{number}: not a public key (ed25519:<64 hex>)") from None
    return keys


PEM_BEGIN = "-----BEGIN PUBLIC KEY-----"
PEM_END = "-----END PUBLIC KEY-----"
ED25519_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")


def _spki_ed25519(text: str, path: Path) -> bytes:
    """The raw key of an Ed25519 SPKI PEM (how bernstein writes signer keys)."""
    try:
        body = text.split(PEM_BEGIN, 1)[1].split(PEM_END, 1)[0]
        der = base64.b64decode("".join(body.split()), validate=True)
    except (IndexError, ValueError):
        der = b""
    if len(der) != 44 or not der.startswith(ED25519_SPKI_PREFIX):
        raise KeyFileError(f"{path}: not an Ed25519 public key (SPKI PEM)")
    return der[len(ED25519_SPKI_PREFIX) :]


VKEY = re.compile(r"([^\s+]{1,256})\+([0-9a-f]{8})\+([A-Za-z0-9+/]{44})")
"""A signed-note verifier key: ``<name>+<key id, 8 hex>+<base64(0x01 || Ed25519 key)>``."""


def is_vkey(text: str) -> bool:
    """Whether ``text`` has the shape of a signed-note verifier key (not a file name)."""
    return VKEY.fullmatch(text.strip()) is not None


def public_key_from_vkey(text: str) -> str:
    """The ``ed25519:<hex>`` of a signed-note verifier key, whose key id must be the one its
    name and key make (``InvalidInput`` otherwise). The name is not kept: a checkpoint's
    signature is checked against the key id of the name it is signed under."""
    match = VKEY.fullmatch(text.strip())
    raw = b""
    if match:
        with contextlib.suppress(ValueError):
            raw = base64.b64decode(match.group(3), validate=True)
    if len(raw) != 33 or raw[0] != 0x01:
        raise InvalidInput(
            "not a signed-note Ed25519 verifier key (<name>+<8 hex>+<base64 of 33 bytes>)",
            code="invalid-key",
        )
    assert match is not None
    name, key_id = match.group(1), bytes.fromhex(match.group(2))
    if hashlib.sha256(name.encode() + b"\n" + raw).digest()[:4] != key_id:
        raise InvalidInput(
            "a verifier key whose key id is not its name's and key's", code="invalid-key"
        )
    return public_key_text(raw[1:])


def trust_values(values: Iterable[str]) -> list[tuple[str, str]]:
    """``(ed25519:<hex>, where it came from)`` for each key the ``--trust`` values name:
    a key, or a trust file (``#`` comments, or one SPKI PEM). The one ``--trust`` parser:
    every command and check that takes trust reads it through here."""
    found = []
    for value in values:
        if value.strip().startswith("ed25519:"):
            found.append((public_key_text(parse_public_key(value)), "--trust"))
        elif is_vkey(value):
            found.append((public_key_from_vkey(value), "--trust (verifier key)"))
        else:
            found.extend((key, f"--trust file {value}") for key in read_trust_file(Path(value)))
    return found


def resolve_trust(values: Iterable[str], store: KeyStore) -> set[str]:
    """The trusted signer set: the install's own trust plus ``--trust`` keys or key files."""
    return set(store.trusted()) | {key for key, _ in trust_values(values)}
