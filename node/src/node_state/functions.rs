//! The node's function libraries (Redis 7.0 Functions): what FUNCTION LOAD registered, by
//! library and by function name, shared by every connection thread.
//!
//! Only data: each library's code and what running it registered (names, descriptions,
//! flags). Running the code is the Lua engine's (`scripting::functions`); each thread loads
//! the libraries into its own Lua state when it sees a new [`LibrarySet::generation`].
//!
//! The set is immutable once published: a change builds a new set and swaps it in, so a
//! thread reads a consistent set with one lock-free clone of an `Arc`, and a failed change
//! (a name collision half-way through a RESTORE) leaves the old set untouched.

use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Most libraries the node holds.
pub const MAX_LIBRARIES: usize = 1024;
/// Most functions, over every library.
pub const MAX_FUNCTIONS: usize = 16 * 1024;
/// Longest code of one library (shebang included).
pub const MAX_LIBRARY_CODE_BYTES: usize = 4 * 1024 * 1024;
/// Most bytes of code over every library.
pub const MAX_TOTAL_CODE_BYTES: usize = 64 * 1024 * 1024;

/// A function's flags (`redis.register_function{..., flags={...}}`), as bits.
pub mod flag {
    pub const NO_WRITES: u8 = 1;
    pub const ALLOW_OOM: u8 = 2;
    pub const ALLOW_STALE: u8 = 4;
    pub const NO_CLUSTER: u8 = 8;
    pub const ALLOW_CROSS_SLOT: u8 = 16;
    /// Names in Redis's order (FUNCTION LIST shows them so).
    pub const NAMES: [(u8, &str); 5] = [
        (NO_WRITES, "no-writes"),
        (ALLOW_OOM, "allow-oom"),
        (ALLOW_STALE, "allow-stale"),
        (NO_CLUSTER, "no-cluster"),
        (ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
    ];

    pub fn parse(name: &[u8]) -> Option<u8> {
        NAMES
            .iter()
            .find(|(_, n)| n.as_bytes() == name)
            .map(|(bit, _)| *bit)
    }
}

/// One function a library registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionInfo {
    pub name: String,
    pub description: Option<String>,
    pub flags: u8,
}

/// One library: its code as loaded and the functions running it registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Library {
    pub name: String,
    /// The whole payload of FUNCTION LOAD, shebang line included (FUNCTION LIST WITHCODE
    /// and DUMP give it back; a restart loads it again).
    pub code: Arc<[u8]>,
    pub functions: Vec<FunctionInfo>,
}

/// Why a change to the libraries was refused, in Redis's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FunctionError {
    #[error("ERR Library '{0}' already exists")]
    LibraryExists(String),
    /// RESTORE APPEND's text (no quotes, as Redis words it).
    #[error("ERR Library {0} already exists")]
    RestoredLibraryExists(String),
    #[error("ERR Function {0} already exists")]
    FunctionExists(String),
    #[error("ERR Library not found")]
    LibraryNotFound,
    #[error("ERR function libraries are limited to {MAX_LIBRARIES} libraries, {MAX_FUNCTIONS} functions and {MAX_TOTAL_CODE_BYTES} bytes of code; FUNCTION DELETE or FLUSH to make room")]
    Full,
}

/// FUNCTION RESTORE's policy for libraries already present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestorePolicy {
    Flush,
    Append,
    Replace,
}

/// The libraries at one instant.
#[derive(Debug, Default, Clone)]
pub struct LibrarySet {
    /// By library name (case-sensitive, as Redis); ordered so that LIST and DUMP are stable.
    pub libraries: BTreeMap<String, Arc<Library>>,
    /// Lower-cased function name to its library's name (FCALL is case-insensitive).
    functions: HashMap<String, String>,
    code_bytes: usize,
    /// Bumped by every change: threads reload their Lua state's libraries when it moves.
    pub generation: u64,
}

impl LibrarySet {
    /// The library and the function FCALL names (any case).
    pub fn function(&self, name: &str) -> Option<(&Arc<Library>, &FunctionInfo)> {
        let lib = self
            .libraries
            .get(self.functions.get(&name.to_ascii_lowercase())?)?;
        let info = lib
            .functions
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))?;
        Some((lib, info))
    }

    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    fn insert(&mut self, lib: Library) -> Result<(), FunctionError> {
        for f in &lib.functions {
            if self.functions.contains_key(&f.name.to_ascii_lowercase()) {
                return Err(FunctionError::FunctionExists(f.name.clone()));
            }
        }
        if self.libraries.len() >= MAX_LIBRARIES
            || self.functions.len() + lib.functions.len() > MAX_FUNCTIONS
            || self.code_bytes + lib.code.len() > MAX_TOTAL_CODE_BYTES
        {
            return Err(FunctionError::Full);
        }
        for f in &lib.functions {
            self.functions
                .insert(f.name.to_ascii_lowercase(), lib.name.clone());
        }
        self.code_bytes += lib.code.len();
        self.libraries.insert(lib.name.clone(), Arc::new(lib));
        Ok(())
    }

    fn remove(&mut self, name: &str) -> Option<Arc<Library>> {
        let lib = self.libraries.remove(name)?;
        for f in &lib.functions {
            self.functions.remove(&f.name.to_ascii_lowercase());
        }
        self.code_bytes -= lib.code.len();
        Some(lib)
    }
}

