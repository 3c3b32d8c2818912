//! Goal: a list behaves exactly like a deque of byte strings in either form and across the
//! conversion, is packed exactly while no write has taken it past its limits, and once
//! chunked keeps every node within them.
//! Method: random operation sequences (proptest) under small random limits, applied to the
//! list and to a `VecDeque` model, comparing every read after each step.

use super::chunks::Node;
use super::*;
use proptest::prelude::*;
use std::collections::VecDeque;

#[derive(Debug, Clone)]
enum Op {
    PushBack(Vec<u8>),
    PushFront(Vec<u8>),
    Insert(usize, Vec<u8>),
    Set(usize, Vec<u8>),
    PopFront,
    PopBack,
    PopFrontN(usize),
    PopBackN(usize),
    RemoveEqual(Vec<u8>),
    /// LREM with a count: the first `n` equal elements go, asked about in list order.
    RemoveFirst(Vec<u8>, usize),
    /// `list-max-listpack-size` changed between writes (CONFIG SET, or a replica loading a
    /// primary's list under the default and then writing under its own).
    Limits(i64),
    KeepRange(usize, usize),
    Clear,
}

fn element() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        8 => proptest::collection::vec(b'a'..b'e', 0..4),
        2 => proptest::collection::vec(any::<u8>(), 100..200),
        // Longer than any packed item may be.
        1 => Just(vec![b'L'; ITEM_MAX + 1]),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => element().prop_map(Op::PushBack),
        4 => element().prop_map(Op::PushFront),
        2 => (0usize..20, element()).prop_map(|(at, e)| Op::Insert(at, e)),
        2 => (0usize..20, element()).prop_map(|(at, e)| Op::Set(at, e)),
        1 => Just(Op::PopFront),
        1 => Just(Op::PopBack),
        1 => (0usize..5).prop_map(Op::PopFrontN),
        1 => (0usize..5).prop_map(Op::PopBackN),
        1 => element().prop_map(Op::RemoveEqual),
        1 => (element(), 1usize..3).prop_map(|(e, n)| Op::RemoveFirst(e, n)),
        1 => (-5i64..12).prop_map(Op::Limits),
        1 => (0usize..10, 0usize..10).prop_map(|(a, b)| Op::KeepRange(a, b)),
        1 => Just(Op::Clear),
    ]
}

/// Whether a packed list holding `model` may take `len` bytes in place of `replacing`.
fn admits(
    limits: ListLimits,
    model: &VecDeque<Vec<u8>>,
    len: usize,
    replacing: Option<usize>,
) -> bool {
    let bytes: usize = model.iter().map(|e| Packed::item_bytes(e.len())).sum();
    let count = model.len() + usize::from(replacing.is_none());
    len <= ITEM_MAX
        && count <= limits.entries
        && bytes + Packed::item_bytes(len) - replacing.map_or(0, Packed::item_bytes) <= limits.bytes
}

/// A chunked list's nodes each hold an element, packed ones within the widest limits in
/// force so far, plain ones only what the narrowest would not pack.
fn check_nodes(
    list: &ListValue,
    widest: ListLimits,
    narrowest: ListLimits,
) -> Result<(), TestCaseError> {
    let Some(chunks) = list.chunks() else {
        return Ok(());
    };
    let mut total = 0;
    for node in chunks.nodes() {
        match node {
            Node::Packed(p) => {
                prop_assert!(!p.is_empty(), "an empty node was kept");
                prop_assert!(p.len() <= widest.entries && p.byte_len() <= widest.bytes);
                total += p.len();
            }
            Node::Plain(e) => {
                prop_assert!(
                    !narrowest.admits_alone(e.len()),
                    "a packable element in a plain node"
                );
                total += 1;
            }
        }
    }
    prop_assert_eq!(total, list.len());
    Ok(())
}

