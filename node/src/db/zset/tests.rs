//! Goal: the sorted set behaves exactly like a plain sorted vector of (score, member) pairs,
//! in either form and across the conversion between them.
//! Method: fixed cases for the edges of the indexed form, then random operation sequences
//! (proptest) applied to the indexed form, and to the whole value under small packing
//! thresholds, and to the model, comparing every observable after each step and checking the
//! tree's invariants.

use super::indexed::Indexed;
use super::*;
use proptest::prelude::*;

fn members(z: &Indexed) -> Vec<(Vec<u8>, f64)> {
    z.iter().map(|(m, s)| (m.to_vec(), s)).collect()
}

#[test]
fn orders_by_score_then_member() {
    let mut z = Indexed::new();
    assert_eq!(z.insert(b"b", 1.0), Ok(None));
    assert_eq!(z.insert(b"a", 1.0), Ok(None));
    assert_eq!(z.insert(b"c", 0.5), Ok(None));
    assert_eq!(z.insert(b"z", f64::NEG_INFINITY), Ok(None));
    assert_eq!(z.insert(b"y", f64::INFINITY), Ok(None));
    let order: Vec<Vec<u8>> = members(&z).into_iter().map(|(m, _)| m).collect();
    assert_eq!(
        order,
        vec![
            b"z".to_vec(),
            b"c".to_vec(),
            b"a".to_vec(),
            b"b".to_vec(),
            b"y".to_vec()
        ]
    );
    assert_eq!(z.rank(b"a"), Some(2));
    assert_eq!(z.get_by_rank(4), Some((&b"y"[..], f64::INFINITY)));
    assert_eq!(z.get_by_rank(5), None);
    z.check_invariants();
}

#[test]
fn update_moves_and_equal_score_keeps() {
    let mut z = Indexed::new();
    for (i, m) in [b"a", b"b", b"c", b"d"].iter().enumerate() {
        z.insert(*m, i as f64).unwrap();
    }
    assert_eq!(z.insert(b"a", 10.0), Ok(Some(0.0)));
    assert_eq!(z.rank(b"a"), Some(3));
    assert_eq!(z.insert(b"b", 1.5), Ok(Some(1.0)));
    assert_eq!(z.rank(b"b"), Some(0));
    // -0 equals 0: the stored score stays as it was.
    z.insert(b"zero", 0.0).unwrap();
    assert_eq!(z.insert(b"zero", -0.0), Ok(Some(0.0)));
    assert!(z.score(b"zero").unwrap().is_sign_positive());
    z.insert(b"negzero", -0.0).unwrap();
    assert!(z.score(b"negzero").unwrap().is_sign_positive());
    assert_eq!(z.insert(b"n", f64::NAN), Err(ZSetError::NotANumber));
    assert!(!z.contains(b"n"));
    z.check_invariants();
}

#[test]
fn pops_and_removals_relink_moved_entries() {
    let mut z = Indexed::new();
    for i in 0..100u32 {
        z.insert(format!("m{i:03}").as_bytes(), f64::from(i % 7))
            .unwrap();
    }
    let (m, s) = z.pop_first().unwrap();
    assert_eq!((&*m, s), (&b"m000"[..], 0.0));
    let (m, s) = z.pop_last().unwrap();
    assert_eq!((&*m, s), (&b"m097"[..], 6.0));
    assert_eq!(z.remove(b"m050"), Some(1.0));
    assert_eq!(z.remove(b"m050"), None);
    z.check_invariants();
    assert_eq!(z.remove_range(10, 20), 20);
    assert_eq!(z.len(), 77);
    z.check_invariants();
    while z.pop_first().is_some() {}
    assert!(z.is_empty());
    z.check_invariants();
}

#[test]
fn range_walks_both_ways() {
    let mut z = Indexed::new();
    for i in 0..10 {
        z.insert(&[b'a' + i], f64::from(i)).unwrap();
    }
    let up: Vec<f64> = z.range(3, 4, false).map(|(_, s)| s).collect();
    assert_eq!(up, vec![3.0, 4.0, 5.0, 6.0]);
    let down: Vec<f64> = z.range(3, 10, true).map(|(_, s)| s).collect();
    assert_eq!(down, vec![3.0, 2.0, 1.0, 0.0]);
    assert_eq!(z.range(10, 5, false).count(), 0);
    assert_eq!(z.partition_point(|s, _| s < 4.5), 5);
    assert_eq!(z.partition_point(|_, _| true), 10);
    assert_eq!(z.partition_point(|_, _| false), 0);
}

