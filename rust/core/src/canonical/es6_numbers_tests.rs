//! The ES6 number test file of the RFC 8785 reference implementation, regenerated
//! locally (see tests/vectors/jcs-rfc8785/README.md) and checked against its published
//! SHA-256 checksums: a million `hex-ieee,expected` lines that pin [`write_number`] to
//! ECMAScript's `Number.prototype.toString`.

use sha2::{Digest, Sha256};

use super::write_number;

/// Edge cases the generator emits first, verbatim from the README.
#[rustfmt::skip]
const STATIC_U64S: [u64; 168] = [
    0x0000_0000_0000_0000, 0x8000_0000_0000_0000, 0x0000_0000_0000_0001, 0x8000_0000_0000_0001,
    0xc466_9669_5dbd_1cc3, 0xc432_11ed_e497_4a35, 0xc3fc_e97c_a0f2_1056, 0xc3c7_2130_80c1_a6ac,
    0xc392_80f3_9a34_8556, 0xc35d_9b1f_5d20_d557, 0xc327_af4c_4a80_aaac, 0xc2f2_f2a3_6ecd_5556,
    0xc2be_5105_7e15_5558, 0xc288_40d1_31aa_aaac, 0xc253_670d_c155_5557, 0xc21f_0b49_3555_5557,
    0xc1e8_d5d4_2aaa_aaac, 0xc1b3_de43_5555_5556, 0xc17f_ca05_5555_5556, 0xc149_6e6a_aaaa_aaab,
    0xc114_5855_5555_5555, 0xc0e0_46aa_aaaa_aaab, 0xc0aa_0aaa_aaaa_aaaa, 0xc074_d555_5555_5555,
    0xc040_aaaa_aaaa_aaab, 0xc00a_aaaa_aaaa_aaab, 0xbfd5_5555_5555_5555, 0xbfa1_1111_1111_1111,
    0xbf6b_4e81_b4e8_1b4f, 0xbf35_d867_c3ec_e2a5, 0xbf01_79ec_9cbd_821e, 0xbecb_f647_612f_3696,
    0xbe96_5e9f_80f2_9212, 0xbe61_e54c_6728_74db, 0xbe2c_a213_d840_baf8, 0xbdf6_e80f_e033_c8c6,
    0xbdc2_533f_e68f_d3d2, 0xbd8d_51ff_d74c_861c, 0xbd57_74cc_ac3d_3817, 0xbd22_c3d6_f030_f9ac,
    0xbcee_0624_b381_8f79, 0xbcb8_04ea_2934_72c7, 0xbc83_3721_ba90_5bd3, 0xbc4e_be9c_5db3_c61e,
    0xbc18_987d_17c3_04e5, 0xbbe3_ad30_dfcf_371d, 0xbbaf_7b81_6618_582f, 0xbb79_2f9a_b813_79bf,
    0xbb44_2615_600f_9499, 0xbb10_1e77_800c_76e1, 0xbad9_ca58_cce0_be35, 0xbaa4_a1e0_a3e6_fe90,
    0xba70_8180_831f_320d, 0xba3a_68cd_9e98_5016, 0x4466_9669_5dbd_1cc3, 0x4432_11ed_e497_4a35,
    0x43fc_e97c_a0f2_1056, 0x43c7_2130_80c1_a6ac, 0x4392_80f3_9a34_8556, 0x435d_9b1f_5d20_d557,
    0x4327_af4c_4a80_aaac, 0x42f2_f2a3_6ecd_5556, 0x42be_5105_7e15_5558, 0x4288_40d1_31aa_aaac,
    0x4253_670d_c155_5557, 0x421f_0b49_3555_5557, 0x41e8_d5d4_2aaa_aaac, 0x41b3_de43_5555_5556,
    0x417f_ca05_5555_5556, 0x4149_6e6a_aaaa_aaab, 0x4114_5855_5555_5555, 0x40e0_46aa_aaaa_aaab,
    0x40aa_0aaa_aaaa_aaaa, 0x4074_d555_5555_5555, 0x4040_aaaa_aaaa_aaab, 0x400a_aaaa_aaaa_aaab,
    0x3fd5_5555_5555_5555, 0x3fa1_1111_1111_1111, 0x3f6b_4e81_b4e8_1b4f, 0x3f35_d867_c3ec_e2a5,
    0x3f01_79ec_9cbd_821e, 0x3ecb_f647_612f_3696, 0x3e96_5e9f_80f2_9212, 0x3e61_e54c_6728_74db,
    0x3e2c_a213_d840_baf8, 0x3df6_e80f_e033_c8c6, 0x3dc2_533f_e68f_d3d2, 0x3d8d_51ff_d74c_861c,
    0x3d57_74cc_ac3d_3817, 0x3d22_c3d6_f030_f9ac, 0x3cee_0624_b381_8f79, 0x3cb8_04ea_2934_72c7,
    0x3c83_3721_ba90_5bd3, 0x3c4e_be9c_5db3_c61e, 0x3c18_987d_17c3_04e5, 0x3be3_ad30_dfcf_371d,
    0x3baf_7b81_6618_582f, 0x3b79_2f9a_b813_79bf, 0x3b44_2615_600f_9499, 0x3b10_1e77_800c_76e1,
    0x3ad9_ca58_cce0_be35, 0x3aa4_a1e0_a3e6_fe90, 0x3a70_8180_831f_320d, 0x3a3a_68cd_9e98_5016,
    0x4024_0000_0000_0000, 0x4014_0000_0000_0000, 0x3fe0_0000_0000_0000, 0x3fa9_9999_9999_999a,
    0x3f74_7ae1_47ae_147b, 0x3f40_624d_d2f1_a9fc, 0x3f0a_36e2_eb1c_432d, 0x3ed4_f8b5_88e3_68f1,
    0x3ea0_c6f7_a0b5_ed8d, 0x3e6a_d7f2_9abc_af48, 0x3e35_798e_e230_8c3a, 0x3ed5_3922_3589_fa95,
    0x3ed4_ff26_cd5a_7781, 0x3ed4_f95a_7622_83ff, 0x3ed4_f8c6_0703_520c, 0x3ed4_f8b7_2f19_cd0d,
    0x3ed4_f8b5_b31c_0c8d, 0x3ed4_f8b5_8d1c_461a, 0x3ed4_f8b5_894f_7f0e, 0x3ed4_f8b5_88ee_37f3,
    0x3ed4_f8b5_88e4_7da4, 0x3ed4_f8b5_88e3_849c, 0x3ed4_f8b5_88e3_6bb5, 0x3ed4_f8b5_88e3_6937,
    0x3ed4_f8b5_88e3_68f8, 0x3ed4_f8b5_88e3_68f1, 0x3ff0_0000_0000_0000, 0xbff0_0000_0000_0000,
    0xbfef_ffff_ffff_fffa, 0xbfef_ffff_ffff_fffb, 0x3fef_ffff_ffff_fffa, 0x3fef_ffff_ffff_fffb,
    0x3fef_ffff_ffff_fffc, 0x3fef_ffff_ffff_fffe, 0xbfef_ffff_ffff_ffff, 0xbfef_ffff_ffff_ffff,
    0x3fef_ffff_ffff_ffff, 0x3fef_ffff_ffff_ffff, 0x3fd3_3333_3333_3332, 0x3fd3_3333_3333_3333,
    0x3fd3_3333_3333_3334, 0x0010_0000_0000_0000, 0x000f_ffff_ffff_fffd, 0x000f_ffff_ffff_ffff,
    0x7fef_ffff_ffff_ffff, 0xffef_ffff_ffff_ffff, 0x4340_0000_0000_0000, 0xc340_0000_0000_0000,
    0x4430_0000_0000_0000, 0x44b5_2d02_c7e1_4af5, 0x44b5_2d02_c7e1_4af6, 0x44b5_2d02_c7e1_4af7,
    0x444b_1ae4_d6e2_ef4e, 0x444b_1ae4_d6e2_ef4f, 0x444b_1ae4_d6e2_ef50, 0x3eb0_c6f7_a0b5_ed8c,
    0x3eb0_c6f7_a0b5_ed8d, 0x41b3_de43_5555_5553, 0x41b3_de43_5555_5554, 0x41b3_de43_5555_5555,
    0x41b3_de43_5555_5556, 0x41b3_de43_5555_5557, 0xbecb_f647_612f_3696, 0x4314_3ff3_c1cb_0959,
];

