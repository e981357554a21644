// SPDX-License-Identifier: GPL-2.0

//! Cross-checks the project's SipHash-2-4 against the `siphasher` crate.

use core::hash::Hasher;
use siphasher::sip::SipHasher24;
use user_unwind_logic::logic::siphash::{siphash, siphash_1u64, SipKey};

fn reference(data: &[u8], key: &SipKey) -> u64 {
    let mut h = SipHasher24::new_with_keys(key.0[0], key.0[1]);
    h.write(data);
    h.finish()
}

#[test]
fn agrees_with_siphasher_on_all_lengths_and_many_keys() {
    let mut data = [0u8; 200];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for b in data.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
    for k in 0..16u64 {
        let key = SipKey([x.wrapping_mul(k + 1), x.rotate_left(k as u32)]);
        for len in 0..data.len() {
            assert_eq!(
                siphash(&data[..len], &key),
                reference(&data[..len], &key),
                "len {len}"
            );
        }
        let value = x ^ k;
        assert_eq!(
            siphash_1u64(value, &key),
            reference(&value.to_le_bytes(), &key)
        );
    }
}