/// The node's libraries (see the module comment).
#[derive(Default)]
pub struct FunctionLibraries {
    current: RwLock<Arc<LibrarySet>>,
}

impl FunctionLibraries {
    /// The libraries now.
    pub fn get(&self) -> Arc<LibrarySet> {
        self.current.read().clone()
    }

    /// Applies `change` to a copy of the set and publishes it if it succeeded.
    fn change<T>(
        &self,
        change: impl FnOnce(&mut LibrarySet) -> Result<T, FunctionError>,
    ) -> Result<T, FunctionError> {
        let mut current = self.current.write();
        let mut next = LibrarySet::clone(&current);
        let out = change(&mut next)?;
        next.generation = current.generation + 1;
        *current = Arc::new(next);
        Ok(out)
    }

    /// FUNCTION LOAD: adds `lib`, replacing a library of the same name if `replace`.
    pub fn load(&self, lib: Library, replace: bool) -> Result<(), FunctionError> {
        self.change(|set| {
            if set.libraries.contains_key(&lib.name) {
                if !replace {
                    return Err(FunctionError::LibraryExists(lib.name));
                }
                set.remove(&lib.name);
            }
            set.insert(lib)
        })
    }

    /// FUNCTION DELETE.
    pub fn delete(&self, name: &str) -> Result<(), FunctionError> {
        self.change(|set| {
            set.remove(name)
                .map(|_| ())
                .ok_or(FunctionError::LibraryNotFound)
        })
    }

    /// FUNCTION FLUSH.
    pub fn flush(&self) {
        let _ = self.change(|set| {
            let generation = set.generation;
            *set = LibrarySet {
                generation,
                ..LibrarySet::default()
            };
            Ok(())
        });
    }

    /// FUNCTION RESTORE (and a snapshot's load, with `Flush`): all of `libs` or none.
    pub fn restore(&self, libs: Vec<Library>, policy: RestorePolicy) -> Result<(), FunctionError> {
        self.change(|set| {
            if policy == RestorePolicy::Flush {
                let generation = set.generation;
                *set = LibrarySet {
                    generation,
                    ..LibrarySet::default()
                };
            }
            for lib in &libs {
                if set.libraries.contains_key(&lib.name) {
                    if policy == RestorePolicy::Append {
                        return Err(FunctionError::RestoredLibraryExists(lib.name.clone()));
                    }
                    set.remove(&lib.name);
                }
            }
            for lib in libs {
                set.insert(lib)?;
            }
            Ok(())
        })
    }
}

/// Whether `name` may name a library or a function: letters, digits and `_`, at least one.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lib(name: &str, functions: &[&str]) -> Library {
        Library {
            name: name.into(),
            code: Arc::from(format!("#!lua name={name}\n").as_bytes()),
            functions: functions
                .iter()
                .map(|f| FunctionInfo {
                    name: f.to_string(),
                    description: None,
                    flags: 0,
                })
                .collect(),
        }
    }

    #[test]
    fn load_replace_delete_and_collisions() {
        let libs = FunctionLibraries::default();
        libs.load(lib("a", &["f1", "f2"]), false).unwrap();
        assert_eq!(
            libs.load(lib("a", &["f3"]), false),
            Err(FunctionError::LibraryExists("a".into()))
        );
        assert_eq!(
            libs.load(lib("b", &["F1"]), false),
            Err(FunctionError::FunctionExists("F1".into()))
        );
        assert!(libs.get().function("F2").is_some());
        libs.load(lib("a", &["f3"]), true).unwrap();
        assert!(libs.get().function("f1").is_none());
        assert_eq!(libs.get().function_count(), 1);
        assert_eq!(libs.delete("zz"), Err(FunctionError::LibraryNotFound));
        libs.delete("a").unwrap();
        assert!(libs.get().libraries.is_empty());
        assert_eq!(libs.get().generation, 3);
    }

    #[test]
    fn restore_is_all_or_nothing() {
        let libs = FunctionLibraries::default();
        libs.load(lib("a", &["f1"]), false).unwrap();
        libs.load(lib("b", &["f3"]), false).unwrap();
        let dumped = vec![lib("a", &["f1", "f3"])];
        assert_eq!(
            libs.restore(dumped.clone(), RestorePolicy::Append),
            Err(FunctionError::RestoredLibraryExists("a".into()))
        );
        assert_eq!(
            libs.restore(dumped.clone(), RestorePolicy::Replace),
            Err(FunctionError::FunctionExists("f3".into()))
        );
        assert_eq!(libs.get().libraries.len(), 2, "nothing changed");
        libs.restore(dumped, RestorePolicy::Flush).unwrap();
        assert_eq!(libs.get().function_count(), 2);
        assert!(valid_name(b"a_1") && !valid_name(b"") && !valid_name(b"a-b"));
    }
}
