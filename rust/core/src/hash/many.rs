//! BLAKE3 of many short messages at once.
//!
//! Verify hashes millions of small, independent messages (entries, log leaves, leaf
//! hashes) of a few 64-byte blocks. BLAKE3 compresses the blocks of one 1 KiB chunk one
//! after the other, but different chunks need not wait for each other: with AVX2, eight
//! chunks are compressed side by side, one per 32-bit lane, and sixteen with AVX-512 (the
//! "multi-buffer" technique). A lane whose chunk ends takes the next one, so the lanes
//! stay busy whatever the lengths. A message of several chunks then merges its chunks'
//! chaining values as BLAKE3's tree does (`blake3::hazmat`). Long messages, which the
//! `blake3` crate already hashes in parallel, and machines without AVX2 go through that
//! crate; the digests are the same (tested against it).

// The lanes exist for x86-64 only so far; elsewhere every message takes the crate.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use blake3::hazmat::{self, ChainingValue, ContextKey, HasherExt};

/// BLAKE3 processes its input in chunks of this many bytes; a message of at most one chunk
/// is a chain of block compressions with no tree above it.
const CHUNK_LEN: usize = 1024;
/// Messages longer than this go to the `blake3` crate, which hashes their chunks in
/// parallel itself.
const LANE_MAX_LEN: usize = 8 * CHUNK_LEN;
const BLOCK_LEN: usize = 64;

// Domain flags of the BLAKE3 compression function (BLAKE3 spec, table 3).
const CHUNK_START: u32 = 1;
const CHUNK_END: u32 = 2;
const ROOT: u32 = 8;
const KEYED_HASH: u32 = 16;
const DERIVE_KEY_MATERIAL: u32 = 64;

const IV: [u32; 8] = [
    0x6A09_E667,
    0xBB67_AE85,
    0x3C6E_F372,
    0xA54F_F53A,
    0x510E_527F,
    0x9B05_688C,
    0x1F83_D9AB,
    0x5BE0_CD19,
];

/// How the messages are hashed: plain BLAKE3, keyed, or derive-key mode under a context key.
#[derive(Clone, Copy)]
pub struct Mode {
    key: [u32; 8],
    flags: u32,
    kind: Kind,
}

#[derive(Clone, Copy)]
enum Kind {
    Plain,
    Keyed([u8; 32]),
    DeriveKey(ContextKey),
}

impl Mode {
    /// Plain BLAKE3 (`blake3::hash`).
    pub fn plain() -> Self {
        Mode {
            key: IV,
            flags: 0,
            kind: Kind::Plain,
        }
    }

    /// Keyed BLAKE3 (`blake3::keyed_hash`).
    pub fn keyed(key: [u8; 32]) -> Self {
        Mode {
            key: words(&key),
            flags: KEYED_HASH,
            kind: Kind::Keyed(key),
        }
    }

    /// Derive-key mode with the context key of `"agentledger/v1/" + domain`
    /// (`hash::domain_hash`).
    pub fn domain(domain: &str) -> Self {
        Self::derive_key(super::context_key(domain))
    }

    /// Derive-key mode under `context_key` (`blake3::hazmat::hash_derive_key_context`).
    pub fn derive_key(context_key: ContextKey) -> Self {
        Mode {
            key: words(&context_key),
            flags: DERIVE_KEY_MATERIAL,
            kind: Kind::DeriveKey(context_key),
        }
    }

    /// The mode as `blake3::hazmat` names it, to merge chunks.
    fn hazmat(&self) -> hazmat::Mode<'_> {
        match &self.kind {
            Kind::Plain => hazmat::Mode::Hash,
            Kind::Keyed(key) => hazmat::Mode::KeyedHash(key),
            Kind::DeriveKey(key) => hazmat::Mode::DeriveKeyMaterial(key),
        }
    }

    /// One message through the `blake3` crate.
    fn hash_one(&self, input: &[u8]) -> [u8; 32] {
        let mut hasher = match &self.kind {
            Kind::Plain => blake3::Hasher::new(),
            Kind::Keyed(key) => blake3::Hasher::new_keyed(key),
            Kind::DeriveKey(key) => blake3::Hasher::new_from_context_key(key),
        };
        *hasher.update(input).finalize().as_bytes()
    }
}

