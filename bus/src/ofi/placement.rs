//! The memory under an ofi region: an anonymous mapping of our own (zeroed, page aligned),
//! placed at a random virtual address when peers address regions by it (FI_MR_VIRT_ADDR:
//! shm, efa), so the address they are told says nothing about any other region.
//!
//! Random placement: a random page in `[2^40, 2^46)` (34 bits) taken with
//! `MAP_FIXED_NOREPLACE` (a taken range is refused, never replaced), and the region starts at
//! a random 8-byte aligned offset inside its first page (9 bits): 43 bits of address. Word
//! access (`load_u64`) needs the 8-byte alignment; the mapping gets one page more for the
//! offset.
#![allow(unsafe_code)]

use std::ptr;

use rand::rngs::OsRng;
use rand::Rng;

use crate::error::BusError;

const PAGE: usize = 4096;
/// Lowest and highest (exclusive) random mapping address: far above where the heap and
/// libraries live, below the 47-bit user address limit even for a 1 GiB region.
const RANDOM_VA_MIN: u64 = 1 << 40;
const RANDOM_VA_END: u64 = 1 << 46;
/// The region's start inside its first page is a multiple of this (u64 words stay aligned).
const IN_PAGE_ALIGN: usize = 8;
/// Random addresses tried before giving up (each try fails only if that range is mapped
/// already: a few GiB out of 64 TiB in practice).
const PLACEMENT_TRIES: usize = 64;

/// An owned anonymous mapping and the region's start inside it.
pub struct Placement {
    map: *mut u8,
    map_len: usize,
    base: *mut u8,
}

impl Placement {
    /// Maps memory for `len` bytes; at a random address if `randomize`.
    pub fn new(len: usize, randomize: bool) -> Result<Placement, BusError> {
        if !randomize {
            let map_len = len.div_ceil(PAGE) * PAGE;
            let map = map_at(ptr::null_mut(), map_len, 0)?;
            return Ok(Placement {
                map,
                map_len,
                base: map,
            });
        }
        for _ in 0..PLACEMENT_TRIES {
            let page = OsRng.gen_range(RANDOM_VA_MIN / PAGE as u64..RANDOM_VA_END / PAGE as u64);
            let offset = OsRng.gen_range(0..PAGE / IN_PAGE_ALIGN) * IN_PAGE_ALIGN;
            let map_len = (offset + len).div_ceil(PAGE) * PAGE;
            let hint = (page * PAGE as u64) as *mut u8;
            match map_at(hint, map_len, libc::MAP_FIXED_NOREPLACE) {
                Ok(map) if map == hint => {
                    return Ok(Placement {
                        map,
                        map_len,
                        // SAFETY: offset < PAGE <= map_len: inside the mapping.
                        base: unsafe { map.add(offset) },
                    });
                }
                // A kernel without MAP_FIXED_NOREPLACE takes it as a hint: not where we asked.
                Ok(elsewhere) => unmap(elsewhere, map_len),
                Err(_) if last_errno() == libc::EEXIST => {}
                Err(e) => return Err(e),
            }
        }
        Err(BusError::Full {
            what: "random virtual addresses for a region",
        })
    }

    /// The region's first byte.
    pub fn base(&self) -> *mut u8 {
        self.base
    }
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn map_at(hint: *mut u8, len: usize, extra: libc::c_int) -> Result<*mut u8, BusError> {
    // SAFETY: an anonymous private mapping touches no existing memory (MAP_FIXED_NOREPLACE
    // refuses a taken range instead of replacing it); the result is checked.
    let p = unsafe {
        libc::mmap(
            hint.cast(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(BusError::Full {
            what: "memory for a region",
        });
    }
    Ok(p.cast())
}

fn unmap(map: *mut u8, len: usize) {
    // SAFETY: `map`/`len` is a whole mapping this module made and nothing uses any more.
    let rc = unsafe { libc::munmap(map.cast(), len) };
    if rc != 0 {
        tracing::warn!(len, "munmap of a region's memory failed");
    }
}

impl Drop for Placement {
    fn drop(&mut self) {
        unmap(self.map, self.map_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: random placements are where they say, zeroed, aligned, and spread out (no two of
    /// 200 share a page; their in-page offsets vary).
    #[test]
    fn random_placements_are_spread_and_zeroed() {
        let mut pages = std::collections::HashSet::new();
        let mut offsets = std::collections::HashSet::new();
        let mut keep = Vec::new();
        for _ in 0..200 {
            let p = Placement::new(10_000, true).unwrap();
            let base = p.base() as u64;
            assert!((RANDOM_VA_MIN..RANDOM_VA_END + PAGE as u64).contains(&base));
            assert_eq!(base % IN_PAGE_ALIGN as u64, 0);
            assert!(pages.insert(base / PAGE as u64));
            offsets.insert(base % PAGE as u64);
            // SAFETY: the region's 10,000 bytes are inside the mapping.
            let bytes = unsafe { std::slice::from_raw_parts(p.base(), 10_000) };
            assert!(bytes.iter().all(|b| *b == 0));
            keep.push(p);
        }
        assert!(offsets.len() > 100, "{} distinct offsets", offsets.len());
        let plain = Placement::new(100, false).unwrap();
        assert_eq!(plain.base() as usize % PAGE, 0);
    }
}
