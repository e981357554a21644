// SPDX-License-Identifier: GPL-2.0

//! KUnit: the pure logic's golden vectors replayed inside the kernel, and the project's
//! SipHash checked against the kernel's own C `siphash()`.

#[kernel::macros::kunit_tests(user_unwind)]
mod tests {
    use crate::ffi;
    use crate::logic::buildid::{find_build_id, vectors};
    use crate::logic::frames::{file_cookie, COOKIE_NO_FILE};
    use crate::logic::offset::{Mapping, OffsetError};
    use crate::logic::option::parse_option;
    use crate::logic::siphash::{siphash, siphash_1u64, TEST_KEY, TEST_MESSAGE, TEST_VECTORS};

    #[test]
    fn siphash_reference_vectors() {
        for (i, want) in TEST_VECTORS.iter().enumerate() {
            assert_eq!(siphash(&TEST_MESSAGE[..i], &TEST_KEY), *want);
        }
    }

    #[test]
    fn siphash_equals_kernel_c() {
        for i in 0..TEST_MESSAGE.len() {
            // SAFETY: The message and the key are valid for the lengths passed.
            let c =
                unsafe { ffi::uu_kernel_siphash(TEST_MESSAGE.as_ptr(), i, TEST_KEY.0.as_ptr()) };
            assert_eq!(siphash(&TEST_MESSAGE[..i], &TEST_KEY), c);
        }
        for value in [0u64, 1, 0xffff_8881_007e_d428, u64::MAX] {
            // SAFETY: The key is valid for two words.
            let c = unsafe { ffi::uu_kernel_siphash_1u64(value, TEST_KEY.0.as_ptr()) };
            assert_eq!(siphash_1u64(value, &TEST_KEY), c);
        }
    }

    #[test]
    fn file_offsets() {
        let m = Mapping {
            start: 0x7f00_0000_1000,
            end: 0x7f00_0000_3000,
            pgoff: 1,
        };
        assert_eq!(m.file_offset(0x7f00_0000_1010, 12), Ok(0x1010));
        assert_eq!(
            m.file_offset(0x7f00_0000_3000, 12),
            Err(OffsetError::OutsideMapping)
        );
        let huge = Mapping {
            start: 0x1000,
            end: 0x2000,
            pgoff: u64::MAX >> 4,
        };
        assert_eq!(huge.file_offset(0x1000, 12), Err(OffsetError::Overflow));
    }

    #[test]
    fn file_cookies_skip_reserved_values() {
        assert!(file_cookie(0xffff_8881_007e_d428, &TEST_KEY) > COOKIE_NO_FILE);
    }

    #[test]
    fn option_parsing() {
        assert_eq!(parse_option(b"1\n"), Ok(true));
        assert_eq!(parse_option(b"0"), Ok(false));
        assert!(parse_option(b"bogus").is_err());
    }

    #[test]
    fn build_id_vectors() {
        let mut buf = [0u8; 160];
        let n = vectors::elf64_le(&mut buf);
        let id = find_build_id(&mut &buf[..n]).map(|id| id.as_bytes().len());
        assert_eq!(id, Some(20));
        let n = vectors::elf32_be(&mut buf);
        assert_eq!(
            find_build_id(&mut &buf[..n]).map(|id| id.as_bytes()[19]),
            Some(19)
        );
        for len in 0..n {
            assert!(find_build_id(&mut &buf[..len]).is_none());
        }
    }

    /// The callback reads these `vm_area_struct` fields through the bindings.
    #[test]
    fn vma_fields_where_c_has_them() {
        use core::mem::offset_of;
        use kernel::bindings::vm_area_struct;
        let mut c = [0usize; 4];
        // SAFETY: `c` is valid for four writes.
        unsafe { ffi::uu_vma_layout(c.as_mut_ptr()) };
        let rust = [
            offset_of!(vm_area_struct, __bindgen_anon_1.__bindgen_anon_1.vm_start),
            offset_of!(vm_area_struct, __bindgen_anon_1.__bindgen_anon_1.vm_end),
            offset_of!(vm_area_struct, vm_pgoff),
            offset_of!(vm_area_struct, vm_file),
        ];
        assert_eq!(c, rust);
    }
}
