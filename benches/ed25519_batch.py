"""Ed25519: PyNaCl verifying one signature at a time vs one ``ed25519_verify_batch`` call.

    python benches/ed25519_batch.py [--n N] [--json]

Builds N signed messages with PyNaCl (one key per 16 messages, messages of 32-256 bytes,
one signature in 10 corrupted so that both decisions occur), then times, in this run:

- the baseline: ``nacl.signing.VerifyKey(pk).verify(msg, sig)`` for each triple;
- ``agentledger._core.ed25519_verify_batch`` on the whole list (GIL released, rayon).

Both must reach identical decisions or the bench fails. The figure is the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

import nacl.exceptions
import nacl.signing

from agentledger._core import ed25519_verify_batch

Triple = tuple[bytes, bytes, bytes]


def build(n: int, seed: int = 1) -> list[Triple]:
    rng = random.Random(seed)
    triples: list[Triple] = []
    key = nacl.signing.SigningKey(rng.randbytes(32))
    for i in range(n):
        if i % 16 == 0:
            key = nacl.signing.SigningKey(rng.randbytes(32))
        message = rng.randbytes(rng.randrange(32, 257))
        signature = bytearray(key.sign(message).signature)
        if i % 10 == 9:
            signature[rng.randrange(64)] ^= 1 << rng.randrange(8)
        triples.append((bytes(key.verify_key), message, bytes(signature)))
    return triples


def pynacl_decisions(triples: list[Triple]) -> list[bool]:
    decisions = []
    for public_key, message, signature in triples:
        try:
            nacl.signing.VerifyKey(public_key).verify(message, signature)
        except nacl.exceptions.BadSignatureError:
            decisions.append(False)
        else:
            decisions.append(True)
    return decisions


def best_of(repeats: int, run: object) -> tuple[float, list[bool]]:
    assert callable(run)
    best, result = float("inf"), []
    for _ in range(repeats):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000, help="signed messages (default 20000)")
    parser.add_argument("--json", action="store_true", help="print one JSON object only")
    args = parser.parse_args()

    triples = build(args.n)
    pynacl_s, expected = best_of(3, lambda: pynacl_decisions(triples))
    batch_s, decisions = best_of(3, lambda: ed25519_verify_batch(triples))
    if decisions != expected:
        mismatches = sum(a != b for a, b in zip(decisions, expected, strict=True))
        print(f"decisions differ from PyNaCl on {mismatches} of {args.n}", file=sys.stderr)
        return 1
    speedup = pynacl_s / batch_s

    if args.json:
        print(
            json.dumps({"n": args.n, "pynacl_s": pynacl_s, "batch_s": batch_s, "speedup": speedup})
        )
        return 0
    accepted = sum(expected)
    print(
        f"Ed25519 verify, {args.n} signatures ({accepted} valid), {os.cpu_count()} CPUs, best of 3"
    )
    print(f"{'method':<34}{'seconds':>10}{'per sig (us)':>15}{'ratio':>8}")
    for name, seconds in (
        ("PyNaCl, one at a time (baseline)", pynacl_s),
        ("ed25519_verify_batch", batch_s),
    ):
        print(
            f"{name:<34}{seconds:>10.3f}{seconds / args.n * 1e6:>15.1f}{pynacl_s / seconds:>7.2f}x"
        )
    print("decisions: identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
