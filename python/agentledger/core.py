"""The Rust core's public surface: canonical JSON, hashing, Merkle proofs, Ed25519.

Everything here is implemented in ``agentledger._core`` (Rust); this module only
re-exports it under stable names.
"""

from agentledger._core import (
    MAX_DEPTH,
    Blake3Hasher,
    CanonicalizationError,
    IncrementalMerkleTree,
    Sha256Hasher,
    blake3_hex,
    canonicalize,
    canonicalize_json,
    consistency_proof,
    domain_hash,
    ed25519_verify,
    ed25519_verify_batch,
    hkdf_sha256,
    hmac_sha256,
    inclusion_proof,
    merkle_root,
    sha256_hex,
    verify_consistency,
    verify_inclusion,
)

__all__ = [
    "MAX_DEPTH",
    "Blake3Hasher",
    "CanonicalizationError",
    "IncrementalMerkleTree",
    "Sha256Hasher",
    "blake3_hex",
    "canonicalize",
    "canonicalize_json",
    "consistency_proof",
    "domain_hash",
    "ed25519_verify",
    "ed25519_verify_batch",
    "hkdf_sha256",
    "hmac_sha256",
    "inclusion_proof",
    "merkle_root",
    "sha256_hex",
    "verify_consistency",
    "verify_inclusion",
]
