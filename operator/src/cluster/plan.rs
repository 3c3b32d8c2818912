//! How `operator cluster create` lays out a cluster: which nodes are primaries, their slot
//! ranges, and which primary each replica follows. Pure, so it is tested without nodes.

/// Slots of the cluster.
pub const SLOTS: u32 = 16384;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// (node index, first slot, last slot) per primary.
    pub primaries: Vec<(usize, u16, u16)>,
    /// (replica node index, primary node index).
    pub replicas: Vec<(usize, usize)>,
}

/// `nodes` nodes, each primary with `replicas` replicas: the first nodes are the primaries
/// (as redis-cli takes them), slots split as evenly as possible (the first primaries take one
/// more when it does not divide), replicas spread round-robin over the primaries.
pub fn plan(nodes: usize, replicas: usize) -> Result<Plan, String> {
    let primaries = nodes / (replicas + 1);
    if primaries < 3 {
        return Err(format!(
            "a cluster needs at least 3 primaries: {nodes} nodes with {replicas} replicas each \
             give {primaries}"
        ));
    }
    if primaries as u32 > SLOTS {
        return Err(format!("{primaries} primaries for {SLOTS} slots"));
    }
    let (each, extra) = (SLOTS / primaries as u32, SLOTS % primaries as u32);
    let mut start = 0u32;
    let mut layout = Vec::with_capacity(primaries);
    for i in 0..primaries {
        let len = each + u32::from((i as u32) < extra);
        layout.push((i, start as u16, (start + len - 1) as u16));
        start += len;
    }
    let replica_of = (primaries..nodes)
        .map(|r| (r, (r - primaries) % primaries))
        .collect();
    Ok(Plan {
        primaries: layout,
        replicas: replica_of,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_covered_once_and_evenly() {
        for n in 3..40 {
            let p = plan(n, 0).unwrap();
            let mut next = 0u32;
            for &(_, a, b) in &p.primaries {
                assert_eq!(u32::from(a), next);
                next = u32::from(b) + 1;
            }
            assert_eq!(next, SLOTS);
            let sizes: Vec<u32> = p
                .primaries
                .iter()
                .map(|&(_, a, b)| u32::from(b) - u32::from(a) + 1)
                .collect();
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
        }
        assert_eq!(plan(3, 0).unwrap().primaries[0], (0, 0, 5461));
    }

    #[test]
    fn replicas_spread_over_the_primaries() {
        let p = plan(7, 1).unwrap();
        assert_eq!(p.primaries.len(), 3);
        assert_eq!(p.replicas, vec![(3, 0), (4, 1), (5, 2), (6, 0)]);
    }

    #[test]
    fn too_few_primaries_is_an_error() {
        assert!(plan(2, 0).is_err());
        assert!(plan(5, 1).is_err());
    }
}
