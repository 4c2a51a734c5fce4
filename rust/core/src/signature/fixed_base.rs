//! Variable-time multiplication of one fixed point by many scalars, from a table.
//!
//! The table holds `d * 256^i * P` for every position `i` of a scalar's 32 bytes and every
//! digit `d` in 1..=128. A scalar is read as 32 signed base-256 digits in -128..=127 (and a
//! last carry), so `[k]P` is at most 33 additions of table entries: no doublings, against
//! the 253 of a double-and-add. The table takes about 0.7 ms to build and 650 KB to hold,
//! so it pays for itself only for a point used many times (a signer's key, the base point).
//!
//! Variable-time is fine where it is used: every input is public (keys, signatures, hashes).

use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::Identity;

const POSITIONS: usize = 32;
const DIGITS: usize = 128;

/// The multiples of one point that [`FixedBase::add_multiple`] adds up.
pub struct FixedBase {
    /// `rows[i][d - 1] = d * 256^i * P`.
    rows: Vec<[EdwardsPoint; DIGITS]>,
    /// `256^32 * P`, for the carry out of the last digit.
    top: EdwardsPoint,
}

impl FixedBase {
    pub fn new(point: &EdwardsPoint) -> Self {
        let mut rows = Vec::with_capacity(POSITIONS);
        let mut base = *point; // 256^i * P
        for _ in 0..POSITIONS {
            let mut row = [EdwardsPoint::identity(); DIGITS];
            let mut multiple = base;
            for entry in row.iter_mut() {
                *entry = multiple;
                multiple += base;
            }
            // multiple is now 129 * base; 256 * base = 2 * (128 * base).
            base = row[DIGITS - 1] + row[DIGITS - 1];
            rows.push(row);
        }
        Self { rows, top: base }
    }

    /// `acc + [scalar]P`.
    pub fn add_multiple(&self, scalar: &Scalar, acc: &mut EdwardsPoint) {
        let mut carry = 0i16;
        for (row, &byte) in self.rows.iter().zip(scalar.as_bytes()) {
            let mut digit = i16::from(byte) + carry;
            carry = 0;
            if digit >= DIGITS as i16 {
                digit -= 256;
                carry = 1;
            }
            match digit {
                0 => {}
                d if d > 0 => *acc += &row[d as usize - 1],
                d => *acc -= &row[(-d) as usize - 1],
            }
        }
        if carry == 1 {
            *acc += &self.top;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use curve25519_dalek::constants::{ED25519_BASEPOINT_POINT, EIGHT_TORSION};
    use proptest::prelude::*;

    fn multiple(table: &FixedBase, scalar: &Scalar) -> EdwardsPoint {
        let mut acc = EdwardsPoint::identity();
        table.add_multiple(scalar, &mut acc);
        acc
    }

    /// Scalars whose bytes sit on the digits' edges: 0, 1, 127, 128, 255 in every place,
    /// and the largest canonical scalar.
    fn edge_scalars() -> Vec<Scalar> {
        let mut scalars = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE];
        for byte in [0x7fu8, 0x80, 0xff, 0x81] {
            let mut bytes = [byte; 32];
            bytes[31] &= 0x0f; // below L, so the bytes are the scalar's own
            scalars.push(Scalar::from_bytes_mod_order(bytes));
            for at in [0, 15, 30, 31] {
                let mut one = [0u8; 32];
                one[at] = if at == 31 { byte & 0x0f } else { byte };
                scalars.push(Scalar::from_bytes_mod_order(one));
            }
        }
        scalars
    }

    /// The base point, a point with a torsion component, and a point of small order.
    fn points() -> Vec<EdwardsPoint> {
        let b = ED25519_BASEPOINT_POINT;
        let seven = Scalar::from(7u8);
        vec![
            b,
            b * seven + EIGHT_TORSION[3],
            EIGHT_TORSION[1],
            EdwardsPoint::identity(),
        ]
    }

    #[test]
    fn edge_scalars_multiply_as_the_group_does() {
        for point in points() {
            let table = FixedBase::new(&point);
            for scalar in edge_scalars() {
                assert_eq!(multiple(&table, &scalar), point * scalar);
            }
        }
    }

    #[test]
    fn adds_to_what_the_accumulator_holds() {
        let b = ED25519_BASEPOINT_POINT;
        let table = FixedBase::new(&b);
        let mut acc = b * Scalar::from(5u8);
        table.add_multiple(&Scalar::from(300u16), &mut acc);
        assert_eq!(acc, b * Scalar::from(305u16));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn random_scalars_multiply_as_the_group_does(
            wide in prop::array::uniform32(any::<u8>()),
            point_scalar in prop::array::uniform32(any::<u8>()),
            torsion in 0usize..8,
        ) {
            let point = ED25519_BASEPOINT_POINT * Scalar::from_bytes_mod_order(point_scalar)
                + EIGHT_TORSION[torsion];
            let table = FixedBase::new(&point);
            let scalar = Scalar::from_bytes_mod_order(wide);
            prop_assert_eq!(multiple(&table, &scalar), point * scalar);
        }
    }
}
