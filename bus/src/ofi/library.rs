//! libfabric opened at run time: the handful of exported functions (`fi_getinfo`, `fi_freeinfo`,
//! `fi_dupinfo`, `fi_fabric`, `fi_strerror`, `fi_version`). Everything else is reached through the
//! ops tables of the objects these return (see `sys.rs`). Opening at run time keeps the node
//! binary free of a link-time dependency: on a host without libfabric, `Library::open` fails with
//! `BusError::Unavailable` and the node says so.
#![allow(unsafe_code)]

use std::ffi::{c_int, CStr};
use std::sync::{Arc, Mutex};

use crate::error::BusError;

use super::sys;

/// The soname Debian's `libfabric1` installs (ABI 1.x; bookworm ships 1.17).
pub const LIBFABRIC_SONAME: &str = "libfabric.so.1";
/// Oldest library version whose struct layouts match `sys.rs`.
const MIN_VERSION: u32 = sys::FI_VERSION_1_17;

/// The opened library and its exported entry points.
pub struct Library {
    pub getinfo: sys::FiGetinfoFn,
    pub freeinfo: sys::FiFreeinfoFn,
    pub dupinfo: sys::FiDupinfoFn,
    pub fabric: sys::FiFabricFn,
    strerror: sys::FiStrerrorFn,
    /// Keeps the code behind the function pointers mapped; dropped last.
    _lib: libloading::Library,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("libfabric")
    }
}

fn unavailable(reason: String) -> BusError {
    BusError::Unavailable {
        provider: "ofi",
        reason,
    }
}

/// Libraries opened so far, by name, kept for the life of the process: libfabric is never
/// unloaded. Loading it runs constructors of its provider dependencies that take ~0.4 s here
/// (libinfinipath sleeps), and unloading it under threads its providers started would be
/// unsound. Bounded by the few names a process opens.
static OPENED: Mutex<Vec<(String, Arc<Library>)>> = Mutex::new(Vec::new());
/// Distinct library names we keep open (a process uses one; tests a few).
const OPENED_MAX: usize = 8;

impl Library {
    /// The library `name`, opened once per process.
    pub fn shared(name: &str) -> Result<Arc<Library>, BusError> {
        let mut opened = OPENED.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, lib)) = opened.iter().find(|(n, _)| n == name) {
            return Ok(lib.clone());
        }
        let lib = Arc::new(Library::open(name)?);
        if opened.len() < OPENED_MAX {
            opened.push((name.to_owned(), lib.clone()));
        }
        Ok(lib)
    }

    /// Opens `name` (a soname or path) and resolves the entry points.
    pub fn open(name: &str) -> Result<Library, BusError> {
        // SAFETY: loading a shared library runs its initialisers. libfabric's only register its
        // built-in providers; we load it once per provider object and never unload it while any
        // object from it lives (every object holds an Arc<Library>).
        let lib = unsafe { libloading::Library::new(name) }
            .map_err(|e| unavailable(format!("cannot load {name}: {e} (install libfabric1)")))?;
        // SAFETY: each symbol is looked up with the exact C prototype from the 1.17 headers
        // (declared in sys.rs), and the pointers are kept only alongside `_lib`.
        unsafe {
            let version: sys::FiVersionFn = symbol(&lib, name, b"fi_version\0")?;
            let found = version();
            if found < MIN_VERSION || found >> 16 != 1 {
                return Err(unavailable(format!(
                    "{name} is version {}.{}; this build needs 1.x with x >= 17",
                    found >> 16,
                    found & 0xffff
                )));
            }
            Ok(Library {
                getinfo: symbol(&lib, name, b"fi_getinfo\0")?,
                freeinfo: symbol(&lib, name, b"fi_freeinfo\0")?,
                dupinfo: symbol(&lib, name, b"fi_dupinfo\0")?,
                fabric: symbol(&lib, name, b"fi_fabric\0")?,
                strerror: symbol(&lib, name, b"fi_strerror\0")?,
                _lib: lib,
            })
        }
    }

    /// libfabric's text for an error number (positive or negative).
    pub fn strerror(&self, code: c_int) -> String {
        // SAFETY: fi_strerror returns a pointer to a static NUL-terminated string for any input.
        let text = unsafe { (self.strerror)(code.saturating_abs()) };
        if text.is_null() {
            return format!("libfabric error {code}");
        }
        // SAFETY: non-null and NUL-terminated per the above; copied out at once.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }
}

/// Resolves one symbol as a function pointer of type `T`.
///
/// # Safety
/// `T` must be the symbol's real function pointer type.
unsafe fn symbol<T: Copy>(
    lib: &libloading::Library,
    lib_name: &str,
    name: &[u8],
) -> Result<T, BusError> {
    // SAFETY: forwarded to the caller: T matches the symbol.
    unsafe { lib.get::<T>(name) }.map(|s| *s).map_err(|e| {
        unavailable(format!(
            "{lib_name} lacks {}: {e}",
            String::from_utf8_lossy(&name[..name.len() - 1])
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: a host without libfabric (here: a library name that does not exist) gets a clear
    /// `Unavailable` error, never a crash at start-up.
    #[test]
    fn missing_library_is_unavailable() {
        let err = Library::open("libfabric-does-not-exist.so.9").unwrap_err();
        match err {
            BusError::Unavailable { provider, reason } => {
                assert_eq!(provider, "ofi");
                assert!(reason.contains("libfabric-does-not-exist"), "{reason}");
            }
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }

    /// Goal: a library that loads but is not libfabric is refused with `Unavailable` too.
    #[test]
    fn foreign_library_is_unavailable() {
        let err = Library::open("libc.so.6").unwrap_err();
        assert!(
            matches!(err, BusError::Unavailable { .. }),
            "expected Unavailable, got {err:?}"
        );
    }
}
