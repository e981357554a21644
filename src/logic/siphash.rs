// SPDX-License-Identifier: GPL-2.0

//! SipHash-2-4, written for this project, `core` only.
//!
//! File cookies are SipHash-2-4 of a `struct file` pointer value under a 128-bit key drawn at
//! load time. It is the same function as the kernel's `siphash_1u64()` (lib/siphash.c): the
//! KUnit suite checks that both agree, and the host tests check it against the reference vectors
//! and the `siphasher` crate.

#![forbid(unsafe_code)]

/// A 128-bit SipHash key, as the kernel's `siphash_key_t` holds it: two little-endian words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SipKey(pub [u64; 2]);

struct State {
    v: [u64; 4],
}

impl State {
    fn new(key: &SipKey) -> Self {
        State {
            v: [
                key.0[0] ^ 0x736f_6d65_7073_6575,
                key.0[1] ^ 0x646f_7261_6e64_6f6d,
                key.0[0] ^ 0x6c79_6765_6e65_7261,
                key.0[1] ^ 0x7465_6462_7974_6573,
            ],
        }
    }

    fn round(&mut self) {
        let v = &mut self.v;
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13);
        v[1] ^= v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16);
        v[3] ^= v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21);
        v[3] ^= v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17);
        v[1] ^= v[2];
        v[2] = v[2].rotate_left(32);
    }

    /// Absorbs one 64-bit message word with the two compression rounds of SipHash-2-4.
    fn absorb(&mut self, m: u64) {
        self.v[3] ^= m;
        self.round();
        self.round();
        self.v[0] ^= m;
    }

    /// The four finalization rounds.
    fn finish(mut self) -> u64 {
        self.v[2] ^= 0xff;
        for _ in 0..4 {
            self.round();
        }
        self.v[0] ^ self.v[1] ^ self.v[2] ^ self.v[3]
    }
}

/// SipHash-2-4 of `data` under `key`.
pub fn siphash(data: &[u8], key: &SipKey) -> u64 {
    let mut state = State::new(key);
    let mut words = data.chunks_exact(8);
    for word in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        state.absorb(u64::from_le_bytes(bytes));
    }
    // The last word holds the tail bytes and, in its top byte, the length modulo 256.
    let mut last = [0u8; 8];
    let tail = words.remainder();
    last[..tail.len()].copy_from_slice(tail);
    last[7] = data.len() as u8;
    state.absorb(u64::from_le_bytes(last));
    state.finish()
}

/// SipHash-2-4 of one 64-bit value, equal to the kernel's `siphash_1u64(value, key)`.
pub fn siphash_1u64(value: u64, key: &SipKey) -> u64 {
    let mut state = State::new(key);
    state.absorb(value);
    state.absorb(8u64 << 56);
    state.finish()
}

/// The key of the reference vectors: bytes 0x00..=0x0f.
pub const TEST_KEY: SipKey = SipKey([0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908]);

/// SipHash-2-4 reference vectors (github.com/veorq/SipHash, also in the kernel's
/// lib/tests/siphash_kunit.c): entry `i` is the hash of the bytes `0, 1, ..., i - 1` under
/// [`TEST_KEY`].
pub const TEST_VECTORS: [u64; 64] = [
    0x726f_db47_dd0e_0e31,
    0x74f8_39c5_93dc_67fd,
    0x0d6c_8009_d9a9_4f5a,
    0x8567_6696_d7fb_7e2d,
    0xcf27_94e0_2771_87b7,
    0x1876_5564_cd99_a68d,
    0xcbc9_466e_58fe_e3ce,
    0xab02_00f5_8b01_d137,
    0x93f5_f579_9a93_2462,
    0x9e00_82df_0ba9_e4b0,
    0x7a5d_bbc5_94dd_b9f3,
    0xf4b3_2f46_226b_ada7,
    0x751e_8fbc_860e_e5fb,
    0x14ea_5627_c084_3d90,
    0xf723_ca90_8e7a_f2ee,
    0xa129_ca61_49be_45e5,
    0x3f2a_cc7f_57c2_9bdb,
    0x699a_e9f5_2cbe_4794,
    0x4bc1_b3f0_968d_d39c,
    0xbb6d_c91d_a779_61bd,
    0xbed6_5cf2_1aa2_ee98,
    0xd0f2_cbb0_2e3b_67c7,
    0x9353_6795_e3a3_3e88,
    0xa80c_038c_cd5c_cec8,
    0xb8ad_50c6_f649_af94,
    0xbce1_92de_8a85_b8ea,
    0x17d8_35b8_5bbb_15f3,
    0x2f2e_6163_076b_cfad,
    0xde4d_aaac_a71d_c9a5,
    0xa6a2_5066_8795_6571,
    0xad87_a353_5c49_ef28,
    0x32d8_92fa_d841_c342,
    0x7127_512f_72f2_7cce,
    0xa7f3_2346_f959_78e3,
    0x12e0_b01a_bb05_1238,
    0x15e0_34d4_0fa1_97ae,
    0x314d_ffbe_0815_a3b4,
    0x0279_90f0_2962_3981,
    0xcadc_d4e5_9ef4_0c4d,
    0x9abf_d876_6a33_735c,
    0x0e3e_a96b_5304_a7d0,
    0xad0c_42d6_fc58_5992,
    0x1873_06c8_9bc2_15a9,
    0xd4a6_0abc_f379_2b95,
    0xf935_451d_e4f2_1df2,
    0xa953_8f04_1975_5787,
    0xdb9a_cddf_f56c_a510,
    0xd06c_98cd_5c09_75eb,
    0xe612_a3cb_9ecb_a951,
    0xc766_e62c_fcad_af96,
    0xee64_435a_9752_fe72,
    0xa192_d576_b245_165a,
    0x0a87_87bf_8ecb_74b2,
    0x81b3_e73d_20b4_9b6f,
    0x7fa8_220b_a3b2_ecea,
    0x2457_31c1_3ca4_2499,
    0xb78d_bfaf_3a8d_83bd,
    0xea1a_d565_322a_1a0b,
    0x60e6_1c23_a379_5013,
    0x6606_d7e4_4628_2b93,
    0x6ca4_ecb1_5c5f_91e1,
    0x9f62_6da1_5c96_25f3,
    0xe51b_3860_8ef2_5f57,
    0x958a_324c_eb06_4572,
];

/// The message of reference vector `i` is `TEST_MESSAGE[..i]`: the bytes `0, 1, ..., i - 1`.
pub const TEST_MESSAGE: [u8; 64] = {
    let mut msg = [0u8; 64];
    let mut i = 0;
    while i < msg.len() {
        msg[i] = i as u8;
        i += 1;
    }
    msg
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_vectors() {
        for (i, want) in TEST_VECTORS.iter().enumerate() {
            assert_eq!(siphash(&TEST_MESSAGE[..i], &TEST_KEY), *want, "vector {i}");
        }
    }

    #[test]
    fn one_word_equals_eight_bytes() {
        for value in [0, 1, 0xffff_8881_007e_d428, u64::MAX] {
            assert_eq!(
                siphash_1u64(value, &TEST_KEY),
                siphash(&value.to_le_bytes(), &TEST_KEY)
            );
        }
    }
}
