//! Reading `CLUSTER NODES` text into rows (what `operator cluster status` prints and what
//! `create` waits on).

/// One line of CLUSTER NODES.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRow {
    pub id: String,
    /// `ip:port` (empty ip while a node does not know its own).
    pub addr: String,
    /// The fabric bus address from the `fabric-address=` aux field (where the node writes its
    /// ':' as '/' and ',' as ';'), back in its own text form; empty if not shown.
    pub fabric_addr: String,
    pub flags: Vec<String>,
    /// The primary's id for a replica, else `-`.
    pub primary: String,
    pub link: String,
    /// Slots owned, counted from the ranges (open-slot markers skipped).
    pub slots: usize,
    /// The ranges owned, first and last slot inclusive.
    pub slot_ranges: Vec<(u16, u16)>,
}

impl NodeRow {
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    pub fn owns(&self, slot: u16) -> bool {
        self.slot_ranges
            .iter()
            .any(|&(a, b)| a <= slot && slot <= b)
    }

    /// The client port of `addr` (0 when it has none).
    pub fn port(&self) -> u16 {
        self.addr
            .rsplit_once(':')
            .and_then(|(_, p)| p.parse().ok())
            .unwrap_or(0)
    }
}

/// Parses every line; a malformed line is an error naming it.
pub fn parse_nodes(text: &str) -> Result<Vec<NodeRow>, String> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(parse_line)
        .collect()
}

fn parse_line(line: &str) -> Result<NodeRow, String> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    if fields.len() < 8 {
        return Err(format!(
            "CLUSTER NODES line with {} fields: {line}",
            fields.len()
        ));
    }
    let (endpoint, aux) = fields[1].split_once(',').unwrap_or((fields[1], ""));
    let addr = endpoint.split_once('@').map_or(endpoint, |(a, _)| a);
    let fabric_addr = aux
        .split(',')
        .find_map(|kv| kv.strip_prefix("fabric-address="))
        .unwrap_or("")
        .replace('/', ":")
        .replace(';', ",");
    let mut slots = 0usize;
    let mut slot_ranges = Vec::new();
    for r in &fields[8..] {
        if r.starts_with('[') {
            continue;
        }
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        let (a, b): (u16, u16) = match (a.parse(), b.parse()) {
            (Ok(a), Ok(b)) if a <= b => (a, b),
            _ => return Err(format!("bad slot range {r:?} in: {line}")),
        };
        slots += usize::from(b - a) + 1;
        slot_ranges.push((a, b));
    }
    Ok(NodeRow {
        id: fields[0].to_string(),
        addr: addr.to_string(),
        fabric_addr,
        flags: fields[2].split(',').map(str::to_string).collect(),
        primary: fields[3].to_string(),
        link: fields[7].to_string(),
        slots,
        slot_ranges,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_with_and_without_aux_fields() {
        let text = "\
aaaa 127.0.0.1:7000@17000,,fabric-address=ofi/tcp/0200 myself,master - 0 0 1 connected 0-5460 [5461->-bbbb]
bbbb 127.0.0.1:7001@17001 slave aaaa 0 1700 1 connected
cccc :7002@17002,host.example,fabric-address=verbs/gid=fe80//1;qpn=7 master,fail - 1 2 3 disconnected 7 9-10
";
        let rows = parse_nodes(text).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].addr, "127.0.0.1:7000");
        assert_eq!(rows[0].fabric_addr, "ofi:tcp:0200");
        assert_eq!(rows[0].slots, 5461);
        assert!(rows[0].owns(5460) && !rows[0].owns(5461));
        assert_eq!(rows[0].port(), 7000);
        assert_eq!(rows[2].slot_ranges, [(7, 7), (9, 10)]);
        assert!(rows[0].has_flag("myself") && rows[0].has_flag("master"));
        assert_eq!((rows[1].primary.as_str(), rows[1].slots), ("aaaa", 0));
        assert_eq!(rows[1].fabric_addr, "");
        assert_eq!((rows[2].slots, rows[2].link.as_str()), (3, "disconnected"));
        assert_eq!(rows[2].fabric_addr, "verbs:gid=fe80::1,qpn=7");
        assert!(rows[2].has_flag("fail"));
    }

    #[test]
    fn malformed_lines_are_errors() {
        assert!(parse_nodes("too few fields\n").is_err());
        assert!(parse_nodes("a b c d e f g h 9-1\n").is_err());
        assert!(parse_nodes("a b c d e f g h x\n").is_err());
    }
}
