//! How replication describes itself to clients: the `# Replication` section of INFO and the
//! ROLE reply, in Redis's formats, built from the cores' state (no I/O, no locks).

use super::backlog::Backlog;
use super::ids::ReplicationIds;
use proto::resp::Frame;

/// One replica as a primary lists it (INFO `slaveN:`, ROLE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaLine {
    pub ip: String,
    pub port: u16,
    /// Streaming; otherwise still waiting for or loading its full sync.
    pub online: bool,
    pub offset: u64,
    pub lag_secs: u64,
}

/// A replica's link to its primary, as ROLE names its states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Must connect (REPLICAOF just given, or the link dropped).
    Connect,
    Connecting,
    /// PSYNC exchange in progress.
    Handshake,
    /// Receiving a full sync.
    Sync,
    Connected,
}

impl LinkState {
    pub fn role_name(self) -> &'static str {
        match self {
            LinkState::Connect => "connect",
            LinkState::Connecting => "connecting",
            LinkState::Handshake => "handshake",
            LinkState::Sync => "sync",
            LinkState::Connected => "connected",
        }
    }
}

/// A replica's view of its primary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrimaryLink {
    pub host: String,
    pub port: u16,
    pub state: LinkState,
    /// Seconds since anything arrived from the primary (`None` before the first byte).
    pub last_io_secs: Option<u64>,
    /// Seconds the link has been down (INFO shows it only then).
    pub down_since_secs: Option<u64>,
    /// Last stream byte received in order (`slave_read_repl_offset`).
    pub read_offset: u64,
    /// Last stream byte executed (`slave_repl_offset`); `None` before the first sync.
    pub processed_offset: Option<u64>,
    pub priority: u32,
    pub read_only: bool,
    /// Why the link is down: the replica refused its primary's full sync (it would have
    /// dropped history the primary no longer has). Not a Redis field.
    pub sync_refused: Option<String>,
}

/// This node's role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role<'a> {
    Primary,
    Replica(&'a PrimaryLink),
}

/// The `# Replication` fields, in Redis 7's order. `master_repl_offset` is the backlog's
/// when there is one.
pub fn info_fields(
    role: &Role<'_>,
    ids: &ReplicationIds,
    backlog: Option<&Backlog>,
    master_repl_offset: u64,
    replicas: &[ReplicaLine],
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut field = |name: &str, value: String| out.push((name.to_string(), value));
    match role {
        Role::Primary => field("role", "master".into()),
        Role::Replica(link) => {
            field("role", "slave".into());
            field("master_host", link.host.clone());
            field("master_port", link.port.to_string());
            let up = link.state == LinkState::Connected;
            field("master_link_status", if up { "up" } else { "down" }.into());
            if let Some(reason) = &link.sync_refused {
                field("master_sync_refused", reason.clone());
            }
            field(
                "master_last_io_seconds_ago",
                link.last_io_secs.map_or(-1, |s| s as i64).to_string(),
            );
            let syncing = link.state == LinkState::Sync;
            field("master_sync_in_progress", u8::from(syncing).to_string());
            field("slave_read_repl_offset", link.read_offset.to_string());
            field(
                "slave_repl_offset",
                link.processed_offset.unwrap_or(0).to_string(),
            );
            if let (false, Some(down)) = (up, link.down_since_secs) {
                field("master_link_down_since_seconds", down.to_string());
            }
            field("slave_priority", link.priority.to_string());
            field("slave_read_only", u8::from(link.read_only).to_string());
            field("replica_announced", "1".into());
        }
    }
    field("connected_slaves", replicas.len().to_string());
    for (i, r) in replicas.iter().enumerate() {
        let state = if r.online { "online" } else { "wait_bgsave" };
        field(
            &format!("slave{i}"),
            format!(
                "ip={},port={},state={state},offset={},lag={}",
                r.ip, r.port, r.offset, r.lag_secs
            ),
        );
    }
    field("master_failover_state", "no-failover".into());
    field("master_replid", ids.replid().to_string());
    field("master_replid2", ids.replid2_text());
    let offset = backlog.map_or(master_repl_offset, Backlog::master_repl_offset);
    field("master_repl_offset", offset.to_string());
    field(
        "second_repl_offset",
        ids.second_replid_offset_info().to_string(),
    );
    match backlog {
        Some(b) => {
            field("repl_backlog_active", "1".into());
            field("repl_backlog_size", b.size().to_string());
            field(
                "repl_backlog_first_byte_offset",
                b.start_offset().to_string(),
            );
            field("repl_backlog_histlen", b.histlen().to_string());
        }
        None => {
            field("repl_backlog_active", "0".into());
            field(
                "repl_backlog_size",
                super::backlog::REPL_BACKLOG_SIZE_DEFAULT.to_string(),
            );
            field("repl_backlog_first_byte_offset", "0".into());
            field("repl_backlog_histlen", "0".into());
        }
    }
    out
}

