//! Redis 7.0 ACL users: the registry of users and their rules (`rules`, commands in
//! `command_bits`, passwords in `password`), the commands they may name (`catalog`, filled
//! from the command table), the ACL LOG (`log`) and the ACL file format (`file`).
//!
//! The dispatcher checks every request against its client's user (a user allowed
//! everything, as `default` is unless changed, costs one atomic load; others a read lock).
//! Rules change in place, so a client sees its user's new rules from its next command, as in
//! Redis.

pub mod catalog;
pub mod command_bits;
pub mod error;
pub mod file;
pub mod log;
pub mod password;
pub mod rules;

pub use error::RuleError;
pub use rules::{Denial, Request, Rules};

use parking_lot::{RwLock, RwLockReadGuard};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::Acquire, Ordering::Relaxed, Ordering::Release};
use std::sync::Arc;

/// The user every connection starts as.
pub const DEFAULT_USER: &str = "default";
/// Most users a node keeps: each is client-controlled memory (ACL SETUSER, ACL LOAD).
pub const USERS_MAX: usize = 10_000;
/// Longest username.
pub const USERNAME_MAX: usize = 256;

/// A user: its name and its current rules, shared with the clients authenticated as it.
pub struct User {
    pub name: String,
    rules: RwLock<Rules>,
    /// `rules.unrestricted()`, readable without the lock: every request of a user allowed
    /// everything (`default`, unless changed) is checked with one atomic load instead of a
    /// read lock's two atomic read-modify-writes. Written with the rules' write lock held.
    unrestricted: AtomicBool,
}

impl User {
    fn new(name: &str, rules: Rules) -> Arc<User> {
        Arc::new(User {
            name: name.to_string(),
            unrestricted: AtomicBool::new(rules.unrestricted()),
            rules: RwLock::new(rules),
        })
    }

    pub fn rules(&self) -> RwLockReadGuard<'_, Rules> {
        self.rules.read()
    }

    /// Whether the user may run every command on every key and channel. A request racing
    /// an ACL SETUSER may see the rules before or after it, as with the lock.
    pub fn unrestricted(&self) -> bool {
        self.unrestricted.load(Acquire)
    }

    /// Changes the rules in place (`edit` settles them) and keeps `unrestricted` in step.
    fn edit_rules<T>(&self, edit: impl FnOnce(&mut Rules) -> T) -> T {
        let mut rules = self.rules.write();
        let out = edit(&mut rules);
        self.unrestricted.store(rules.unrestricted(), Release);
        out
    }
}

/// An ACL SETUSER (or file line) that could not be applied: which rule and why.
#[derive(Debug)]
pub struct SetUserError {
    pub rule: String,
    pub error: RuleError,
}

/// Why ACL DELUSER refused.
#[derive(Debug, thiserror::Error)]
pub enum AclError {
    #[error("ERR The 'default' user cannot be removed")]
    DefaultUser,
    #[error("ERR Usernames can't contain spaces or null characters")]
    BadUsername,
    #[error("ERR too many users (at most {USERS_MAX})")]
    TooManyUsers,
}

/// Whether a name can be a username (Redis: no spaces or null characters).
pub fn valid_username(name: &[u8]) -> bool {
    !name.is_empty()
        && name.len() <= USERNAME_MAX
        && !name.iter().any(|&b| b.is_ascii_whitespace() || b == 0)
}

pub struct Acl {
    users: RwLock<BTreeMap<String, Arc<User>>>,
    /// The default user, also in `users`; it is never replaced (ACL LOAD changes its rules
    /// in place), so clients reach it without the map's lock.
    default: Arc<User>,
    /// The default user is off or has passwords: a new connection must AUTH.
    default_needs_auth: AtomicBool,
    pub log: log::AclLog,
}

impl Acl {
    /// The registry a node starts with: `default` as a superuser, with `requirepass` as its
    /// password if set.
    pub fn new(requirepass: Option<&str>) -> Self {
        let default = User::new(DEFAULT_USER, Rules::superuser());
        let acl = Acl {
            users: RwLock::new(BTreeMap::from([(
                DEFAULT_USER.to_string(),
                default.clone(),
            )])),
            default,
            default_needs_auth: AtomicBool::new(false),
            log: log::AclLog::default(),
        };
        acl.set_default_password(requirepass);
        acl
    }

    pub fn default_needs_auth(&self) -> bool {
        self.default_needs_auth.load(Relaxed)
    }

    fn note_default(&self, rules: &Rules) {
        self.default_needs_auth
            .store(!(rules.enabled && rules.nopass), Relaxed);
    }

    pub fn default_user(&self) -> &Arc<User> {
        &self.default
    }

