//! What a rogue peer tries: remote regions built from guessed keys and addresses, from its
//! own advert (the one thing a peer learns legitimately) and from nothing.
//!
//! - keys 0..=256 (sequential keys start at 1) and `1<<31 | 0..=256` (ofi_rxm's own keys),
//!   at address 0 and at the own advert's address;
//! - the own key +-1..=64 at the own address (a neighbour's key, were keys counted);
//! - the own key's halves swapped between address and key;
//! - addresses 0 and the own address +- k*4 KiB (k <= 256) under the own key, past the own
//!   region (a neighbour's memory, were regions reachable through one key);
//! - 1,000 pairs of a random 64-bit address and 32-bit key.
//!
//! ([`Density::FULL`]; the default [`Density::SAMPLED`] takes fewer of each.)
//!
//! A guess that names the rogue's own region (own key, inside its range) is legitimate and
//! left out: everything else must fail.

use bus::RemoteRegion;

/// Bytes each guessed operation reads or writes.
pub const GUESS_LEN: u64 = 64;

/// How many of each kind of guess.
#[derive(Clone, Copy, Debug)]
pub struct Density {
    /// Sequential keys tried from 0 (and as rxm keys).
    pub low_keys: u64,
    /// Highest distance from the own key.
    pub key_steps: u64,
    /// Highest `k` of the own address +- k pages.
    pub page_steps: u64,
    /// Random (address, key) pairs.
    pub random: usize,
}

impl Density {
    /// Every guess listed above: about 5,300 attempts, each on a connection of its own
    /// (a refusal breaks it), so minutes; `fabric_rogue --density full`.
    pub const FULL: Density = Density {
        low_keys: 256,
        key_steps: 64,
        page_steps: 256,
        random: 1000,
    };
    /// A few of each kind (about 130 attempts): the verbs lane, where each attempt's
    /// connection is set up under CPU emulation.
    pub const LANE: Density = Density {
        low_keys: 8,
        key_steps: 4,
        page_steps: 4,
        random: 8,
    };
    /// A sample of each kind (about 750 attempts), the default: every attempt costs a new
    /// connection, tens of milliseconds on the victim.
    pub const SAMPLED: Density = Density {
        low_keys: 64,
        key_steps: 16,
        page_steps: 32,
        random: 32,
    };
}

/// ofi_rxm marks its own keys with bit 31 (FI_PROV_SPECIFIC).
const RXM_KEY_BIT: u64 = 1 << 31;
const PAGE: u64 = 4096;

/// One guessed target and where it came from (for the report).
#[derive(Clone, Copy, Debug)]
pub struct Guess {
    pub region: RemoteRegion,
    pub why: &'static str,
}

fn at(addr: u64, rkey: u64, why: &'static str) -> Guess {
    Guess {
        region: RemoteRegion {
            addr,
            len: GUESS_LEN,
            rkey: rkey & 0xffff_ffff,
        },
        why,
    }
}

/// Whether `g` names the rogue's own region (allowed: not an attack).
pub fn is_own(own: &RemoteRegion, g: &RemoteRegion) -> bool {
    g.rkey == own.rkey
        && g.addr >= own.addr
        && g.addr
            .checked_add(GUESS_LEN)
            .is_some_and(|end| end <= own.addr.saturating_add(own.len))
}

/// A small xorshift generator: the guesses need spread, not secrecy.
pub struct Xorshift(u64);

impl Xorshift {
    pub fn new(seed: u64) -> Self {
        Xorshift(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

/// Every guess for a rogue whose own advert is `own` (none when the victim gives it no
/// window: then only the guesses from nothing), plus `exact` (victim adverts a test leaked
/// on purpose: the worst case), minus the own region.
pub fn guesses(
    own: Option<&RemoteRegion>,
    d: Density,
    seed: u64,
    exact: &[RemoteRegion],
) -> Vec<Guess> {
    let mut out = Vec::new();
    for e in exact {
        out.push(Guess {
            region: RemoteRegion {
                len: GUESS_LEN.min(e.len),
                ..*e
            },
            why: "a victim's exact advert",
        });
    }
    let own_addr = own.map(|o| o.addr);
    for k in 0..=d.low_keys {
        for addr in std::iter::once(0).chain(own_addr) {
            out.push(at(addr, k, "low key"));
            out.push(at(addr, RXM_KEY_BIT | k, "rxm key"));
        }
    }
    if let Some(own) = own {
        for step in 1..=d.key_steps {
            out.push(at(own.addr, own.rkey.wrapping_add(step), "own key + d"));
            out.push(at(own.addr, own.rkey.wrapping_sub(step), "own key - d"));
        }
        out.push(at(own.rkey << 32, own.addr >> 32, "halves swapped"));
        out.push(at(own.rkey, own.addr & 0xffff_ffff, "halves swapped (low)"));
        out.push(at(0, own.rkey, "address 0"));
        for k in 1..=d.page_steps {
            out.push(at(
                own.addr.wrapping_add(k * PAGE),
                own.rkey,
                "own address + pages",
            ));
            out.push(at(
                own.addr.wrapping_sub(k * PAGE),
                own.rkey,
                "own address - pages",
            ));
        }
    }
    let mut rng = Xorshift::new(seed);
    for _ in 0..d.random {
        let addr = rng.next();
        out.push(at(addr, rng.next(), "random"));
    }
    if let Some(own) = own {
        out.retain(|g| !is_own(own, &g.region));
    }
    out
}