/// The ROLE reply: `master <offset> [[ip port offset]...]` (port and offset as bulk strings,
/// as Redis sends them) or `slave <host> <port> <state> <offset>` (-1 before the first sync).
pub fn role_reply(role: &Role<'_>, master_repl_offset: u64, replicas: &[ReplicaLine]) -> Frame {
    match role {
        Role::Primary => Frame::Array(vec![
            Frame::bulk(b"master"),
            Frame::Integer(i64::try_from(master_repl_offset).unwrap_or(i64::MAX)),
            Frame::Array(
                replicas
                    .iter()
                    .filter(|r| r.online)
                    .map(|r| {
                        Frame::Array(vec![
                            Frame::bulk(r.ip.as_bytes()),
                            Frame::bulk(r.port.to_string().as_bytes()),
                            Frame::bulk(r.offset.to_string().as_bytes()),
                        ])
                    })
                    .collect(),
            ),
        ]),
        Role::Replica(link) => Frame::Array(vec![
            Frame::bulk(b"slave"),
            Frame::bulk(link.host.as_bytes()),
            Frame::Integer(i64::from(link.port)),
            Frame::bulk(link.state.role_name().as_bytes()),
            Frame::Integer(
                link.processed_offset
                    .map_or(-1, |o| i64::try_from(o).unwrap_or(i64::MAX)),
            ),
        ]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn text(fields: &[(String, String)]) -> String {
        fields.iter().map(|(k, v)| format!("{k}:{v}\r\n")).collect()
    }

    fn replica(online: bool) -> ReplicaLine {
        ReplicaLine {
            ip: "10.0.0.2".into(),
            port: 7001,
            online,
            offset: 90,
            lag_secs: 1,
        }
    }

    #[test]
    fn primary_info_lists_replicas_and_the_backlog() {
        let ids = ReplicationIds::new(&mut rand::rngs::StdRng::seed_from_u64(1));
        let mut b = Backlog::new(64, 0).unwrap();
        b.append(&[b'x'; 100]);
        let info = text(&info_fields(
            &Role::Primary,
            &ids,
            Some(&b),
            0,
            &[replica(true)],
        ));
        let expect = format!(
            "role:master\r\nconnected_slaves:1\r\n\
             slave0:ip=10.0.0.2,port=7001,state=online,offset=90,lag=1\r\n\
             master_failover_state:no-failover\r\nmaster_replid:{}\r\n\
             master_replid2:0000000000000000000000000000000000000000\r\n\
             master_repl_offset:100\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:1\r\n\
             repl_backlog_size:64\r\nrepl_backlog_first_byte_offset:37\r\n\
             repl_backlog_histlen:64\r\n",
            ids.replid()
        );
        assert_eq!(info, expect);
        let none = text(&info_fields(&Role::Primary, &ids, None, 5, &[]));
        assert!(none.contains("master_repl_offset:5\r\n"));
        assert!(none.contains("repl_backlog_active:0\r\n"));
    }

    #[test]
    fn replica_info_shows_the_link() {
        let ids = ReplicationIds::new(&mut rand::rngs::StdRng::seed_from_u64(2));
        let link = PrimaryLink {
            host: "10.0.0.1".into(),
            port: 7000,
            state: LinkState::Connect,
            last_io_secs: None,
            down_since_secs: Some(3),
            read_offset: 120,
            processed_offset: Some(110),
            priority: 100,
            read_only: true,
            sync_refused: None,
        };
        let info = text(&info_fields(&Role::Replica(&link), &ids, None, 110, &[]));
        assert!(info.starts_with(
            "role:slave\r\nmaster_host:10.0.0.1\r\nmaster_port:7000\r\n\
             master_link_status:down\r\nmaster_last_io_seconds_ago:-1\r\n\
             master_sync_in_progress:0\r\nslave_read_repl_offset:120\r\n\
             slave_repl_offset:110\r\nmaster_link_down_since_seconds:3\r\n"
        ));
        assert!(info.contains("slave_read_only:1\r\n"));
        let refused = PrimaryLink {
            sync_refused: Some("primary-lost-history".into()),
            ..link
        };
        let info = text(&info_fields(&Role::Replica(&refused), &ids, None, 110, &[]));
        assert!(info
            .contains("master_link_status:down\r\nmaster_sync_refused:primary-lost-history\r\n"));
    }

    #[test]
    fn role_replies() {
        assert_eq!(
            role_reply(&Role::Primary, 100, &[replica(true), replica(false)]),
            Frame::Array(vec![
                Frame::bulk(b"master"),
                Frame::Integer(100),
                Frame::Array(vec![Frame::Array(vec![
                    Frame::bulk(b"10.0.0.2"),
                    Frame::bulk(b"7001"),
                    Frame::bulk(b"90"),
                ])]),
            ])
        );
        let link = PrimaryLink {
            host: "h".into(),
            port: 1,
            state: LinkState::Sync,
            last_io_secs: Some(0),
            down_since_secs: None,
            read_offset: 0,
            processed_offset: None,
            priority: 100,
            read_only: true,
            sync_refused: None,
        };
        assert_eq!(
            role_reply(&Role::Replica(&link), 0, &[]),
            Frame::Array(vec![
                Frame::bulk(b"slave"),
                Frame::bulk(b"h"),
                Frame::Integer(1),
                Frame::bulk(b"sync"),
                Frame::Integer(-1),
            ])
        );
    }
}
