//! One user's rules (Redis 7.0's user and its root selector): on/off, passwords, key
//! patterns with read/write flags, channel patterns, command bits; applied one rule at a
//! time as ACL SETUSER and ACL files give them, described back as ACL LIST prints them,
//! and checked against a request.

use super::catalog::Catalog;
use super::command_bits::CommandBits;
use super::error::RuleError;
use super::password;
use crate::node_state::glob;

/// Most passwords, key patterns or channel patterns one user may hold: the rules are
/// client-controlled data, and every check walks the patterns.
pub const PATTERNS_MAX: usize = 1024;

/// A key the command reads (its data is accessed).
pub const KEY_READ: u8 = 1;
/// A key the command changes (inserts, updates or deletes).
pub const KEY_WRITE: u8 = 2;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPattern {
    pub pattern: Vec<u8>,
    /// KEY_READ | KEY_WRITE; `~p` grants both.
    pub flags: u8,
}

impl KeyPattern {
    fn describe(&self, out: &mut String) {
        match self.flags {
            KEY_READ => out.push_str("%R~"),
            KEY_WRITE => out.push_str("%W~"),
            _ => out.push('~'),
        }
        out.push_str(&String::from_utf8_lossy(&self.pattern));
    }
}

/// What a request needs, for [`Rules::check`].
pub struct Request<'a> {
    /// The catalog id of the command (the subcommand's for a container).
    pub command: u16,
    pub args: &'a [&'a [u8]],
    /// Argument index and KEY_READ/KEY_WRITE flags of each key.
    pub keys: &'a [(usize, u8)],
    /// Argument index of each channel, and whether it is a pattern (PSUBSCRIBE).
    pub channels: &'a [(usize, bool)],
}

/// Why a request was refused; the index is the offending argument's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    Command,
    Key(usize),
    Channel(usize),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    pub enabled: bool,
    pub nopass: bool,
    /// SHA-256 of each password, lower-case hex (as Redis stores and shows them).
    pub passwords: Vec<String>,
    pub sanitize_payload: bool,
    pub skip_sanitize_payload: bool,
    pub all_keys: bool,
    pub keys: Vec<KeyPattern>,
    pub all_channels: bool,
    pub channels: Vec<Vec<u8>>,
    pub commands: CommandBits,
    /// Every command, key and channel allowed: checks are skipped (kept in step by
    /// [`Rules::settle`]).
    unrestricted: bool,
}

impl Rules {
    /// A new user's rules: off, no passwords, no keys, no commands, and every channel only
    /// if `acl-pubsub-default` is `allchannels`.
    pub fn new(all_channels: bool) -> Self {
        Rules {
            enabled: false,
            nopass: false,
            passwords: Vec::new(),
            sanitize_payload: false,
            skip_sanitize_payload: false,
            all_keys: false,
            keys: Vec::new(),
            all_channels,
            channels: Vec::new(),
            commands: CommandBits::none(),
            unrestricted: false,
        }
    }

    /// The default user as a node starts it: `on nopass ~* &* +@all`.
    pub fn superuser() -> Self {
        let mut r = Rules::new(true);
        r.enabled = true;
        r.nopass = true;
        r.all_keys = true;
        r.commands.set_all(true);
        r.settle();
        r
    }

    pub fn unrestricted(&self) -> bool {
        self.unrestricted
    }

    /// Recomputes what is derived from the rules; call after applying them.
    pub fn settle(&mut self) {
        self.unrestricted = self.all_keys && self.all_channels && self.commands.all();
    }

