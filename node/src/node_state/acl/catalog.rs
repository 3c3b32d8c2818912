//! The commands ACL rules name, as the command table describes them: one id per command and
//! per subcommand (`config|get`), each with its categories. The table is installed by the
//! command layer above (`command_framework::table::install`); rules and checks read it here
//! by id, so this layer needs no knowledge of handlers.

use std::collections::HashMap;
use std::sync::OnceLock;

/// ACL categories in the order Redis 7.0 lists them (ACL CAT); a category's bit is its index.
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The bit of a category name (any case), if it is one.
pub fn category_bit(name: &str) -> Option<u32> {
    CATEGORIES
        .iter()
        .position(|c| c.eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// A command or subcommand as ACL rules see it.
pub struct Entry {
    /// `get`, or `config|get` for a subcommand.
    pub name: &'static str,
    /// Category bits (see [`CATEGORIES`]).
    pub categories: u32,
    /// Runs before authentication (AUTH, HELLO, QUIT, RESET): never refused by ACL rules,
    /// as in Redis.
    pub no_auth: bool,
    /// The ids of its subcommands (empty for a plain command or a subcommand).
    pub subcommands: Vec<u16>,
    /// The id of its container, for a subcommand.
    pub parent: Option<u16>,
}

/// What the layer above hands over to build the catalog: a command and its subcommands.
pub struct Described {
    pub name: &'static str,
    pub categories: u32,
    pub no_auth: bool,
    pub subcommands: Vec<Described>,
}

pub struct Catalog {
    entries: Vec<Entry>,
    by_name: HashMap<&'static str, u16>,
}

static CATALOG: OnceLock<Catalog> = OnceLock::new();

/// Builds the catalog once per process (later calls change nothing: every caller passes the
/// same table). Commands are given ids in name order, so ids are stable within a process.
pub fn install(mut commands: Vec<Described>) {
    CATALOG.get_or_init(|| {
        commands.sort_by_key(|c| c.name);
        let mut catalog = Catalog {
            entries: Vec::new(),
            by_name: HashMap::new(),
        };
        for command in commands {
            let id = catalog.push(&command, None);
            let mut subs: Vec<Described> = command.subcommands;
            subs.sort_by_key(|s| s.name);
            let ids: Vec<u16> = subs.iter().map(|s| catalog.push(s, Some(id))).collect();
            catalog.entries[id as usize].subcommands = ids;
        }
        assert!(
            catalog.entries.len() < u16::MAX as usize,
            "command ids fit in u16"
        );
        catalog
    });
}

/// The installed catalog. Panics if the command table was never installed: every path that
/// checks permissions runs after start-up installed it.
pub fn get() -> &'static Catalog {
    CATALOG
        .get()
        .expect("the command table is installed before ACL rules are used")
}

/// Number of ids, 0 before the table is installed (state built without a command table,
/// as some unit tests build it, has no commands to allow).
pub fn installed_len() -> usize {
    CATALOG.get().map_or(0, Catalog::len)
}

impl Catalog {
    fn push(&mut self, d: &Described, parent: Option<u16>) -> u16 {
        let id = self.entries.len() as u16;
        self.entries.push(Entry {
            name: d.name,
            categories: d.categories,
            no_auth: d.no_auth,
            subcommands: Vec::new(),
            parent,
        });
        self.by_name.insert(d.name, id);
        id
    }

    /// Number of ids (commands and subcommands).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn entry(&self, id: u16) -> &Entry {
        &self.entries[id as usize]
    }

    /// The id of `name` (lower case, `container|sub` for subcommands).
    pub fn id(&self, name: &str) -> Option<u16> {
        self.by_name.get(name).copied()
    }

    /// The id of a name as a client spells it (any case).
    pub fn lookup(&self, name: &str) -> Option<u16> {
        self.id(&name.to_ascii_lowercase())
    }

    /// Every id in order: containers precede their subcommands.
    pub fn ids(&self) -> impl Iterator<Item = u16> {
        0..self.entries.len() as u16
    }

    /// Names of the commands and subcommands in a category, as ACL CAT lists them.
    pub fn in_category(&self, bit: u32) -> Vec<&'static str> {
        self.entries
            .iter()
            .filter(|e| e.categories & bit != 0)
            .map(|e| e.name)
            .collect()
    }
}
