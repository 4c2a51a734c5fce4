//! SHA-256 of many messages at once: sixteen lanes of AVX-512, one message per lane, each
//! lane taking the next message as soon as its own ends. On one core that is twice the
//! speed of the SHA extensions, which hash one block after another; elsewhere (no
//! AVX-512, or too few messages to fill the lanes) the messages are hashed one by one.
//!
//! Verify hashes tens of megabytes this way: the imported journals' files and the
//! flat store's blobs.

use super::sha256;

/// Fewer messages than this are hashed one by one (lanes would mostly idle).
const LANES_WORTH: usize = 8;

/// The SHA-256 of each message, in order.
pub fn sha256_many(messages: &[&[u8]]) -> Vec<[u8; 32]> {
    #[cfg(target_arch = "x86_64")]
    if messages.len() >= LANES_WORTH
        && !crate::portable::forced()
        && std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
    {
        // SAFETY: the CPU has the instructions `x86::in_lanes` uses.
        return unsafe { x86::in_lanes(messages) };
    }
    messages.iter().map(|message| sha256(message)).collect()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::super::many::x86::transpose16;

    const IV: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];

    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];

    /// A block of zeros for a lane with nothing left to hash: the queue is empty, so its
    /// state is never read again.
    static IDLE: [u8; 64] = [0; 64];

    /// One message in a lane: its whole blocks are read in place, its last one or two
    /// blocks (the rest of its bytes, `0x80`, zeros, the bit length) from `tail`.
    struct Lane<'a> {
        message: usize,
        bytes: &'a [u8],
        block: usize,
        whole_blocks: usize,
        blocks: usize,
        tail: [u8; 128],
    }

    impl<'a> Lane<'a> {
        fn new(message: usize, bytes: &'a [u8]) -> Self {
            let whole_blocks = bytes.len() / 64;
            let rest = &bytes[whole_blocks * 64..];
            let mut tail = [0u8; 128];
            tail[..rest.len()].copy_from_slice(rest);
            tail[rest.len()] = 0x80;
            let tail_blocks = if rest.len() + 9 <= 64 { 1 } else { 2 };
            let bits = (bytes.len() as u64).wrapping_mul(8);
            tail[tail_blocks * 64 - 8..tail_blocks * 64].copy_from_slice(&bits.to_be_bytes());
            Lane {
                message,
                bytes,
                block: 0,
                whole_blocks,
                blocks: whole_blocks + tail_blocks,
                tail,
            }
        }

        fn next_block(&self) -> *const u8 {
            if self.block < self.whole_blocks {
                self.bytes[self.block * 64..].as_ptr()
            } else {
                self.tail[(self.block - self.whole_blocks) * 64..].as_ptr()
            }
        }
    }

    /// # Safety
    /// The CPU must have AVX-512F and AVX-512BW.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(super) unsafe fn in_lanes(messages: &[&[u8]]) -> Vec<[u8; 32]> {
        let mut out = vec![[0u8; 32]; messages.len()];
        let iv: [__m512i; 8] = std::array::from_fn(|w| _mm512_set1_epi32(IV[w] as i32));
        let mut state = iv;
        let mut queue = messages.iter().enumerate();
        let mut lanes: [Option<Lane<'_>>; 16] =
            std::array::from_fn(|_| queue.next().map(|(i, bytes)| Lane::new(i, bytes)));
        while lanes.iter().any(Option::is_some) {
            let blocks: [*const u8; 16] = std::array::from_fn(|l| match &lanes[l] {
                Some(lane) => lane.next_block(),
                None => IDLE.as_ptr(),
            });
            // SAFETY: every pointer is readable for 64 bytes (a whole block of a message,
            // of a lane's tail, or `IDLE`).
            unsafe { compress16(&mut state, &blocks) };
            let mut finished = 0u16;
            for (l, slot) in lanes.iter_mut().enumerate() {
                if let Some(lane) = slot {
                    lane.block += 1;
                    if lane.block == lane.blocks {
                        finished |= 1 << l;
                    }
                }
            }
            if finished == 0 {
                continue;
            }
            let words: [[u32; 16]; 8] = std::array::from_fn(|w| {
                let mut lane_words = [0u32; 16];
                // SAFETY: 64 bytes are written into a 64-byte array.
                unsafe { _mm512_storeu_si512(lane_words.as_mut_ptr().cast(), state[w]) };
                lane_words
            });
            for (l, slot) in lanes.iter_mut().enumerate() {
                if finished & (1 << l) == 0 {
                    continue;
                }
                let Some(lane) = slot.take() else { continue };
                for (w, chunk) in out[lane.message].chunks_exact_mut(4).enumerate() {
                    chunk.copy_from_slice(&words[w][l].to_be_bytes());
                }
                *slot = queue.next().map(|(i, bytes)| Lane::new(i, bytes));
            }
            // A lane that took a new message starts it from the initial state.
            for w in 0..8 {
                state[w] = _mm512_mask_mov_epi32(state[w], finished, iv[w]);
            }
        }
        out
    }

    /// One block in each lane: `state[w]` holds word `w` of every lane's state.
    ///
    /// # Safety
    /// The CPU must have AVX-512F and AVX-512BW; every pointer must be readable for 64
    /// bytes.
    #[target_feature(enable = "avx512f,avx512bw")]
    unsafe fn compress16(state: &mut [__m512i; 8], blocks: &[*const u8; 16]) {
        // The blocks' big-endian words, lane by lane, then word by word.
        let big_endian = _mm512_set4_epi32(0x0c0d0e0f, 0x08090a0b, 0x04050607, 0x00010203);
        // SAFETY: the function's contract: each pointer readable for 64 bytes.
        let rows: [__m512i; 16] =
            std::array::from_fn(|l| unsafe { _mm512_loadu_si512(blocks[l].cast()) });
        let columns = transpose16(rows);
        let mut w: [__m512i; 16] =
            std::array::from_fn(|t| _mm512_shuffle_epi8(columns[t], big_endian));
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = *state;
        for (t, k) in K.iter().enumerate() {
            let word = if t < 16 {
                w[t]
            } else {
                // w[t] = σ1(w[t-2]) + w[t-7] + σ0(w[t-15]) + w[t-16], in a ring of 16.
                let (w15, w2) = (w[(t + 1) % 16], w[(t + 14) % 16]);
                let s0 = _mm512_ternarylogic_epi32::<0x96>(
                    _mm512_ror_epi32::<7>(w15),
                    _mm512_ror_epi32::<18>(w15),
                    _mm512_srli_epi32::<3>(w15),
                );
                let s1 = _mm512_ternarylogic_epi32::<0x96>(
                    _mm512_ror_epi32::<17>(w2),
                    _mm512_ror_epi32::<19>(w2),
                    _mm512_srli_epi32::<10>(w2),
                );
                let next = _mm512_add_epi32(
                    _mm512_add_epi32(w[t % 16], s0),
                    _mm512_add_epi32(w[(t + 9) % 16], s1),
                );
                w[t % 16] = next;
                next
            };
            // Σ1(e), Ch(e, f, g), Σ0(a), Maj(a, b, c); three-input logic in one instruction.
            let big_s1 = _mm512_ternarylogic_epi32::<0x96>(
                _mm512_ror_epi32::<6>(e),
                _mm512_ror_epi32::<11>(e),
                _mm512_ror_epi32::<25>(e),
            );
            let choose = _mm512_ternarylogic_epi32::<0xCA>(e, f, g);
            let t1 = _mm512_add_epi32(
                _mm512_add_epi32(h, big_s1),
                _mm512_add_epi32(choose, _mm512_add_epi32(_mm512_set1_epi32(*k as i32), word)),
            );
            let big_s0 = _mm512_ternarylogic_epi32::<0x96>(
                _mm512_ror_epi32::<2>(a),
                _mm512_ror_epi32::<13>(a),
                _mm512_ror_epi32::<22>(a),
            );
            let majority = _mm512_ternarylogic_epi32::<0xE8>(a, b, c);
            let t2 = _mm512_add_epi32(big_s0, majority);
            (h, g, f, e) = (g, f, e, _mm512_add_epi32(d, t1));
            (d, c, b, a) = (c, b, a, _mm512_add_epi32(t1, t2));
        }
        for (word, new) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
            *word = _mm512_add_epi32(*word, new);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::testutil::xorshift;

    /// Messages of every length around the padding edges, and a few long ones, in an
    /// order that makes lanes finish at different times.
    fn messages() -> Vec<Vec<u8>> {
        let mut next = xorshift(0x6A09_E667_F3BC_C908u64);
        let mut lengths: Vec<usize> = (0..200).collect();
        lengths.extend([447, 448, 511, 512, 513, 1000, 4096, 57_000, 65_536 + 55]);
        lengths.extend((0..60).map(|_| (next() % 3000) as usize));
        lengths
            .into_iter()
            .map(|len| (0..len).map(|_| next() as u8).collect())
            .collect()
    }

    #[test]
    fn each_digest_is_the_messages_sha256() {
        let messages = messages();
        let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
        let digests = sha256_many(&slices);
        assert_eq!(digests.len(), messages.len());
        for (message, digest) in messages.iter().zip(&digests) {
            assert_eq!(digest, &sha256(message), "length {}", message.len());
        }
        // Fewer messages than the lanes, and none.
        assert_eq!(sha256_many(&slices[190..200]), digests[190..200].to_vec());
        assert_eq!(sha256_many(&slices[..3]), digests[..3].to_vec());
        assert!(sha256_many(&[]).is_empty());
    }

    #[test]
    fn the_fips_180_examples_hash_alike() {
        // FIPS 180-2, appendix B: "abc" and the two-block 448-bit message.
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        let two = "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
        let long = b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".as_slice();
        let mut inputs: Vec<&[u8]> = vec![b"abc", long];
        inputs.extend(std::iter::repeat_n(&b"abc"[..], 14));
        let digests = sha256_many(&inputs);
        assert_eq!(hex::encode(digests[0]), abc);
        assert_eq!(hex::encode(digests[1]), two);
        assert!(digests[2..].iter().all(|d| hex::encode(d) == abc));
    }

    /// Random batches (a seeded generator: the same cases everywhere) in the lanes where
    /// the CPU has them, and through the dispatch, against the `sha2` crate itself.
    #[test]
    fn random_batches_agree_with_the_sha2_crate() {
        use sha2::Digest;
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        for _ in 0..150 {
            let count = (next() % 40) as usize;
            let messages: Vec<Vec<u8>> = (0..count)
                .map(|_| {
                    let len = (next() % 600) as usize;
                    (0..len).map(|_| next() as u8).collect()
                })
                .collect();
            let slices: Vec<&[u8]> = messages.iter().map(Vec::as_slice).collect();
            let want: Vec<[u8; 32]> = messages
                .iter()
                .map(|m| sha2::Sha256::digest(m).into())
                .collect();
            assert_eq!(sha256_many(&slices), want);
            #[cfg(target_arch = "x86_64")]
            if count >= LANES_WORTH
                && std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512bw")
            {
                // SAFETY: the CPU has the instructions `x86::in_lanes` uses.
                assert_eq!(unsafe { x86::in_lanes(&slices) }, want);
            }
        }
    }
}