#[test]
fn scan_returns_survivors_despite_churn() {
    let mut z = Indexed::new();
    for i in 0..500 {
        z.insert(format!("k{i}").as_bytes(), f64::from(i)).unwrap();
    }
    let survivors: Vec<Vec<u8>> = (0..500)
        .filter(|i| i % 3 != 0)
        .map(|i| format!("k{i}").into_bytes())
        .collect();
    let mut seen = std::collections::HashSet::new();
    let mut cursor = 0;
    let mut round = 0;
    loop {
        cursor = z.scan(cursor, 17, |m, _| {
            seen.insert(m.to_vec());
        });
        // Churn between calls: remove some members that do not survive, add new ones.
        for i in (round * 30..round * 30 + 30).filter(|i| i % 3 == 0) {
            z.remove(format!("k{i}").as_bytes());
        }
        z.insert(format!("new{round}").as_bytes(), -1.0).unwrap();
        round += 1;
        if cursor == 0 {
            break;
        }
        assert!(round < 1000, "scan must terminate");
    }
    for m in &survivors {
        assert!(seen.contains(m), "missed {}", String::from_utf8_lossy(m));
    }
}

/// One step of a random workload.
#[derive(Debug, Clone)]
enum Op {
    Insert(u8, f64),
    Remove(u8),
    PopFirst,
    PopLast,
    RemoveRange(usize, usize),
}

fn score() -> impl Strategy<Value = f64> {
    prop_oneof![
        (-5i32..5).prop_map(f64::from),
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(-0.0),
        any::<f64>().prop_filter("no NaN", |v| !v.is_nan()),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..48, score()).prop_map(|(m, s)| Op::Insert(m, s)),
        3 => (0u8..48).prop_map(Op::Remove),
        1 => Just(Op::PopFirst),
        1 => Just(Op::PopLast),
        1 => (0usize..40, 0usize..6).prop_map(|(a, b)| Op::RemoveRange(a, b)),
    ]
}

/// The model: a vector kept sorted by (score, member).
fn model_sort(v: &mut [(Vec<u8>, f64)]) {
    v.sort_by(|a, b| {
        a.1.partial_cmp(&b.1)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.0.cmp(&b.0))
    });
}

fn member_name(m: u8) -> Vec<u8> {
    // Varied lengths and a shared prefix exercise byte-wise member ordering.
    let mut name = b"m".to_vec();
    name.extend(std::iter::repeat_n(b'x', (m % 5) as usize));
    name.push(m);
    name
}

/// The writes both model tests drive: the indexed form alone, or the whole value under
/// its packing limits.
trait Writes {
    fn put(&mut self, member: &[u8], score: f64) -> Option<f64>;
    fn take(&mut self, member: &[u8]) -> Option<f64>;
    fn take_first(&mut self) -> Option<(Box<[u8]>, f64)>;
    fn take_last(&mut self) -> Option<(Box<[u8]>, f64)>;
    fn take_range(&mut self, start: usize, count: usize) -> usize;
}

impl Writes for Indexed {
    fn put(&mut self, member: &[u8], score: f64) -> Option<f64> {
        self.insert(member, score).unwrap()
    }
    fn take(&mut self, member: &[u8]) -> Option<f64> {
        self.remove(member)
    }
    fn take_first(&mut self) -> Option<(Box<[u8]>, f64)> {
        self.pop_first()
    }
    fn take_last(&mut self) -> Option<(Box<[u8]>, f64)> {
        self.pop_last()
    }
    fn take_range(&mut self, start: usize, count: usize) -> usize {
        self.remove_range(start, count)
    }
}

impl Writes for (ZSet, PackLimits) {
    fn put(&mut self, member: &[u8], score: f64) -> Option<f64> {
        self.0.insert(member, score, self.1).unwrap()
    }
    fn take(&mut self, member: &[u8]) -> Option<f64> {
        self.0.remove(member)
    }
    fn take_first(&mut self) -> Option<(Box<[u8]>, f64)> {
        self.0.pop_first()
    }
    fn take_last(&mut self) -> Option<(Box<[u8]>, f64)> {
        self.0.pop_last()
    }
    fn take_range(&mut self, start: usize, count: usize) -> usize {
        self.0.remove_range(start, count)
    }
}

