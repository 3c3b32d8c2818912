//! Which node serves a request: the decision Redis Cluster makes before running a command
//! with keys (its `getNodeByQuery`), as a pure function of the topology, the request's keys
//! and the client's ASKING/READONLY flags. Reply texts: protocols.md §3.2.

use super::topology::{Health, Topology};
use std::fmt;

/// A node's client address as redirects print it: `ip:port`; an unknown ip prints empty
/// (`:6380`, "same host as the one you asked").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Why the cluster refuses a request outright.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DownKind {
    /// The key's slot has no owner.
    Unbound,
    /// The cluster state is fail.
    State,
    /// The state is fail, reads are allowed when down, and this is a write.
    ReadOnlyState,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    Serve,
    Moved(u16, Endpoint),
    Ask(u16, Endpoint),
    CrossSlot,
    TryAgain,
    ClusterDown(DownKind),
}

impl Route {
    /// The error reply, without the leading `-`; None for Serve.
    pub fn error_text(&self) -> Option<String> {
        Some(match self {
            Route::Serve => return None,
            Route::Moved(slot, to) => format!("MOVED {slot} {to}"),
            Route::Ask(slot, to) => format!("ASK {slot} {to}"),
            Route::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Route::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            Route::ClusterDown(DownKind::Unbound) => "CLUSTERDOWN Hash slot not served".into(),
            Route::ClusterDown(DownKind::State) => "CLUSTERDOWN The cluster is down".into(),
            Route::ClusterDown(DownKind::ReadOnlyState) => {
                "CLUSTERDOWN The cluster is down and only accepts read commands".into()
            }
        })
    }
}

/// A request as routing sees it.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The command's keys, in argument order (for EXEC: every queued command's keys).
    pub keys: &'a [&'a [u8]],
    /// The command writes (EXEC: some queued command writes).
    pub write: bool,
    /// The client sent ASKING just before, or the command implies it (RESTORE-ASKING).
    pub asking: bool,
    /// The client sent READONLY (reads from replicas allowed).
    pub readonly: bool,
    /// The command is MIGRATE: on a migrating or importing slot it runs here whatever keys
    /// are present, so that keys can move freely while the slot is open.
    pub migrate: bool,
}

/// Decides where `req` is served. `exists` tells whether a key is present (not expired) on
/// this node; it is asked only for keys of a slot being migrated or imported.
pub fn route(t: &Topology, req: &Request<'_>, exists: &mut dyn FnMut(&[u8]) -> bool) -> Route {
    let Some((first, rest)) = req.keys.split_first() else {
        // No keys: any node serves it.
        return Route::Serve;
    };
    let slot = proto::slot::key_slot(first);
    let Some(owner) = t.slots.owner(slot) else {
        return Route::ClusterDown(DownKind::Unbound);
    };
    let me = t.myself_index();
    let migrating = owner == me && t.slots.migrating.contains_key(&slot);
    let importing = !migrating && t.slots.importing.contains_key(&slot);
    let mut multiple_keys = false;
    for key in rest {
        if proto::slot::key_slot(key) != slot {
            return Route::CrossSlot;
        }
        multiple_keys |= *key != *first;
    }
    let (mut missing, mut present) = (0usize, 0usize);
    if migrating || importing {
        for key in req.keys {
            if exists(key) {
                present += 1;
            } else {
                missing += 1;
            }
        }
    }
    if t.state() != Health::Ok {
        if !t.settings.allow_reads_when_down {
            return Route::ClusterDown(DownKind::State);
        }
        if req.write {
            return Route::ClusterDown(DownKind::ReadOnlyState);
        }
    }
    if (migrating || importing) && req.migrate {
        return Route::Serve;
    }
    if migrating && missing > 0 {
        // Some keys already moved: the client must wait for the rest; all moved: ask the
        // target.
        if present > 0 {
            return Route::TryAgain;
        }
        if let Some(target) = t.slots.migrating.get(&slot).and_then(|id| t.index_of(id)) {
            return Route::Ask(slot, endpoint(t, target));
        }
    }
    if importing && req.asking {
        if multiple_keys && missing > 0 {
            return Route::TryAgain;
        }
        return Route::Serve;
    }
    let mine = t.myself();
    if req.readonly
        && !req.write
        && mine.is_replica()
        && mine
            .primary
            .is_some_and(|p| t.node(owner).is_some_and(|o| o.id == p))
    {
        return Route::Serve;
    }
    if owner != me {
        return Route::Moved(slot, endpoint(t, owner));
    }
    Route::Serve
}

fn endpoint(t: &Topology, index: u16) -> Endpoint {
    t.node(index)
        .map(|n| Endpoint {
            host: n.ip.clone(),
            port: n.port,
        })
        .unwrap_or(Endpoint {
            host: String::new(),
            port: 0,
        })
}
