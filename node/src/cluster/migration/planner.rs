//! Plans of slot moves, without I/O: Rebalance (move slots from primaries holding more
//! than their share of the bytes to those holding less) and DrainNode (give every slot of
//! one primary to the others). A slot weighs its bytes plus one, so that empty slots still
//! spread evenly by count.

use super::ranges::SlotRanges;
use crate::cluster::consensus::command::MIGRATION_RANGES_MAX;
use crate::cluster::id::NodeId;
use std::collections::BTreeMap;

/// One primary as the planner sees it: its slots (ascending) and each one's bytes.
#[derive(Clone, Debug)]
pub struct Holding {
    pub node: NodeId,
    pub slots: Vec<(u16, u64)>,
}

/// One migration of the plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    pub source: NodeId,
    pub target: NodeId,
    pub slots: SlotRanges,
    /// What the slots weigh (bytes plus one per slot).
    pub weight: u64,
}

fn weight(bytes: u64) -> u64 {
    bytes.saturating_add(1)
}

fn total(h: &Holding) -> u64 {
    h.slots.iter().map(|&(_, b)| weight(b)).sum()
}

/// Moves that bring every primary within `threshold` (a fraction, e.g. 0.05) of the mean
/// weight: while one is out of bounds, the heaviest gives its highest slot to the lightest.
/// Nothing moves when every primary is within the threshold.
pub fn rebalance(holdings: &[Holding], threshold: f64) -> Vec<Move> {
    let threshold = if threshold.is_finite() && threshold >= 0.0 {
        threshold
    } else {
        0.0
    };
    if holdings.len() < 2 {
        return Vec::new();
    }
    let mut weights: Vec<u64> = holdings.iter().map(total).collect();
    let mut slots: Vec<Vec<(u16, u64)>> = holdings.iter().map(|h| h.slots.clone()).collect();
    let sum: u64 = weights.iter().sum();
    let mean = sum as f64 / holdings.len() as f64;
    let high = mean * (1.0 + threshold);
    let low = mean * (1.0 - threshold);
    let mut moved: BTreeMap<(usize, usize), (Vec<u16>, u64)> = BTreeMap::new();
    // Each round moves at least one slot, and a slot never moves back (donors stay above
    // the mean, receivers below it): bounded by the slot count.
    loop {
        let donor = (0..weights.len()).max_by_key(|&i| weights[i]).unwrap();
        let receiver = (0..weights.len()).min_by_key(|&i| weights[i]).unwrap();
        let (heaviest, lightest) = (weights[donor] as f64, weights[receiver] as f64);
        // Someone is out of bounds, and a slot can still go from above the mean to below.
        if (heaviest <= high && lightest >= low) || heaviest <= mean || lightest >= mean {
            break;
        }
        let Some(&(slot, bytes)) = slots[donor].last() else {
            break;
        };
        let w = weight(bytes);
        // Moving a slot heavier than the gap would only swap the roles: stop there.
        if (weights[receiver] + w) as f64 > mean + (mean - weights[receiver] as f64) {
            break;
        }
        slots[donor].pop();
        weights[donor] -= w;
        weights[receiver] += w;
        let entry = moved.entry((donor, receiver)).or_default();
        entry.0.push(slot);
        entry.1 += w;
    }
    into_moves(holdings, moved)
}

/// Moves that empty `drained`: its slots, in order, in contiguous runs to the other
/// primaries, lightest first, each filled up to an equal share of the total.
pub fn drain(holdings: &[Holding], drained: &NodeId) -> Vec<Move> {
    let Some(d) = holdings.iter().position(|h| h.node == *drained) else {
        return Vec::new();
    };
    let others: Vec<usize> = (0..holdings.len()).filter(|&i| i != d).collect();
    if others.is_empty() {
        return Vec::new();
    }
    let mut weights: Vec<u64> = holdings.iter().map(total).collect();
    let sum: u64 = weights.iter().sum();
    let share = sum.div_ceil(others.len() as u64);
    let mut order = others.clone();
    order.sort_by_key(|&i| weights[i]);
    let mut moved: BTreeMap<(usize, usize), (Vec<u16>, u64)> = BTreeMap::new();
    let mut next = 0;
    for &(slot, bytes) in &holdings[d].slots {
        let w = weight(bytes);
        while next + 1 < order.len() && weights[order[next]] + w > share {
            next += 1;
        }
        let to = order[next];
        weights[to] += w;
        let entry = moved.entry((d, to)).or_default();
        entry.0.push(slot);
        entry.1 += w;
    }
    into_moves(holdings, moved)
}