/// Applies `op` to `z` and to the model, checking that both answer alike; returns the name
/// of a member the op added.
fn apply(
    z: &mut impl Writes,
    model: &mut Vec<(Vec<u8>, f64)>,
    op: Op,
) -> Result<Option<Vec<u8>>, TestCaseError> {
    match op {
        Op::Insert(m, s) => {
            let name = member_name(m);
            let stored = if s == 0.0 { 0.0 } else { s };
            let old = model.iter().position(|e| e.0 == name);
            prop_assert_eq!(z.put(&name, s), old.map(|i| model[i].1));
            match old {
                Some(i) if model[i].1 != s => model[i].1 = stored,
                Some(_) => {}
                None => model.push((name.clone(), stored)),
            }
            model_sort(model);
            return Ok(old.is_none().then_some(name));
        }
        Op::Remove(m) => {
            let name = member_name(m);
            let old = model
                .iter()
                .position(|e| e.0 == name)
                .map(|i| model.remove(i).1);
            prop_assert_eq!(z.take(&name), old);
        }
        Op::PopFirst => {
            let expect = if model.is_empty() {
                None
            } else {
                Some(model.remove(0))
            };
            prop_assert_eq!(z.take_first().map(|(m, s)| (m.to_vec(), s)), expect);
        }
        Op::PopLast => {
            prop_assert_eq!(z.take_last().map(|(m, s)| (m.to_vec(), s)), model.pop());
        }
        Op::RemoveRange(start, count) => {
            let end = (start + count).min(model.len()).max(start.min(model.len()));
            let expect = end - start.min(model.len());
            model.drain(start.min(model.len())..end);
            prop_assert_eq!(z.take_range(start, count), expect);
        }
    }
    Ok(None)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn matches_sorted_vector_model(ops in proptest::collection::vec(op(), 1..200)) {
        let mut z = Indexed::new();
        let mut model: Vec<(Vec<u8>, f64)> = Vec::new();
        for op in ops {
            apply(&mut z, &mut model, op)?;
            z.check_invariants();
            prop_assert_eq!(z.len(), model.len());
            prop_assert_eq!(&members(&z), &model);
            for (rank, (m, s)) in model.iter().enumerate() {
                prop_assert_eq!(z.rank(m), Some(rank));
                prop_assert_eq!(z.score(m), Some(*s));
                prop_assert_eq!(z.get_by_rank(rank), Some((&m[..], *s)));
            }
            let reversed: Vec<(Vec<u8>, f64)> = z
                .range(model.len().saturating_sub(1), model.len(), true)
                .map(|(m, s)| (m.to_vec(), s))
                .collect();
            let mut expect_rev = model.clone();
            expect_rev.reverse();
            prop_assert_eq!(reversed, expect_rev);
            let below_zero = model.iter().filter(|e| e.1 < 0.0).count();
            prop_assert_eq!(z.partition_point(|s, _| s < 0.0), below_zero);
        }
    }
}

fn zset_members(z: &ZSet) -> Vec<(Vec<u8>, f64)> {
    z.iter().map(|(m, s)| (m.to_vec(), s)).collect()
}

/// Every ranged read of the whole value against the model.
fn check_reads(z: &ZSet, model: &[(Vec<u8>, f64)]) -> Result<(), TestCaseError> {
    prop_assert_eq!(z.len(), model.len());
    prop_assert_eq!(&zset_members(z), model);
    for (rank, (m, s)) in model.iter().enumerate() {
        prop_assert_eq!(z.rank(m), Some(rank));
        prop_assert_eq!(z.score(m), Some(*s));
        prop_assert!(z.contains(m));
        prop_assert_eq!(z.get_by_rank(rank), Some((&m[..], *s)));
    }
    prop_assert_eq!(z.get_by_rank(model.len()), None);
    // Every window both ways, including ones that run off either end.
    for start in 0..=model.len() + 1 {
        for count in 0..=model.len() + 1 {
            let up: Vec<_> = z
                .range(start, count, false)
                .map(|(m, s)| (m.to_vec(), s))
                .collect();
            let expect_up: Vec<_> = model.iter().skip(start).take(count).cloned().collect();
            prop_assert_eq!(up, expect_up);
            let down: Vec<_> = z
                .range(start, count, true)
                .map(|(m, s)| (m.to_vec(), s))
                .collect();
            let expect_down: Vec<_> = if start < model.len() {
                model[..=start].iter().rev().take(count).cloned().collect()
            } else {
                Vec::new()
            };
            prop_assert_eq!(down, expect_down);
        }
    }
    let below_zero = model.iter().filter(|e| e.1 < 0.0).count();
    prop_assert_eq!(z.partition_point(|s, _| s < 0.0), below_zero);
    let mut unordered: Vec<_> = z.iter_unordered().map(|(m, s)| (m.to_vec(), s)).collect();
    model_sort(&mut unordered);
    prop_assert_eq!(&unordered, model);
    let mut by_index: Vec<_> = (0..model.len())
        .map(|i| z.get_index(i).map(|(m, s)| (m.to_vec(), s)).unwrap())
        .collect();
    model_sort(&mut by_index);
    prop_assert_eq!(&by_index, model);
    // A whole scan sees every member (a packed set answers in one step).
    let mut scanned = Vec::new();
    let mut cursor = 0;
    loop {
        cursor = z.scan(cursor, 3, |m, s| scanned.push((m.to_vec(), s)));
        if cursor == 0 {
            break;
        }
    }
    model_sort(&mut scanned);
    scanned.dedup();
    prop_assert_eq!(&scanned, model);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// The value packs while a write keeps it within `limits`, turns indexed for good at the
    /// first new member that breaks them, and reads the same in both forms.
    #[test]
    fn both_forms_match_the_model(
        ops in proptest::collection::vec(op(), 1..120),
        entries in 0usize..10,
        value in 1usize..7,
    ) {
        let limits = PackLimits { entries, value };
        let mut z = (ZSet::new(), limits);
        let mut model: Vec<(Vec<u8>, f64)> = Vec::new();
        let mut packed = true;
        for op in ops {
            if let Some(name) = apply(&mut z, &mut model, op)? {
                // A new member past the thresholds turns the set indexed for good.
                if model.len() > entries || name.len() > value {
                    packed = false;
                }
            }
            prop_assert_eq!(z.0.is_packed(), packed);
            check_reads(&z.0, &model)?;
        }
    }
}

