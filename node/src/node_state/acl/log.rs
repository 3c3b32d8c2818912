//! ACL LOG: the latest refusals (command, key, channel) and failed AUTHs, newest first, as
//! Redis 7.0 keeps them: a refusal like a recent one (same reason, context, object and user
//! within 60 s) counts on that entry instead of adding one. At most `acllog-max-len`
//! entries.

use parking_lot::Mutex;
use std::collections::VecDeque;

/// Refusals this close in time to a like entry are counted on it (Redis's grouping).
const GROUPING_MS: u64 = 60_000;
/// Longest object (key, channel) kept in an entry: keys may be up to 512 MB, the log keeps
/// `acllog-max-len` entries.
pub const OBJECT_MAX: usize = 1024;
/// Longest username kept in an entry (a failed AUTH logs the name the client sent).
pub const USERNAME_MAX: usize = 256;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Context {
    Toplevel,
    Multi,
    /// `redis.call`/`redis.pcall` from a script.
    Lua,
}

impl Context {
    pub fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Entry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    pub object: String,
    pub username: String,
    /// Unix ms of the latest refusal counted here.
    pub at_ms: u64,
    /// CLIENT LIST's line of the client refused last.
    pub client_info: String,
}

#[derive(Default)]
pub struct AclLog {
    entries: Mutex<VecDeque<Entry>>,
}

fn clip(text: &[u8], max: usize) -> String {
    String::from_utf8_lossy(&text[..text.len().min(max)]).into_owned()
}

impl AclLog {
    /// Records a refusal (keeping at most `max_len` entries).
    #[allow(clippy::too_many_arguments)]
    pub fn add(
        &self,
        reason: Reason,
        context: Context,
        object: &[u8],
        username: &[u8],
        now_ms: u64,
        client_info: String,
        max_len: usize,
    ) {
        let object = clip(object, OBJECT_MAX);
        let username = clip(username, USERNAME_MAX);
        let mut entries = self.entries.lock();
        let like = entries.iter().position(|e| {
            e.reason == reason
                && e.context == context
                && e.object == object
                && e.username == username
                && now_ms.saturating_sub(e.at_ms) <= GROUPING_MS
        });
        let entry = match like.and_then(|i| entries.remove(i)) {
            Some(mut e) => {
                e.count += 1;
                e.at_ms = now_ms;
                e.client_info = client_info;
                e
            }
            None => Entry {
                count: 1,
                reason,
                context,
                object,
                username,
                at_ms: now_ms,
                client_info,
            },
        };
        entries.push_front(entry);
        entries.truncate(max_len);
    }

    /// The newest `count` entries (all if None).
    pub fn latest(&self, count: Option<usize>) -> Vec<Entry> {
        let entries = self.entries.lock();
        entries
            .iter()
            .take(count.unwrap_or(usize::MAX))
            .cloned()
            .collect()
    }

    pub fn reset(&self) {
        self.entries.lock().clear();
    }

    /// Drops the oldest entries beyond a lowered `acllog-max-len`.
    pub fn trim(&self, max_len: usize) {
        self.entries.lock().truncate(max_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Goal: like refusals group within a minute, others add entries, the length is bounded.
    #[test]
    fn groups_like_refusals_and_keeps_the_newest() {
        let log = AclLog::default();
        let add = |object: &str, at: u64| {
            log.add(
                Reason::Command,
                Context::Toplevel,
                object.as_bytes(),
                b"u",
                at,
                String::new(),
                3,
            )
        };
        add("get", 0);
        add("get", 1000);
        assert_eq!(log.latest(None).len(), 1);
        assert_eq!(log.latest(None)[0].count, 2);
        add("get", 1000 + GROUPING_MS + 1);
        assert_eq!(log.latest(None).len(), 2);
        add("set", 0);
        add("del", 0);
        let all = log.latest(None);
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].object, "del");
        assert_eq!(log.latest(Some(1)).len(), 1);
        log.reset();
        assert!(log.latest(None).is_empty());
    }
}