/// A 32-byte key as the compression function's eight little-endian words.
fn words(key: &[u8; 32]) -> [u32; 8] {
    let mut words = [0u32; 8];
    for (word, bytes) in words.iter_mut().zip(key.chunks_exact(4)) {
        *word = u32::from_le_bytes(bytes.try_into().expect("4 bytes"));
    }
    words
}

/// The BLAKE3 digest of each of `inputs` under `mode`, into `out` (same length).
pub fn hash_many(mode: &Mode, inputs: &[&[u8]], out: &mut [[u8; 32]]) {
    assert_eq!(inputs.len(), out.len(), "one output per input");
    #[cfg(target_arch = "x86_64")]
    if inputs.len() > 1 && !crate::portable::forced() {
        // SAFETY: each `compress` runs only where the CPU has its instructions.
        if std::is_x86_feature_detected!("avx512f") {
            return unsafe { in_lanes(mode, inputs, out, x86::compress16) };
        }
        if std::is_x86_feature_detected!("avx2") {
            return unsafe { in_lanes(mode, inputs, out, x86::compress8) };
        }
    }
    for (input, digest) in inputs.iter().zip(out) {
        *digest = mode.hash_one(input);
    }
}

/// Compresses one block in each of `N` lanes: `cv[w][l]` is word `w` of lane `l`'s chaining
/// value (updated in place), `block[l]` points at its 64-byte block, of `block_len[l]`
/// message bytes, in chunk `counter[l]`, compressed under `flags[l]`.
///
/// Unsafe: the CPU must have the instructions the implementation uses, and every pointer
/// must be readable for 64 bytes.
type Compress<const N: usize> =
    unsafe fn(&mut [[u32; N]; 8], &[*const u8; N], &[u32; N], &[u32; N], &[u32; N]);

/// One chunk of one message: what a lane compresses, block after block.
struct Chunk<'a> {
    bytes: &'a [u8],
    /// Its index in the message (BLAKE3's chunk counter).
    counter: u32,
    output: Output,
}

/// Where a chunk's output goes.
#[derive(Clone, Copy)]
enum Output {
    /// The message's digest: the chunk is the whole message.
    Digest(usize),
    /// A chaining value, merged with the message's other chunks' afterwards.
    Chained(usize),
}

