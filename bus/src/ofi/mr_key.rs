//! How peers name an ofi region, and why they cannot guess it (DESIGN §3.7: keys unguessable).
//!
//! libfabric checks a one-sided operation against the key map of the target's *domain*, not
//! of the endpoint it arrived on, so on `ofi:*` the key (with the address) is all that keeps
//! one peer out of another's regions. Every registration therefore draws at least 64 bits
//! from the OS, independently of every other region:
//! - [`Addressing::SplitKey`] (tcp: no FI_MR_VIRT_ADDR, keys chosen by us): a random 64-bit
//!   key, offsets from 0. The Valkey-over-RDMA advert carries a 64-bit address but a 32-bit
//!   rkey, so the key's high half travels as the address and its low half as the rkey; both
//!   ends are our code, which joins them again ([`target`]). Regions are at most 1 GiB, so
//!   `addr + offset` never carries into the high half.
//! - [`Addressing::VirtAddr`] (shm, efa): peers must name the true virtual address, so the
//!   memory is placed at a random one (`placement.rs`: 43 random bits) and, where keys are
//!   ours (shm), the key is 32 random bits: 75 bits together. EFA chooses its own keys
//!   (FI_MR_PROV_KEY): their randomness is the device's and cannot be checked here.
//! - [`Addressing::ProviderOffset`]: provider keys without virtual addresses (no provider we
//!   drive does this); the key is the provider's, offsets from 0.

use rand::rngs::OsRng;
use rand::RngCore;

use crate::provider::RemoteRegion;

const LOW_HALF: u64 = 0xffff_ffff;
const HIGH_HALF: u64 = !LOW_HALF;

/// How a domain's regions are addressed by peers (from its `mr_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addressing {
    SplitKey,
    VirtAddr { provider_keys: bool },
    ProviderOffset,
}

impl Addressing {
    pub fn from_mr_mode(virt_addr: bool, prov_key: bool) -> Addressing {
        match (virt_addr, prov_key) {
            (true, provider_keys) => Addressing::VirtAddr { provider_keys },
            (false, true) => Addressing::ProviderOffset,
            (false, false) => Addressing::SplitKey,
        }
    }

    /// Whether the memory must sit at a random virtual address (peers see it).
    pub fn places_randomly(self) -> bool {
        matches!(self, Addressing::VirtAddr { .. })
    }

    /// The key to request for a new registration (0 when the provider chooses). Each call
    /// draws fresh bits from the OS.
    pub fn draw_key(self) -> u64 {
        match self {
            Addressing::SplitKey => loop {
                // A zero high half would advertise address 0 and could meet ofi_rxm's own
                // keys (`counter | FI_PROV_SPECIFIC`, bit 31, high half 0).
                let k = OsRng.next_u64();
                if k & HIGH_HALF != 0 {
                    break k;
                }
            },
            Addressing::VirtAddr {
                provider_keys: false,
            } => loop {
                let k = u64::from(OsRng.next_u32());
                if k != 0 {
                    break k;
                }
            },
            Addressing::VirtAddr {
                provider_keys: true,
            }
            | Addressing::ProviderOffset => 0,
        }
    }

    /// What peers get told about a region at `base` (its virtual address) with `key`.
    pub fn advert(self, key: u64, base: u64, len: u64) -> RemoteRegion {
        match self {
            Addressing::SplitKey => RemoteRegion {
                addr: key & HIGH_HALF,
                len,
                rkey: key & LOW_HALF,
            },
            Addressing::VirtAddr { .. } => RemoteRegion {
                addr: base,
                len,
                rkey: key,
            },
            Addressing::ProviderOffset => RemoteRegion {
                addr: 0,
                len,
                rkey: key,
            },
        }
    }

    /// The (address, key) libfabric needs for byte `offset` of a peer's advertised region.
    pub fn target(self, region: &RemoteRegion, offset: u64) -> (u64, u64) {
        let at = region.addr.wrapping_add(offset);
        match self {
            Addressing::SplitKey => (at & LOW_HALF, (at & HIGH_HALF) | (region.rkey & LOW_HALF)),
            Addressing::VirtAddr { .. } | Addressing::ProviderOffset => (at, region.rkey),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Goal: split keys are 64 random bits per region (never a repeat in 1,000, the high half
    /// never 0), and advert -> target gives libfabric back the exact key and the offset.
    #[test]
    fn split_keys_are_distinct_and_round_trip() {
        let a = Addressing::from_mr_mode(false, false);
        assert_eq!(a, Addressing::SplitKey);
        let mut seen = HashSet::new();
        for _ in 0..1000 {
            let key = a.draw_key();
            assert_ne!(key >> 32, 0, "{key:#x}");
            assert!(seen.insert(key), "repeated key {key:#x}");
            let advert = a.advert(key, 0x7f00_0000_1000, 1 << 20);
            assert!(advert.rkey <= u64::from(u32::MAX));
            assert_eq!(a.target(&advert, 0), (0, key));
            assert_eq!(a.target(&advert, 4096), (4096, key));
            assert_eq!(a.target(&advert, (1 << 30) - 8), ((1 << 30) - 8, key));
        }
        // The high halves alone differ too: the address half is not a counter.
        let highs: HashSet<u64> = seen.iter().map(|k| k >> 32).collect();
        assert!(highs.len() > 990, "{} distinct high halves", highs.len());
    }

    /// Goal: with virtual addressing the advert is the real address and a random non-zero
    /// 32-bit key; provider keys are left to the provider.
    #[test]
    fn virtual_addresses_keep_the_address_and_draw_32_bit_keys() {
        let a = Addressing::from_mr_mode(true, false);
        let keys: HashSet<u64> = (0..1000).map(|_| a.draw_key()).collect();
        assert!(keys.len() > 990);
        assert!(keys.iter().all(|k| *k != 0 && *k <= u64::from(u32::MAX)));
        let advert = a.advert(0xabcd, 0x1234_5678_9000, 64);
        assert_eq!(advert.addr, 0x1234_5678_9000);
        assert_eq!(a.target(&advert, 8), (0x1234_5678_9008, 0xabcd));
        assert_eq!(Addressing::from_mr_mode(true, true).draw_key(), 0);
        assert_eq!(Addressing::from_mr_mode(false, true).draw_key(), 0);
        assert!(a.places_randomly() && !Addressing::SplitKey.places_randomly());
    }
}