/// The generator of the README: the static values, 2000 subnormal/normal boundary values,
/// then doubles read from a SHA-256 chain over a 32-byte block (4 little-endian f64 per
/// block), skipping zeros and non-finite values.
struct Es6Numbers {
    index: usize,
    block: [u8; 32],
    pending: std::vec::IntoIter<f64>,
}

impl Es6Numbers {
    fn new() -> Self {
        Es6Numbers {
            index: 0,
            block: [0; 32],
            pending: Vec::new().into_iter(),
        }
    }
}

impl Iterator for Es6Numbers {
    type Item = f64;

    fn next(&mut self) -> Option<f64> {
        const SERIAL: usize = 2000;
        let i = self.index;
        self.index += 1;
        if i < STATIC_U64S.len() {
            return Some(f64::from_bits(STATIC_U64S[i]));
        }
        if i < STATIC_U64S.len() + SERIAL {
            return Some(f64::from_bits(
                0x0010_0000_0000_0000 + (i - STATIC_U64S.len()) as u64,
            ));
        }
        loop {
            let f = match self.pending.next() {
                Some(f) => f,
                None => {
                    self.block = Sha256::digest(self.block).into();
                    self.pending = self
                        .block
                        .chunks_exact(8)
                        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
                        .collect::<Vec<_>>()
                        .into_iter();
                    continue;
                }
            };
            if f != 0.0 && f.is_finite() {
                return Some(f);
            }
        }
    }
}