/// Feeds the messages' chunks through `N` lanes of `compress`, each lane taking the next
/// chunk as soon as its own ends, then merges the chunks of longer messages.
///
/// # Safety
/// The CPU must have the instructions `compress` uses.
unsafe fn in_lanes<const N: usize>(
    mode: &Mode,
    inputs: &[&[u8]],
    out: &mut [[u8; 32]],
    compress: Compress<N>,
) {
    // Each message's chunks, in order; `merged` lists each multi-chunk message and where
    // its chunks' chaining values start in `cvs`.
    let mut chunks: Vec<Chunk<'_>> = Vec::with_capacity(inputs.len());
    let mut merged: Vec<(usize, usize)> = Vec::new();
    let mut chained = 0usize;
    for (i, input) in inputs.iter().enumerate() {
        if input.len() <= CHUNK_LEN {
            chunks.push(Chunk {
                bytes: input,
                counter: 0,
                output: Output::Digest(i),
            });
        } else if input.len() <= LANE_MAX_LEN {
            merged.push((i, chained));
            for (counter, bytes) in (0..).zip(input.chunks(CHUNK_LEN)) {
                chunks.push(Chunk {
                    bytes,
                    counter,
                    output: Output::Chained(chained),
                });
                chained += 1;
            }
        } else {
            out[i] = mode.hash_one(input);
        }
    }
    let mut cvs: Vec<ChainingValue> = vec![[0; 32]; chained];

    // Per lane: its chunk (`None`: idle) and the offset of its next block.
    let mut job: [Option<usize>; N] = [None; N];
    let mut offset = [0usize; N];
    let mut next = 0usize;
    for lane_job in &mut job {
        *lane_job = (next < chunks.len()).then_some(next);
        next += 1;
    }
    let mut cv = mode.key.map(|word| [word; N]);
    // A chunk's last block, when shorter than 64 bytes, is read from a zero-padded copy;
    // idle lanes compress zeros, and their results are ignored.
    const ZEROS: [u8; BLOCK_LEN] = [0; BLOCK_LEN];
    let mut padded = [[0u8; BLOCK_LEN]; N];
    let mut block = [ZEROS.as_ptr(); N];
    let mut block_len = [0u32; N];
    let mut counter = [0u32; N];
    let mut flags = [0u32; N];
    while job.iter().any(Option::is_some) {
        for l in 0..N {
            let Some(c) = job[l] else { continue };
            let chunk = &chunks[c];
            let rest = &chunk.bytes[offset[l]..];
            if rest.len() >= BLOCK_LEN {
                block[l] = rest.as_ptr();
            } else {
                padded[l] = [0; BLOCK_LEN];
                padded[l][..rest.len()].copy_from_slice(rest);
                block[l] = padded[l].as_ptr();
            }
            block_len[l] = rest.len().min(BLOCK_LEN) as u32;
            counter[l] = chunk.counter;
            let end = if rest.len() > BLOCK_LEN {
                0
            } else if let Output::Digest(_) = chunk.output {
                CHUNK_END | ROOT
            } else {
                CHUNK_END
            };
            flags[l] = mode.flags | if offset[l] == 0 { CHUNK_START } else { 0 } | end;
        }
        // SAFETY: the CPU runs `compress` (this function's contract); each pointer is a
        // whole block of a message, of `padded` or of `ZEROS`.
        unsafe { compress(&mut cv, &block, &block_len, &counter, &flags) };
        for l in 0..N {
            let Some(c) = job[l] else { continue };
            if flags[l] & CHUNK_END == 0 {
                offset[l] += BLOCK_LEN;
                continue;
            }
            // An output (a digest or a chaining value) is the eight words, little-endian.
            let output = match chunks[c].output {
                Output::Digest(i) => &mut out[i],
                Output::Chained(k) => &mut cvs[k],
            };
            for (w, bytes) in output.chunks_exact_mut(4).enumerate() {
                bytes.copy_from_slice(&cv[w][l].to_le_bytes());
                cv[w][l] = mode.key[w];
            }
            offset[l] = 0;
            job[l] = (next < chunks.len()).then_some(next);
            next += 1;
            block[l] = ZEROS.as_ptr();
        }
    }
    let ends = merged
        .iter()
        .skip(1)
        .map(|&(_, start)| start)
        .chain([chained]);
    for (&(i, start), end) in merged.iter().zip(ends) {
        out[i] = merge_root(&cvs[start..end], mode.hazmat());
    }
}

/// The digest of a message from its chunks' chaining values (at least two): BLAKE3's tree,
/// whose left subtree holds the largest power of two of chunks that leaves some on the right.
fn merge_root(cvs: &[ChainingValue], mode: hazmat::Mode<'_>) -> [u8; 32] {
    let left = cvs.len().next_power_of_two() / 2;
    let (l, r) = (merge(&cvs[..left], mode), merge(&cvs[left..], mode));
    *hazmat::merge_subtrees_root(&l, &r, mode).as_bytes()
}

/// The chaining value of a subtree of chunks.
fn merge(cvs: &[ChainingValue], mode: hazmat::Mode<'_>) -> ChainingValue {
    if cvs.len() == 1 {
        return cvs[0];
    }
    let left = cvs.len().next_power_of_two() / 2;
    hazmat::merge_subtrees_non_root(&merge(&cvs[..left], mode), &merge(&cvs[left..], mode), mode)
}

/// The message word order of each of the seven rounds: the identity, then each round
/// applies BLAKE3's fixed permutation to the one before.
#[cfg(target_arch = "x86_64")]
const SCHEDULE: [[usize; 16]; 7] = {
    const PERMUTATION: [usize; 16] = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8];
    let mut schedule = [[0usize; 16]; 7];
    let mut i = 0;
    while i < 16 {
        schedule[0][i] = i;
        i += 1;
    }
    let mut round = 1;
    while round < 7 {
        let mut i = 0;
        while i < 16 {
            schedule[round][i] = schedule[round - 1][PERMUTATION[i]];
            i += 1;
        }
        round += 1;
    }
    schedule
};

