//! Says which `ofi` providers this host can use, and what their domains granted (memory
//! registration mode, inject size, ...), or why not.
//! Run: `cargo run -p bus --example ofi_probe`.

use bus::ofi::{OfiKind, OfiProvider};

fn main() {
    for kind in [OfiKind::Tcp, OfiKind::Shm, OfiKind::Efa] {
        match OfiProvider::open(kind) {
            Ok(p) => println!("{}: available: {p:?}", kind.name()),
            Err(e) => println!("{}: {e}", kind.name()),
        }
    }
}
