use super::*;

fn limits(max_entries: u64) -> NodeLimits {
    NodeLimits {
        max_entries,
        max_bytes: 4096,
    }
}

fn filled(n: u64, max_entries: u64) -> Stream {
    let mut s = Stream::new();
    for i in 1..=n {
        s.append(StreamId::new(i, 0), &[b"f", b"v"], limits(max_entries));
    }
    s
}

fn ids(s: &Stream) -> Vec<u64> {
    s.entries().map(|(id, _)| id.ms).collect()
}

#[test]
fn ids_are_generated_as_redis_does() {
    let mut s = Stream::new();
    assert_eq!(s.next_id(None, 5), Ok(StreamId::new(5, 0)));
    s.append(StreamId::new(5, 0), &[b"a", b"1"], limits(100));
    assert_eq!(
        s.next_id(None, 5),
        Ok(StreamId::new(5, 1)),
        "same ms: next seq"
    );
    assert_eq!(
        s.next_id(None, 3),
        Ok(StreamId::new(5, 1)),
        "clock behind: next seq"
    );
    let star = |ms| {
        Some(id::ParsedId {
            id: StreamId::new(ms, 0),
            seq_given: false,
        })
    };
    assert_eq!(s.next_id(star(5), 0), Ok(StreamId::new(5, 1)));
    assert_eq!(s.next_id(star(9), 0), Ok(StreamId::new(9, 0)));
    assert_eq!(s.next_id(star(4), 0), Err(AddIdError::NotGreater));
    let exact = |ms, seq| {
        Some(id::ParsedId {
            id: StreamId::new(ms, seq),
            seq_given: true,
        })
    };
    assert_eq!(s.next_id(exact(5, 0), 0), Err(AddIdError::NotGreater));
    s.last_id = StreamId::new(7, u64::MAX);
    assert_eq!(s.next_id(star(7), 0), Err(AddIdError::NotGreater));
    s.last_id = StreamId::MAX;
    assert_eq!(s.next_id(None, 0), Err(AddIdError::Exhausted));
}

#[test]
fn ranges_forward_and_backward_skip_deleted_entries() {
    let mut s = filled(25, 4);
    assert_eq!(s.node_count(), 7);
    assert!(s.delete(StreamId::new(6, 0)));
    assert!(!s.delete(StreamId::new(6, 0)));
    assert!(!s.delete(StreamId::new(99, 0)));
    let mut fwd = Vec::new();
    s.for_each_in_range(StreamId::new(3, 0), StreamId::new(9, 0), false, |id, f| {
        assert_eq!(f.pairs().collect::<Vec<_>>(), vec![(&b"f"[..], &b"v"[..])]);
        fwd.push(id.ms);
        true
    });
    assert_eq!(fwd, [3, 4, 5, 7, 8, 9]);
    let mut back = Vec::new();
    s.for_each_in_range(StreamId::new(3, 0), StreamId::new(9, 5), true, |id, _| {
        back.push(id.ms);
        back.len() < 4
    });
    assert_eq!(back, [9, 8, 7, 5]);
    assert_eq!(s.len(), 24);
    assert_eq!(s.max_deleted_id, StreamId::new(6, 0));
}

#[test]
fn deleting_every_entry_of_a_node_removes_it() {
    let mut s = filled(6, 3);
    assert_eq!(s.node_count(), 2);
    for ms in 1..=3 {
        s.delete(StreamId::new(ms, 0));
    }
    assert_eq!(s.node_count(), 1);
    s.refresh_first_id();
    assert_eq!(s.first_id, StreamId::new(4, 0));
}

#[test]
fn fields_shared_with_the_node_master_or_not_read_back() {
    let mut s = Stream::new();
    s.append(StreamId::new(1, 0), &[b"a", b"1", b"b", b"2"], limits(100));
    s.append(StreamId::new(2, 0), &[b"a", b"3", b"b", b"4"], limits(100));
    s.append(StreamId::new(3, 0), &[b"x", b"5"], limits(100));
    let got: Vec<Vec<(Vec<u8>, Vec<u8>)>> = s
        .entries()
        .map(|(_, f)| f.pairs().map(|(a, b)| (a.to_vec(), b.to_vec())).collect())
        .collect();
    let p = |a: &str, b: &str| (a.as_bytes().to_vec(), b.as_bytes().to_vec());
    assert_eq!(
        got,
        vec![
            vec![p("a", "1"), p("b", "2")],
            vec![p("a", "3"), p("b", "4")],
            vec![p("x", "5")]
        ]
    );
}