    /// Applies one rule (any case for the keywords). `all_channels_default` is
    /// `acl-pubsub-default`, which `reset` follows.
    pub fn apply(
        &mut self,
        catalog: &Catalog,
        op: &str,
        all_channels_default: bool,
    ) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w);
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if is("sanitize-payload") {
            self.sanitize_payload = true;
            self.skip_sanitize_payload = false;
        } else if is("skip-sanitize-payload") {
            self.skip_sanitize_payload = true;
            self.sanitize_payload = false;
        } else if is("reset") {
            *self = Rules::new(all_channels_default);
            self.sanitize_payload = true;
            self.commands.set_all(false);
        } else if is("clearselectors") {
            // No selectors exist beyond the root one.
        } else if let Some(pass) = op.strip_prefix('>') {
            self.add_password(password::hash(pass.as_bytes()))?;
        } else if let Some(hash) = op.strip_prefix('#') {
            self.add_password(password::valid_hash(hash)?)?;
        } else if let Some(pass) = op.strip_prefix('<') {
            self.remove_password(&password::hash(pass.as_bytes()))?;
        } else if let Some(hash) = op.strip_prefix('!') {
            self.remove_password(&password::valid_hash(hash)?)?;
        } else if op.starts_with('(') {
            return Err(RuleError::Selectors);
        } else {
            self.apply_selector(catalog, op)?;
        }
        self.settle();
        Ok(())
    }

    fn add_password(&mut self, hash: String) -> Result<(), RuleError> {
        self.nopass = false;
        if !self.passwords.contains(&hash) {
            if self.passwords.len() >= PATTERNS_MAX {
                return Err(RuleError::TooMany);
            }
            self.passwords.push(hash);
        }
        Ok(())
    }

    fn remove_password(&mut self, hash: &str) -> Result<(), RuleError> {
        let before = self.passwords.len();
        self.passwords.retain(|p| p != hash);
        if self.passwords.len() == before {
            return Err(RuleError::NoSuchPassword);
        }
        Ok(())
    }

    /// Key, channel and command rules (Redis's selector rules).
    fn apply_selector(&mut self, catalog: &Catalog, op: &str) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w);
        if is("allkeys") || op == "~*" {
            self.all_keys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.keys.clear();
        } else if is("allchannels") || op == "&*" {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") {
            self.commands.set_all(true);
        } else if is("nocommands") {
            self.commands.set_all(false);
        } else if op.starts_with('~') || op.starts_with('%') {
            if self.all_keys {
                return Err(RuleError::AfterAllKeys);
            }
            let (flags, pattern) = key_pattern(op)?;
            match self.keys.iter_mut().find(|k| k.pattern == pattern) {
                Some(existing) => existing.flags |= flags,
                None => {
                    if self.keys.len() >= PATTERNS_MAX {
                        return Err(RuleError::TooMany);
                    }
                    self.keys.push(KeyPattern {
                        pattern: pattern.to_vec(),
                        flags,
                    });
                }
            }
        } else if let Some(channel) = op.strip_prefix('&') {
            if self.all_channels {
                return Err(RuleError::AfterAllChannels);
            }
            if channel.contains(' ') {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c == channel.as_bytes()) {
                if self.channels.len() >= PATTERNS_MAX {
                    return Err(RuleError::TooMany);
                }
                self.channels.push(channel.as_bytes().to_vec());
            }
        } else if op.len() > 1 && (op.starts_with('+') || op.starts_with('-')) {
            self.commands.apply(catalog, op)?;
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    /// Whether `password` logs in as this user (a disabled user never does).
    pub fn password_ok(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hash = password::hash(password);
        // Every stored hash is compared, each in constant time, so the time taken says
        // nothing about which one (or how much of one) matched.
        self.passwords
            .iter()
            .fold(false, |ok, p| password::same(p, &hash) | ok)
    }

    /// Whether the request is allowed: the command, then its keys, then its channels, as
    /// Redis checks them.
    pub fn check(&self, catalog: &Catalog, req: &Request<'_>) -> Result<(), Denial> {
        if self.unrestricted || catalog.entry(req.command).no_auth {
            return Ok(());
        }
        if !self.commands.allows(req.command, req.args) {
            return Err(Denial::Command);
        }
        if !self.all_keys {
            for &(i, flags) in req.keys {
                if !self.key_allowed(req.args[i], flags) {
                    return Err(Denial::Key(i));
                }
            }
        }
        if !self.all_channels {
            for &(i, pattern) in req.channels {
                if !self.channel_allowed(req.args[i], pattern) {
                    return Err(Denial::Channel(i));
                }
            }
        }
        Ok(())
    }

    /// A key is allowed by a pattern that matches it and grants every access the command
    /// needs (a key neither read nor written, as EXISTS's, needs any matching pattern).
    pub fn key_allowed(&self, key: &[u8], flags: u8) -> bool {
        self.all_keys
            || self
                .keys
                .iter()
                .any(|p| p.flags & flags == flags && glob::matches(&p.pattern, key, false))
    }

    /// A channel is allowed by a pattern matching it; a subscription pattern only by the
    /// very same pattern (a pattern cannot be proven to stay inside another).
    pub fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|c| {
                if is_pattern {
                    c == channel
                } else {
                    glob::matches(c, channel, false)
                }
            })
    }

    /// The flags as ACL GETUSER lists them.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut flags = vec![if self.enabled { "on" } else { "off" }];
        if self.nopass {
            flags.push("nopass");
        }
        if self.skip_sanitize_payload {
            flags.push("skip-sanitize-payload");
        }
        if self.sanitize_payload {
            flags.push("sanitize-payload");
        }
        flags
    }

    /// Key patterns as ACL GETUSER shows them (`~*`, or `%R~a ~b`).
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        let mut out = String::new();
        for (n, k) in self.keys.iter().enumerate() {
            if n > 0 {
                out.push(' ');
            }
            k.describe(&mut out);
        }
        out
    }

    /// Channel patterns as ACL GETUSER shows them (`&*`, or `&a &b`).
    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        self.channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Everything after `user <name> ` in ACL LIST and ACL files.
    pub fn describe(&self, catalog: &Catalog) -> String {
        let mut out = self.flags().join(" ");
        for p in &self.passwords {
            out.push_str(" #");
            out.push_str(p);
        }
        let keys = self.describe_keys();
        if !keys.is_empty() {
            out.push(' ');
            out.push_str(&keys);
        }
        if self.all_channels {
            out.push_str(" &*");
        } else {
            out.push_str(" resetchannels");
            let channels = self.describe_channels();
            if !channels.is_empty() {
                out.push(' ');
                out.push_str(&channels);
            }
        }
        out.push(' ');
        out.push_str(&self.commands.describe(catalog));
        out
    }
}

/// `~pattern`, `%R~pattern`, `%W~pattern`, `%RW~pattern`: its flags and pattern.
fn key_pattern(op: &str) -> Result<(u8, &[u8]), RuleError> {
    let bytes = op.as_bytes();
    let (flags, start) = if bytes[0] == b'~' {
        (KEY_READ | KEY_WRITE, 1)
    } else {
        let mut flags = 0u8;
        let mut i = 1;
        loop {
            match bytes.get(i).map(u8::to_ascii_uppercase) {
                Some(b'R') if flags & KEY_READ == 0 => flags |= KEY_READ,
                Some(b'W') if flags & KEY_WRITE == 0 => flags |= KEY_WRITE,
                Some(b'~') if flags != 0 => break,
                _ => return Err(RuleError::Syntax),
            }
            i += 1;
        }
        (flags, i + 1)
    };
    let pattern = &bytes[start..];
    if pattern.contains(&b' ') {
        return Err(RuleError::Syntax);
    }
    Ok((flags, pattern))
}