fn into_moves(holdings: &[Holding], moved: BTreeMap<(usize, usize), (Vec<u16>, u64)>) -> Vec<Move> {
    let mut out = Vec::new();
    for ((from, to), (mut slots, weight)) in moved {
        slots.sort_unstable();
        let mut ranges: Vec<(u16, u16)> = Vec::new();
        for s in slots {
            match ranges.last_mut() {
                Some(last) if last.1 + 1 == s => last.1 = s,
                _ => ranges.push((s, s)),
            }
        }
        // A migration names at most MIGRATION_RANGES_MAX ranges: more become more moves.
        for chunk in ranges.chunks(MIGRATION_RANGES_MAX) {
            let slots = SlotRanges::new(chunk).expect("sorted, in range, not empty");
            out.push(Move {
                source: holdings[from].node,
                target: holdings[to].node,
                slots,
                weight,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::id::HexId;

    fn id(n: u8) -> NodeId {
        HexId::parse(format!("{n:02x}").repeat(20).as_bytes()).unwrap()
    }

    fn holding(n: u8, slots: std::ops::RangeInclusive<u16>, bytes: u64) -> Holding {
        Holding {
            node: id(n),
            slots: slots.map(|s| (s, bytes)).collect(),
        }
    }

    fn apply(holdings: &mut [Holding], moves: &[Move]) {
        for m in moves {
            let from = holdings.iter().position(|h| h.node == m.source).unwrap();
            let taken: Vec<(u16, u64)> = holdings[from]
                .slots
                .iter()
                .copied()
                .filter(|(s, _)| m.slots.contains(*s))
                .collect();
            assert_eq!(
                taken.len(),
                m.slots.slot_count(),
                "moves only its own slots"
            );
            holdings[from].slots.retain(|(s, _)| !m.slots.contains(*s));
            let to = holdings.iter().position(|h| h.node == m.target).unwrap();
            holdings[to].slots.extend(taken);
            holdings[to].slots.sort_unstable();
        }
    }

    #[test]
    fn a_new_empty_primary_gets_a_share_by_bytes() {
        let mut h = vec![
            holding(1, 0..=5460, 100),
            holding(2, 5461..=10922, 100),
            holding(3, 10923..=16383, 100),
            Holding {
                node: id(4),
                slots: Vec::new(),
            },
        ];
        let moves = rebalance(&h, 0.05);
        assert!(moves.iter().all(|m| m.target == id(4)), "{moves:?}");
        apply(&mut h, &moves);
        let weights: Vec<u64> = h.iter().map(total).collect();
        let mean = weights.iter().sum::<u64>() as f64 / 4.0;
        for w in &weights {
            assert!(
                (*w as f64 - mean).abs() <= mean * 0.05 + 101.0,
                "{weights:?}"
            );
        }
        // Balanced already: nothing to do.
        assert!(rebalance(&h, 0.05).is_empty());
    }

    #[test]
    fn bytes_not_slot_counts_decide() {
        // Node 1 holds few slots of big keys; node 2 many slots of small ones.
        let h = vec![holding(1, 0..=99, 10_000), holding(2, 100..=16383, 1)];
        let moves = rebalance(&h, 0.1);
        assert!(!moves.is_empty());
        assert!(moves.iter().all(|m| m.source == id(1)), "{moves:?}");
    }

    #[test]
    fn a_drained_primary_gives_every_slot_away_in_runs() {
        let mut h = vec![
            holding(1, 0..=5460, 10),
            holding(2, 5461..=10922, 10),
            holding(3, 10923..=16383, 10),
        ];
        let moves = drain(&h, &id(2));
        assert!(moves.iter().all(|m| m.source == id(2) && m.target != id(2)));
        assert!(moves.len() <= 2, "contiguous runs: {moves:?}");
        apply(&mut h, &moves);
        assert!(h[1].slots.is_empty());
        let counts: Vec<usize> = h.iter().map(|h| h.slots.len()).collect();
        assert_eq!(counts.iter().sum::<usize>(), 16384);
        assert!(counts[0].abs_diff(counts[2]) <= 2, "{counts:?}");
    }
}