#[test]
fn a_nan_score_is_refused_in_either_form_and_minus_zero_is_stored_as_zero() {
    let small = PackLimits::ZSET_DEFAULT;
    let mut z = ZSet::new();
    assert_eq!(z.insert(b"n", f64::NAN, small), Err(ZSetError::NotANumber));
    z.insert(b"z", -0.0, small).unwrap();
    assert!(z.score(b"z").unwrap().is_sign_positive());
    assert!(z.is_packed());
    let tight = PackLimits {
        entries: 1,
        value: 64,
    };
    z.insert(b"second", 1.0, tight).unwrap();
    assert!(!z.is_packed());
    assert_eq!(z.insert(b"n", f64::NAN, tight), Err(ZSetError::NotANumber));
    assert_eq!(z.len(), 2);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// A set built at once from distinct pairs is the one inserting them one by one builds
    /// from empty: the same members in the same order, in the same form.
    #[test]
    fn built_at_once_equals_built_by_inserts(
        pairs in proptest::collection::hash_map(0u8..48, score(), 0..40),
        entries in 0usize..50,
        value in 1usize..7,
    ) {
        let limits = PackLimits { entries, value };
        let pairs: Vec<(Box<[u8]>, f64)> =
            pairs.into_iter().map(|(m, s)| (member_name(m).into(), s)).collect();
        let mut by_inserts = ZSet::new();
        for (m, s) in &pairs {
            by_inserts.insert(m, *s, limits).unwrap();
        }
        let at_once = ZSet::from_distinct_pairs(pairs, limits).unwrap();
        prop_assert_eq!(at_once.is_packed(), by_inserts.is_packed());
        prop_assert_eq!(zset_members(&at_once), zset_members(&by_inserts));
        for (m, s) in by_inserts.iter() {
            prop_assert_eq!(at_once.score(m), Some(s));
            prop_assert_eq!(at_once.rank(m), by_inserts.rank(m));
        }
    }
}

#[test]
fn built_at_once_keeps_a_repeated_member_once() {
    let pair = |m: &[u8], s: f64| (Box::from(m), s);
    for limits in [
        PackLimits::ZSET_DEFAULT,
        PackLimits {
            entries: 1,
            value: 64,
        },
    ] {
        let pairs = vec![
            pair(b"b", 2.0),
            pair(b"a", 1.0),
            pair(b"b", 2.0),
            pair(b"a", 1.0),
        ];
        let z = ZSet::from_distinct_pairs(pairs, limits).unwrap();
        assert_eq!(
            zset_members(&z),
            [(b"a".to_vec(), 1.0), (b"b".to_vec(), 2.0)],
            "{limits:?}"
        );
        assert_eq!(z.is_packed(), limits.entries >= 2);
    }
}

#[test]
fn built_at_once_refuses_a_nan_score() {
    let pairs = vec![
        (Box::from(&b"a"[..]), 1.0),
        (Box::from(&b"b"[..]), f64::NAN),
    ];
    assert_eq!(
        ZSet::from_distinct_pairs(pairs, PackLimits::ZSET_DEFAULT).unwrap_err(),
        ZSetError::NotANumber
    );
}
