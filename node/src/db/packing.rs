//! Every aggregate type's packing thresholds together: what a loader (snapshot, RDB, RESTORE,
//! a replica's full sync) builds values by, as Redis loads by the configured
//! `*-max-listpack-*` settings.

use super::list::ListLimits;
use super::packed::PackLimits;
use super::set::SetLimits;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packing {
    pub hash: PackLimits,
    pub set: SetLimits,
    pub zset: PackLimits,
    pub list: ListLimits,
}

impl Packing {
    /// Redis's defaults (for tests and for callers without a config).
    pub const DEFAULT: Packing = Packing {
        hash: PackLimits::HASH_DEFAULT,
        set: SetLimits::DEFAULT,
        zset: PackLimits::ZSET_DEFAULT,
        list: ListLimits::DEFAULT,
    };
}

impl Default for Packing {
    fn default() -> Self {
        Packing::DEFAULT
    }
}