/// The seven rounds over the state `$v` and message `$m` (arrays of vectors), given the
/// vector add, xor and four rotate-right operations. Unrolled, so that every message index
/// is a constant and the message can stay in registers.
#[cfg(target_arch = "x86_64")]
macro_rules! rounds {
    ($v:ident, $m:ident, $add:path, $xor:path, $ror16:expr, $ror12:expr, $ror8:expr, $ror7:expr) => {
        macro_rules! g {
            ($a:literal, $b:literal, $c:literal, $d:literal, $x:expr, $y:expr) => {
                $v[$a] = $add($add($v[$a], $v[$b]), $x);
                $v[$d] = $ror16($xor($v[$d], $v[$a]));
                $v[$c] = $add($v[$c], $v[$d]);
                $v[$b] = $ror12($xor($v[$b], $v[$c]));
                $v[$a] = $add($add($v[$a], $v[$b]), $y);
                $v[$d] = $ror8($xor($v[$d], $v[$a]));
                $v[$c] = $add($v[$c], $v[$d]);
                $v[$b] = $ror7($xor($v[$b], $v[$c]));
            };
        }
        macro_rules! round {
            ($r:literal) => {
                let s = &SCHEDULE[$r];
                g!(0, 4, 8, 12, $m[s[0]], $m[s[1]]);
                g!(1, 5, 9, 13, $m[s[2]], $m[s[3]]);
                g!(2, 6, 10, 14, $m[s[4]], $m[s[5]]);
                g!(3, 7, 11, 15, $m[s[6]], $m[s[7]]);
                g!(0, 5, 10, 15, $m[s[8]], $m[s[9]]);
                g!(1, 6, 11, 12, $m[s[10]], $m[s[11]]);
                g!(2, 7, 8, 13, $m[s[12]], $m[s[13]]);
                g!(3, 4, 9, 14, $m[s[14]], $m[s[15]]);
            };
        }
        round!(0);
        round!(1);
        round!(2);
        round!(3);
        round!(4);
        round!(5);
        round!(6);
    };
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    use std::arch::x86_64::*;

    use super::{IV, SCHEDULE};

    /// Eight lanes of 32-bit words in AVX2 registers.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn compress8(
        cv: &mut [[u32; 8]; 8],
        block: &[*const u8; 8],
        block_len: &[u32; 8],
        counter: &[u32; 8],
        flags: &[u32; 8],
    ) {
        let low = transpose8(std::array::from_fn(|l| load8(block[l])));
        let high = transpose8(std::array::from_fn(|l| load8(block[l].add(32))));
        let m: [__m256i; 16] = std::array::from_fn(|i| if i < 8 { low[i] } else { high[i - 8] });
        let mut v = [
            load8(cv[0].as_ptr().cast()),
            load8(cv[1].as_ptr().cast()),
            load8(cv[2].as_ptr().cast()),
            load8(cv[3].as_ptr().cast()),
            load8(cv[4].as_ptr().cast()),
            load8(cv[5].as_ptr().cast()),
            load8(cv[6].as_ptr().cast()),
            load8(cv[7].as_ptr().cast()),
            _mm256_set1_epi32(IV[0] as i32),
            _mm256_set1_epi32(IV[1] as i32),
            _mm256_set1_epi32(IV[2] as i32),
            _mm256_set1_epi32(IV[3] as i32),
            load8(counter.as_ptr().cast()),
            _mm256_setzero_si256(),
            load8(block_len.as_ptr().cast()),
            load8(flags.as_ptr().cast()),
        ];
        rounds!(
            v,
            m,
            _mm256_add_epi32,
            _mm256_xor_si256,
            ror8::<16>,
            ror8::<12>,
            ror8::<8>,
            ror8::<7>
        );
        for w in 0..8 {
            _mm256_storeu_si256(cv[w].as_mut_ptr().cast(), _mm256_xor_si256(v[w], v[w + 8]));
        }
    }

    /// Sixteen lanes of 32-bit words in AVX-512 registers.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn compress16(
        cv: &mut [[u32; 16]; 8],
        block: &[*const u8; 16],
        block_len: &[u32; 16],
        counter: &[u32; 16],
        flags: &[u32; 16],
    ) {
        let m = transpose16(std::array::from_fn(|l| load16(block[l])));
        let mut v = [
            load16(cv[0].as_ptr().cast()),
            load16(cv[1].as_ptr().cast()),
            load16(cv[2].as_ptr().cast()),
            load16(cv[3].as_ptr().cast()),
            load16(cv[4].as_ptr().cast()),
            load16(cv[5].as_ptr().cast()),
            load16(cv[6].as_ptr().cast()),
            load16(cv[7].as_ptr().cast()),
            _mm512_set1_epi32(IV[0] as i32),
            _mm512_set1_epi32(IV[1] as i32),
            _mm512_set1_epi32(IV[2] as i32),
            _mm512_set1_epi32(IV[3] as i32),
            load16(counter.as_ptr().cast()),
            _mm512_setzero_si512(),
            load16(block_len.as_ptr().cast()),
            load16(flags.as_ptr().cast()),
        ];
        rounds!(
            v,
            m,
            _mm512_add_epi32,
            _mm512_xor_si512,
            _mm512_ror_epi32::<16>,
            _mm512_ror_epi32::<12>,
            _mm512_ror_epi32::<8>,
            _mm512_ror_epi32::<7>
        );
        for w in 0..8 {
            _mm512_storeu_si512(cv[w].as_mut_ptr().cast(), _mm512_xor_si512(v[w], v[w + 8]));
        }
    }

    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn load8(p: *const u8) -> __m256i {
        // SAFETY: the caller's contract: AVX2 present, 32 bytes readable at `p`.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }

    #[inline]
    #[target_feature(enable = "avx512f")]
    unsafe fn load16(p: *const u8) -> __m512i {
        // SAFETY: the caller's contract: AVX-512F present, 64 bytes readable at `p`.
        unsafe { _mm512_loadu_si512(p.cast()) }
    }

    /// Each 32-bit word rotated right by `N` bits (16 and 8: one byte shuffle).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn ror8<const N: i32>(x: __m256i) -> __m256i {
        match N {
            16 => _mm256_shuffle_epi8(
                x,
                _mm256_setr_epi8(
                    2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13, 2, 3, 0, 1, 6, 7, 4, 5,
                    10, 11, 8, 9, 14, 15, 12, 13,
                ),
            ),
            8 => _mm256_shuffle_epi8(
                x,
                _mm256_setr_epi8(
                    1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12, 1, 2, 3, 0, 5, 6, 7, 4,
                    9, 10, 11, 8, 13, 14, 15, 12,
                ),
            ),
            12 => _mm256_or_si256(_mm256_srli_epi32::<12>(x), _mm256_slli_epi32::<20>(x)),
            7 => _mm256_or_si256(_mm256_srli_epi32::<7>(x), _mm256_slli_epi32::<25>(x)),
            _ => unreachable!("BLAKE3 rotates by 16, 12, 8 and 7"),
        }
    }

    /// An 8×8 matrix of 32-bit words, rows to columns.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn transpose8(r: [__m256i; 8]) -> [__m256i; 8] {
        // Pairs of rows interleaved by word, then by pairs of words: each 128-bit half then
        // holds a 4×4 block transposed; the halves are then swapped into place.
        let a: [__m256i; 8] = std::array::from_fn(|i| {
            let (x, y) = (r[i & !1], r[i | 1]);
            if i % 2 == 0 {
                _mm256_unpacklo_epi32(x, y)
            } else {
                _mm256_unpackhi_epi32(x, y)
            }
        });
        let b: [__m256i; 8] = std::array::from_fn(|i| {
            let (x, y) = (a[(i & 4) + (i & 2) / 2], a[(i & 4) + (i & 2) / 2 + 2]);
            if i % 2 == 0 {
                _mm256_unpacklo_epi64(x, y)
            } else {
                _mm256_unpackhi_epi64(x, y)
            }
        });
        std::array::from_fn(|i| {
            let (x, y) = (b[i % 4], b[i % 4 + 4]);
            if i < 4 {
                _mm256_permute2x128_si256::<0x20>(x, y)
            } else {
                _mm256_permute2x128_si256::<0x31>(x, y)
            }
        })
    }

    /// A 16×16 matrix of 32-bit words, rows to columns (also SHA-256's lanes).
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in crate::hash) fn transpose16(r: [__m512i; 16]) -> [__m512i; 16] {
        // As in `transpose8`, 4×4 blocks first; then two passes move 128-bit blocks.
        let a: [__m512i; 16] = std::array::from_fn(|i| {
            let (x, y) = (r[i & !1], r[i | 1]);
            if i % 2 == 0 {
                _mm512_unpacklo_epi32(x, y)
            } else {
                _mm512_unpackhi_epi32(x, y)
            }
        });
        // b[4j + c], 128-bit block k: column 4k + c, rows 4j..4j+3.
        let b: [__m512i; 16] = std::array::from_fn(|i| {
            let (j, c) = (i / 4, i % 4);
            let (x, y) = (a[4 * j + c / 2], a[4 * j + c / 2 + 2]);
            if c % 2 == 0 {
                _mm512_unpacklo_epi64(x, y)
            } else {
                _mm512_unpackhi_epi64(x, y)
            }
        });
        // e[c] = blocks 0 and 2 of b[c] and b[4 + c]; e[4 + c] = blocks 1 and 3 (f: rows 8..15).
        let e: [__m512i; 8] = std::array::from_fn(|i| {
            let (x, y) = (b[i % 4], b[i % 4 + 4]);
            if i < 4 {
                _mm512_shuffle_i32x4::<0x88>(x, y)
            } else {
                _mm512_shuffle_i32x4::<0xDD>(x, y)
            }
        });
        let f: [__m512i; 8] = std::array::from_fn(|i| {
            let (x, y) = (b[i % 4 + 8], b[i % 4 + 12]);
            if i < 4 {
                _mm512_shuffle_i32x4::<0x88>(x, y)
            } else {
                _mm512_shuffle_i32x4::<0xDD>(x, y)
            }
        });
        // Column 4k + c: block k of b[c], b[4 + c], b[8 + c], b[12 + c].
        std::array::from_fn(|n| {
            let (k, c) = (n / 4, n % 4);
            let (x, y) = if k % 2 == 0 {
                (e[c], f[c])
            } else {
                (e[4 + c], f[4 + c])
            };
            if k < 2 {
                _mm512_shuffle_i32x4::<0x88>(x, y)
            } else {
                _mm512_shuffle_i32x4::<0xDD>(x, y)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use blake3::hazmat::hash_derive_key_context;

    use super::*;

    /// Messages of every length from 0 to just over two chunks, then around each chunk
    /// count up to and past the longest hashed in lanes, so each lane sees starts, ends,
    /// chunk boundaries and long messages at different times.
    fn messages() -> Vec<Vec<u8>> {
        let around = (3..=LANE_MAX_LEN / CHUNK_LEN + 1).flat_map(|chunks| {
            [
                chunks * CHUNK_LEN - 1,
                chunks * CHUNK_LEN,
                chunks * CHUNK_LEN + 1,
            ]
        });
        (0..=2 * CHUNK_LEN + 3)
            .chain(around)
            .map(|len| (0..len).map(|i| (i * 31 + len * 7) as u8).collect())
            .collect()
    }

    type Backend = fn(&Mode, &[&[u8]], &mut [[u8; 32]]);

    /// Every implementation this CPU can run, so that each is tested wherever it can be.
    fn backends() -> Vec<(&'static str, Backend)> {
        let mut backends: Vec<(&'static str, Backend)> = vec![("dispatch", hash_many)];
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY (both): pushed only where the CPU has the instructions.
            if std::is_x86_feature_detected!("avx2") {
                backends.push(("avx2", |mode, inputs, out| unsafe {
                    in_lanes(mode, inputs, out, x86::compress8)
                }));
            }
            if std::is_x86_feature_detected!("avx512f") {
                backends.push(("avx512", |mode, inputs, out| unsafe {
                    in_lanes(mode, inputs, out, x86::compress16)
                }));
            }
        }
        backends
    }

    fn check(mode: &Mode, inputs: &[Vec<u8>]) {
        let slices: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        for (name, backend) in backends() {
            let mut out = vec![[0u8; 32]; slices.len()];
            backend(mode, &slices, &mut out);
            for (input, digest) in inputs.iter().zip(&out) {
                assert_eq!(
                    *digest,
                    mode.hash_one(input),
                    "{name}, length {}",
                    input.len()
                );
            }
        }
    }

    #[test]
    fn plain_mode_matches_blake3_at_every_length() {
        let inputs = messages();
        check(&Mode::plain(), &inputs);
        for (input, digest) in inputs
            .iter()
            .zip(inputs.iter().map(|i| Mode::plain().hash_one(i)))
        {
            assert_eq!(digest, *blake3::hash(input).as_bytes());
        }
    }

    #[test]
    fn derive_key_mode_matches_domain_hash_at_every_length() {
        let inputs = messages();
        let mode = Mode::domain("entry");
        check(&mode, &inputs);
        for input in &inputs {
            assert_eq!(
                mode.hash_one(input),
                super::super::domain_hash("entry", input)
            );
        }
    }

    #[test]
    fn keyed_mode_matches_keyed_blake3_at_every_length() {
        let inputs = messages();
        let key = [0x5a; 32];
        check(&Mode::keyed(key), &inputs);
        for input in &inputs {
            assert_eq!(
                Mode::keyed(key).hash_one(input),
                *blake3::keyed_hash(&key, input).as_bytes()
            );
        }
    }

    #[test]
    fn lengths_in_any_order_and_batch_size_agree() {
        // Reversed, and in batches of every size up to a few lanes' worth.
        let mut inputs = messages();
        inputs.reverse();
        for size in 1..=19 {
            for batch in inputs.chunks(size).take(40) {
                check(&Mode::domain("log-leaf"), batch);
            }
        }
    }

    #[test]
    fn the_official_vectors_hash_alike_in_plain_and_derive_key_modes() {
        use crate::hash::testutil::{parse_json, read_vector};
        let vectors = parse_json(&read_vector("blake3/test_vectors.json"));
        let context = vectors.get("context_string").str();
        let cases = vectors.get("cases").arr();
        // Byte i of a vector input is i mod 251.
        let inputs: Vec<Vec<u8>> = cases
            .iter()
            .map(|case| {
                (0..case.get("input_len").int() as usize)
                    .map(|i| (i % 251) as u8)
                    .collect()
            })
            .collect();
        let slices: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let modes = [
            ("hash", Mode::plain()),
            (
                "derive_key",
                Mode::derive_key(hash_derive_key_context(context)),
            ),
        ];
        for (field, mode) in modes {
            for (name, backend) in backends() {
                let mut out = vec![[0u8; 32]; slices.len()];
                backend(&mode, &slices, &mut out);
                for (case, digest) in cases.iter().zip(&out) {
                    let want = &case.get(field).str()[..64];
                    let len = case.get("input_len").int();
                    assert_eq!(hex::encode(digest), want, "{name} {field}, length {len}");
                }
            }
        }
    }

    /// Random batches (a seeded generator: the same cases everywhere) of random sizes and
    /// lengths, on every backend this CPU runs, against the `blake3` crate itself.
    #[test]
    fn random_batches_agree_with_the_blake3_crate_on_every_backend() {
        let mut next = crate::hash::testutil::xorshift(0x2545_F491_4F6C_DD1D);
        for _ in 0..150 {
            let count = 1 + (next() % 40) as usize;
            let inputs: Vec<Vec<u8>> = (0..count)
                .map(|_| {
                    let len = (next() % 4500) as usize;
                    (0..len).map(|_| next() as u8).collect()
                })
                .collect();
            let slices: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
            for (name, backend) in backends() {
                let mut out = vec![[0u8; 32]; count];
                backend(&Mode::plain(), &slices, &mut out);
                for (input, digest) in inputs.iter().zip(&out) {
                    assert_eq!(digest, blake3::hash(input).as_bytes(), "{name}");
                }
                backend(&Mode::domain("entry"), &slices, &mut out);
                for (input, digest) in inputs.iter().zip(&out) {
                    assert_eq!(*digest, super::super::domain_hash("entry", input), "{name}");
                }
            }
        }
    }
}