/// The lengths Redis's own tests expect from approximate trimming with small nodes.
#[test]
fn approximate_trimming_removes_whole_nodes_only() {
    // "XADD with LIMIT consecutive calls": 100 entries in nodes of 10, MAXLEN ~ 55 LIMIT 30.
    let mut s = filled(100, 10);
    s.append(StreamId::new(101, 0), &[b"f", b"v"], limits(10));
    let t = Trim {
        strategy: TrimStrategy::MaxLen(55),
        approx: true,
        limit: 30,
    };
    assert_eq!(s.trim(t), 30);
    assert_eq!(s.len(), 71);
    s.append(StreamId::new(102, 0), &[b"f", b"v"], limits(10));
    s.trim(t);
    assert_eq!(s.len(), 62);
    // "XTRIM with ~ is limited": nodes of one, the default limit of 100 nodes.
    let mut s = filled(102, 1);
    s.trim(Trim {
        strategy: TrimStrategy::MaxLen(1),
        approx: true,
        limit: 100,
    });
    assert_eq!(s.len(), 2);
    // Without ~ there is no limit and the trim is exact.
    let mut s = filled(102, 1);
    s.trim(Trim {
        strategy: TrimStrategy::MaxLen(1),
        approx: false,
        limit: 0,
    });
    assert_eq!(s.len(), 1);
    // "XTRIM with ~ MAXLEN": 100 in nodes of 10, ~ 85 keeps 90.
    let mut s = filled(100, 10);
    s.trim(Trim {
        strategy: TrimStrategy::MaxLen(85),
        approx: true,
        limit: 1000,
    });
    assert_eq!(s.len(), 90);
    // LIMIT smaller than a node removes nothing.
    let mut s = filled(3, 2);
    let limited = |limit| Trim {
        strategy: TrimStrategy::MaxLen(0),
        approx: true,
        limit,
    };
    assert_eq!(s.trim(limited(1)), 0);
    assert_eq!(s.trim(limited(2)), 2);
}

#[test]
fn exact_trimming_by_length_and_by_minimum_id() {
    let mut s = filled(10, 4);
    let t = Trim {
        strategy: TrimStrategy::MaxLen(5),
        approx: false,
        limit: 0,
    };
    assert_eq!(s.trim(t), 5);
    assert_eq!(ids(&s), [6, 7, 8, 9, 10]);
    assert_eq!(s.first_id, StreamId::new(6, 0));
    let t = Trim {
        strategy: TrimStrategy::MinId(StreamId::new(8, 0)),
        approx: false,
        limit: 0,
    };
    assert_eq!(s.trim(t), 2);
    assert_eq!(ids(&s), [8, 9, 10]);
    let t = Trim {
        strategy: TrimStrategy::MaxLen(0),
        approx: false,
        limit: 0,
    };
    s.trim(t);
    assert!(s.is_empty());
    assert_eq!(s.first_id, StreamId::ZERO);
    assert_eq!(s.last_id, StreamId::new(10, 0), "the last ID survives");
}

#[test]
fn read_counters_and_lag_follow_redis() {
    let mut s = filled(5, 100);
    s.groups
        .insert((*b"g").into(), Group::new(StreamId::ZERO, None));
    assert_eq!(s.group_lag(&s.groups[&b"g"[..]]), Some(5));
    s.advance_group(b"g", StreamId::new(1, 0));
    assert_eq!(s.groups[&b"g"[..]].entries_read, Some(1));
    s.advance_group(b"g", StreamId::new(5, 0));
    assert_eq!(
        s.groups[&b"g"[..]].entries_read,
        Some(2),
        "counted per delivery"
    );
    // With a tombstone ahead of a group, the lag is unknown.
    let mut s = filled(5, 100);
    s.delete(StreamId::new(3, 0));
    let g = Group::new(StreamId::ZERO, None);
    assert_eq!(s.group_lag(&g), None);
    let g = Group::new(StreamId::new(5, 0), Some(5));
    assert_eq!(s.group_lag(&g), Some(0));
}

#[test]
fn a_minid_trim_that_empties_a_node_removes_it() {
    let mut s = filled(3, 100);
    s.delete(StreamId::new(3, 0));
    let t = Trim {
        strategy: TrimStrategy::MinId(StreamId::new(3, 0)),
        approx: false,
        limit: 0,
    };
    assert_eq!(s.trim(t), 2);
    assert!(s.is_empty());
    assert_eq!(s.node_count(), 0);
    assert_eq!(s.first_id, StreamId::ZERO);
}