fn check_reads(list: &ListValue, model: &VecDeque<Vec<u8>>) -> Result<(), TestCaseError> {
    prop_assert_eq!(list.len(), model.len());
    prop_assert_eq!(list.is_empty(), model.is_empty());
    prop_assert!(list.iter().eq(model.iter().map(|e| &e[..])));
    prop_assert!(list.iter_rev().eq(model.iter().rev().map(|e| &e[..])));
    for (i, e) in model.iter().enumerate() {
        prop_assert_eq!(list.get(i), Some(&e[..]));
    }
    prop_assert_eq!(list.get(model.len()), None);
    for first in 0..=model.len() + 1 {
        for count in [0, 1, 2, model.len(), usize::MAX] {
            let expect = model.iter().skip(first).take(count).map(|e| &e[..]);
            prop_assert!(
                list.range(first, count).eq(expect.clone()),
                "range {first} {count}"
            );
            // The same through the list's own loop (`fold`, what `for_each` runs).
            let mut folded: Vec<&[u8]> = Vec::new();
            list.range(first, count).for_each(|e| folded.push(e));
            prop_assert!(
                folded.into_iter().eq(expect),
                "range {first} {count} folded"
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn both_forms_match_a_deque(
        ops in proptest::collection::vec(op(), 1..80),
        size in -5i64..12,
    ) {
        let mut limits = ListLimits::from_size(size);
        let (mut widest, mut narrowest) = (limits, limits);
        let mut list = ListValue::new();
        let mut model: VecDeque<Vec<u8>> = VecDeque::new();
        let mut packed = true;
        for op in ops {
            match op {
                Op::PushBack(e) => {
                    packed &= admits(limits, &model, e.len(), None);
                    list.push_back(&e, limits);
                    model.push_back(e);
                }
                Op::PushFront(e) => {
                    packed &= admits(limits, &model, e.len(), None);
                    list.push_front(&e, limits);
                    model.push_front(e);
                }
                Op::Insert(at, e) => {
                    let at = at.min(model.len());
                    packed &= admits(limits, &model, e.len(), None);
                    list.insert(at, &e, limits);
                    model.insert(at, e);
                }
                Op::Set(at, e) => {
                    if at < model.len() {
                        packed &= admits(limits, &model, e.len(), Some(model[at].len()));
                        list.set(at, &e, limits);
                        model[at] = e;
                    }
                }
                Op::PopFront => {
                    prop_assert_eq!(list.pop_front().map(Vec::from), model.pop_front());
                }
                Op::PopBack => {
                    prop_assert_eq!(list.pop_back().map(Vec::from), model.pop_back());
                }
                Op::PopFrontN(n) => {
                    let expect: Vec<Vec<u8>> = model.drain(..n.min(model.len())).collect();
                    let got: Vec<Vec<u8>> = list.pop_front_n(n).into_iter().map(Vec::from).collect();
                    prop_assert_eq!(got, expect);
                }
                Op::PopBackN(n) => {
                    let expect: Vec<Vec<u8>> = (0..n).filter_map(|_| model.pop_back()).collect();
                    let got: Vec<Vec<u8>> = list.pop_back_n(n).into_iter().map(Vec::from).collect();
                    prop_assert_eq!(got, expect);
                }
                Op::RemoveEqual(e) => {
                    list.retain(|x| x != &e[..]);
                    model.retain(|x| *x != e);
                }
                Op::RemoveFirst(e, n) => {
                    let mut gone = 0;
                    list.retain(|x| {
                        let drop = x == &e[..] && gone < n;
                        gone += usize::from(drop);
                        !drop
                    });
                    let mut gone = 0;
                    model.retain(|x| {
                        let drop = *x == e && gone < n;
                        gone += usize::from(drop);
                        !drop
                    });
                }
                Op::Limits(size) => {
                    limits = ListLimits::from_size(size);
                    widest = ListLimits {
                        entries: widest.entries.max(limits.entries),
                        bytes: widest.bytes.max(limits.bytes),
                    };
                    narrowest = ListLimits {
                        entries: narrowest.entries.min(limits.entries),
                        bytes: narrowest.bytes.min(limits.bytes),
                    };
                }
                Op::KeepRange(a, b) => {
                    if a <= b && b < model.len() {
                        list.keep_range(a, b);
                        model.truncate(b + 1);
                        model.drain(..a);
                    }
                }
                Op::Clear => {
                    list.clear();
                    model.clear();
                    packed = true;
                }
            }
            prop_assert_eq!(list.is_packed(), packed);
            check_nodes(&list, widest, narrowest)?;
            check_reads(&list, &model)?;
        }
    }
}

#[test]
fn limits_read_list_max_listpack_size_as_redis() {
    assert_eq!(
        ListLimits::DEFAULT,
        ListLimits {
            entries: PACKED_ENTRIES_MAX,
            bytes: 8192
        }
    );
    assert_eq!(ListLimits::from_size(-1).bytes, 4096);
    assert_eq!(ListLimits::from_size(-5).bytes, 65536);
    assert_eq!(ListLimits::from_size(-100), ListLimits::from_size(-5));
    assert_eq!(
        ListLimits::from_size(128),
        ListLimits {
            entries: 128,
            bytes: 8192
        }
    );
    assert_eq!(ListLimits::from_size(0).entries, 1);
    assert_eq!(ListLimits::from_size(i64::MAX).entries, PACKED_ENTRIES_MAX);
}

#[test]
fn forms_compare_by_elements() {
    let packed: ListValue = [&b"a"[..], b"b"].into_iter().collect();
    let mut chunked = ListValue::new();
    chunked.push_back(b"a", ListLimits::from_size(0));
    chunked.push_back(b"b", ListLimits::from_size(0));
    assert!(packed.is_packed() && !chunked.is_packed());
    assert_eq!(packed, chunked);
    chunked.pop_back();
    assert_ne!(packed, chunked);
}

/// Goal: a long list of small elements costs about what Redis's quicklist does per element
/// (a listpack entry of a 10-byte string: 12 bytes), not a boxed element each (32).
#[test]
fn a_long_list_of_small_elements_is_packed_in_nodes() {
    const N: usize = 100_000;
    let mut list = ListValue::new();
    for i in 0..N {
        list.push_back(format!("elem{i:06}").as_bytes(), ListLimits::DEFAULT);
    }
    for i in 0..N / 10 {
        list.push_front(format!("head{i:06}").as_bytes(), ListLimits::DEFAULT);
    }
    let chunks = list.chunks().expect("past 8 KiB the list is chunked");
    let heap: usize = chunks.nodes().iter().map(Node::heap_bytes).sum();
    let len = list.len();
    assert_eq!(len, N + N / 10);
    assert!(heap <= len * 12, "{heap} heap bytes for {len} elements");
    // Nodes near full: 11 bytes an element, NODE_BYTES_MAX a node.
    assert!(chunks.nodes().len() <= len.div_ceil(super::chunks::NODE_BYTES_MAX / 11) + 2);
    assert_eq!(list.get(0), Some(&b"head009999"[..]));
    assert_eq!(list.get(N / 10), Some(&b"elem000000"[..]));
    assert_eq!(list.get(len - 1), Some(&b"elem099999"[..]));
    assert_eq!(
        list.range(N / 10 + 5000, 2).collect::<Vec<_>>(),
        [&b"elem005000"[..], b"elem005001"]
    );
}

/// Goal: LREM with a count removes the first equal elements in list order when equal bytes
/// sit in a plain node and in a packed one (a list written under two limits).
#[test]
fn a_counted_removal_goes_in_list_order_across_plain_and_packed_nodes() {
    let big = vec![b'X'; 5000];
    let mut list = ListValue::new();
    // Under 4 KiB nodes the 5,000-byte element gets a plain node of its own...
    list.push_back(&big, ListLimits::from_size(-1));
    // ... under 8 KiB the same bytes are packed beside a small element.
    list.push_back(b"a", ListLimits::from_size(-2));
    list.push_back(&big, ListLimits::from_size(-2));
    let mut gone = 0;
    list.retain(|x| {
        let drop = x == &big[..] && gone < 1;
        gone += usize::from(drop);
        !drop
    });
    assert_eq!(list.iter().collect::<Vec<_>>(), [&b"a"[..], &big[..]]);
}
