"""The Rust core's public surface: canonical JSON, hashing, Merkle proofs, Ed25519.

Everything here is implemented in ``agentledger._core`` (Rust); this module only
re-exports it under stable names.
"""

from agentledger._core import (
    CanonicalizationError,
    Blake3Hasher,
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
    IncrementalMerkleTree,
    MAX_DEPTH,
)

__all__ = [
    "MAX_DEPTH",
    "Blake3Hasher",
    "Sha256Hasher",
    "CanonicalizationError",
    "IncrementalMerkleTree",
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