    pub fn user(&self, name: &[u8]) -> Option<Arc<User>> {
        let name = std::str::from_utf8(name).ok()?;
        self.users.read().get(name).cloned()
    }

    /// `requirepass` (CONFIG SET or start): the default user's only password, or none
    /// (`nopass`) when empty, as Redis does.
    pub fn set_default_password(&self, password: Option<&str>) {
        self.default_user().edit_rules(|rules| {
            rules.passwords.clear();
            match password.filter(|p| !p.is_empty()) {
                Some(p) => {
                    rules.nopass = false;
                    rules.passwords.push(password::hash(p.as_bytes()));
                }
                None => rules.nopass = true,
            }
            rules.settle();
            self.note_default(rules);
        });
    }

    /// The user `name` if `password` logs in as it.
    pub fn authenticate(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        let user = self.user(name)?;
        let ok = user.rules().password_ok(password);
        ok.then_some(user)
    }

    /// ACL SETUSER: applies `ops` to the user (created if new), all or nothing. Returns the
    /// user and its rules before (None if it is new).
    pub fn set_user(
        &self,
        name: &[u8],
        ops: &[&[u8]],
        all_channels_default: bool,
    ) -> Result<(Arc<User>, Option<Rules>), SetUserRefused> {
        if !valid_username(name) {
            return Err(SetUserRefused::Acl(AclError::BadUsername));
        }
        let catalog = catalog::get();
        let mut users = self.users.write();
        let name = String::from_utf8_lossy(name).into_owned();
        let existing = users.get(&name).cloned();
        let before = existing.as_ref().map(|u| u.rules().clone());
        let mut rules = before
            .clone()
            .unwrap_or_else(|| Rules::new(all_channels_default));
        for op in ops {
            let text = String::from_utf8_lossy(op);
            rules
                .apply(catalog, &text, all_channels_default)
                .map_err(|error| {
                    SetUserRefused::Rule(SetUserError {
                        rule: text.into_owned(),
                        error,
                    })
                })?;
        }
        let user = match existing {
            Some(user) => {
                user.edit_rules(|r| *r = rules);
                user
            }
            None => {
                if users.len() >= USERS_MAX {
                    return Err(SetUserRefused::Acl(AclError::TooManyUsers));
                }
                let user = User::new(&name, rules);
                users.insert(name.clone(), user.clone());
                user
            }
        };
        if name == DEFAULT_USER {
            self.note_default(&user.rules());
        }
        Ok((user, before))
    }

    /// ACL DELUSER: removes the named users that exist; returns them (their clients are to
    /// be disconnected).
    pub fn delete_users(&self, names: &[&[u8]]) -> Result<Vec<Arc<User>>, AclError> {
        if names.iter().any(|n| *n == DEFAULT_USER.as_bytes()) {
            return Err(AclError::DefaultUser);
        }
        let mut users = self.users.write();
        let mut removed = Vec::new();
        for name in names {
            if let Some(user) = std::str::from_utf8(name).ok().and_then(|n| users.remove(n)) {
                removed.push(user);
            }
        }
        Ok(removed)
    }

    /// Usernames in order.
    pub fn usernames(&self) -> Vec<String> {
        self.users.read().keys().cloned().collect()
    }

    /// ACL LIST / ACL SAVE lines: `user <name> <rules>`.
    pub fn describe_all(&self) -> Vec<String> {
        let catalog = catalog::get();
        self.users
            .read()
            .values()
            .map(|u| format!("user {} {}", u.name, u.rules().describe(catalog)))
            .collect()
    }

    /// ACL LOAD: replaces every user with `loaded` (which holds `default`). The default
    /// user keeps its identity (its clients stay, with the new rules); every other user
    /// is replaced, and the old ones are returned so their clients can be disconnected.
    pub fn replace_all(&self, mut loaded: BTreeMap<String, Rules>) -> Vec<Arc<User>> {
        let mut users = self.users.write();
        let default = self.default.clone();
        let default_rules = loaded.remove(DEFAULT_USER).unwrap_or_else(Rules::superuser);
        let old: Vec<Arc<User>> = std::mem::take(&mut *users)
            .into_values()
            .filter(|u| u.name != DEFAULT_USER)
            .collect();
        default.edit_rules(|r| *r = default_rules);
        self.note_default(&default.rules());
        users.insert(DEFAULT_USER.to_string(), default);
        for (name, rules) in loaded {
            let user = User::new(&name, rules);
            users.insert(name, user);
        }
        old
    }
}

/// Why ACL SETUSER refused.
#[derive(Debug)]
pub enum SetUserRefused {
    Rule(SetUserError),
    Acl(AclError),
}

#[cfg(test)]
mod tests;