fn line(x: f64, out: &mut Vec<u8>) {
    out.extend_from_slice(format!("{:x},", x.to_bits()).as_bytes());
    write_number(x, out).unwrap();
    out.push(b'\n');
}

#[test]
fn es6_test_file_first_million_lines_match_published_checksums() {
    // (lines, SHA-256 of the file truncated to that many lines, its size in bytes)
    let checkpoints: [(usize, &str, usize); 4] = [
        (
            1_000,
            "be18b62b6f69cdab33a7e0dae0d9cfa869fda80ddc712221570f9f40a5878687",
            37_967,
        ),
        (
            10_000,
            "b9f7a8e75ef22a835685a52ccba7f7d6bdc99e34b010992cbc5864cd12be6892",
            399_022,
        ),
        (
            100_000,
            "22776e6d4b49fa294a0d0f349268e5c28808fe7e0cb2bcbe28f63894e494d4c7",
            4_031_728,
        ),
        (
            1_000_000,
            "49415fee2c56c77864931bd3624faad425c3c577d6d74e89a83bc725506dad16",
            40_357_417,
        ),
    ];
    let mut hasher = Sha256::new();
    let mut size = 0usize;
    let mut buffer = Vec::with_capacity(64);
    let mut numbers = Es6Numbers::new();
    let mut done = 0usize;
    for (lines, checksum, expected_size) in checkpoints {
        for x in numbers.by_ref().take(lines - done) {
            buffer.clear();
            line(x, &mut buffer);
            size += buffer.len();
            hasher.update(&buffer);
        }
        done = lines;
        assert_eq!(size, expected_size, "size of the first {lines} lines");
        assert_eq!(
            hex::encode(hasher.clone().finalize()),
            checksum,
            "SHA-256 of the first {lines} lines"
        );
    }
}

#[test]
fn es6_test_file_starts_with_the_static_values() {
    let mut out = Vec::new();
    for x in Es6Numbers::new().take(4) {
        line(x, &mut out);
    }
    assert_eq!(
        out,
        b"0,0\n8000000000000000,0\n1,5e-324\n8000000000000001,-5e-324\n"
    );
}

#[test]
fn es6_readme_sample_lines_format_as_published() {
    let samples = [
        ("4340000000000001", "9007199254740994"),
        ("4340000000000002", "9007199254740996"),
        ("444b1ae4d6e2ef50", "1e+21"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("8000000000000000", "0"),
        ("0", "0"),
    ];
    for (hex_bits, expected) in samples {
        let x = f64::from_bits(u64::from_str_radix(hex_bits, 16).unwrap());
        let mut out = Vec::new();
        write_number(x, &mut out).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), expected, "{hex_bits}");
    }
}
