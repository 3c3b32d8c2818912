//! The form of a list that outgrew one packed run: a deque of nodes, each a packed run of
//! elements within the list's limits (`list-max-listpack-size`, as Redis's quicklist keeps
//! listpacks of 8 KiB by default) or one element too long to pack (Redis's plain node).
//!
//! Why not a deque of boxed elements: each element then costs a 16-byte slot and an
//! allocation rounded up to the allocator's size class, 32 bytes for a 10-byte element,
//! where a packed node spends 11. A list of many small elements (a queue, a log) is the
//! common long list.
//!
//! Every node holds at least one element (an emptied node is removed at once). Finding a
//! position walks the nodes from the nearer end, as Redis does; pushes and pops at either end
//! touch one node. Pops keep the end node's capacity (at most a node's bytes, for the two
//! end nodes of a list), so a queue's pushes and pops do not reallocate it each time.

use super::ListLimits;
use crate::db::packed::{Items, Packed};
use std::collections::VecDeque;

#[derive(Clone, Debug)]
pub enum Node {
    Packed(Packed),
    /// One element the limits do not let into a packed node (longer than a node's byte
    /// bound or than a packed item may be).
    Plain(Box<[u8]>),
}

impl Node {
    /// A node holding only `element`.
    fn single(element: &[u8], limits: ListLimits) -> Node {
        if limits.admits_alone(element.len()) {
            let mut p = Packed::with_capacity(Packed::item_bytes(element.len()));
            p.push(element);
            Node::Packed(p)
        } else {
            Node::Plain(element.into())
        }
    }

    fn len(&self) -> usize {
        match self {
            Node::Packed(p) => p.len(),
            Node::Plain(_) => 1,
        }
    }

    fn get(&self, i: usize) -> Option<&[u8]> {
        match self {
            Node::Packed(p) => p.get(i),
            Node::Plain(e) => (i == 0).then_some(&**e),
        }
    }

    /// Heap bytes it holds (for MEMORY USAGE).
    pub fn heap_bytes(&self) -> usize {
        match self {
            Node::Packed(p) => p.heap_bytes(),
            Node::Plain(e) => e.len(),
        }
    }

    fn items(&self) -> NodeItems<'_> {
        match self {
            Node::Packed(p) => NodeItems::Packed(p.iter()),
            Node::Plain(e) => NodeItems::Plain(Some(e)),
        }
    }
}

/// Gives back the slack of a node that pushes at its end grew geometrically, once it is full
/// (the next push went to a new node).
fn shrink(node: &mut Node) {
    if let Node::Packed(p) = node {
        p.shrink_to_fit();
    }
}

/// The elements of one node, in order.
#[derive(Clone, Debug)]
enum NodeItems<'a> {
    Packed(Items<'a>),
    Plain(Option<&'a [u8]>),
}

impl<'a> Iterator for NodeItems<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        match self {
            NodeItems::Packed(items) => items.next(),
            NodeItems::Plain(e) => e.take(),
        }
    }
}

/// Largest packed node the chunked form builds, whatever `list-max-listpack-size` allows:
/// packed items only walk forward, so RPOP and LINDEX near a node's end walk the node: at
/// Redis's 8 KiB (whose listpacks also walk backwards) RPOP of a long list ran at 0.2x a
/// deque of boxed elements' rate here, at 1 KiB 0.77-0.84x, at 512 B 0.85-0.89x
/// (`TEST=rpush,rpop scripts/ab-nodes.sh`), for 4.26 MB instead of 4.02 per 1,000,000
/// 3-byte elements (redis-server 5.03).
pub const NODE_BYTES_MAX: usize = 512;

/// The limits a node of the chunked form is built under.
fn node_limits(limits: ListLimits) -> ListLimits {
    ListLimits {
        entries: limits.entries,
        bytes: limits.bytes.min(NODE_BYTES_MAX),
    }
}

#[derive(Clone, Debug, Default)]
pub struct Chunks {
    nodes: VecDeque<Node>,
    /// Elements in all nodes.
    len: usize,
}

impl Chunks {
    /// The chunked form of a packed list: its run becomes the first node.
    pub fn from_packed(p: Packed) -> Chunks {
        let len = p.len();
        let mut nodes = VecDeque::new();
        if len > 0 {
            nodes.push_back(Node::Packed(p));
        }
        Chunks { nodes, len }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The nodes, for MEMORY USAGE.
    pub fn nodes(&self) -> &VecDeque<Node> {
        &self.nodes
    }

    /// The node holding position `at` (< len) and the position within it, walking from the
    /// nearer end.
    fn locate(&self, at: usize) -> (usize, usize) {
        assert!(at < self.len, "position {at} of {}", self.len);
        if at < self.len / 2 {
            let mut rest = at;
            for (i, node) in self.nodes.iter().enumerate() {
                if rest < node.len() {
                    return (i, rest);
                }
                rest -= node.len();
            }
        } else {
            let mut end = self.len;
            for (i, node) in self.nodes.iter().enumerate().rev() {
                let start = end - node.len();
                if at >= start {
                    return (i, at - start);
                }
                end = start;
            }
        }
        unreachable!("the nodes hold {} elements", self.len)
    }

    pub fn get(&self, at: usize) -> Option<&[u8]> {
        if at >= self.len {
            return None;
        }
        let (i, off) = self.locate(at);
        self.nodes[i].get(off)
    }

    pub fn push_back(&mut self, element: &[u8], limits: ListLimits) {
        let limits = node_limits(limits);
        match self.nodes.back_mut() {
            Some(Node::Packed(p)) if limits.admits(p, element.len(), None) => {
                p.reserve(Packed::item_bytes(element.len()));
                p.push(element);
            }
            Some(full) => {
                shrink(full);
                self.nodes.push_back(Node::single(element, limits));
            }
            None => self.nodes.push_back(Node::single(element, limits)),
        }
        self.len += 1;
    }

    pub fn push_front(&mut self, element: &[u8], limits: ListLimits) {
        let limits = node_limits(limits);
        match self.nodes.front_mut() {
            Some(Node::Packed(p)) if limits.admits(p, element.len(), None) => {
                p.reserve(Packed::item_bytes(element.len()));
                p.insert_one(0, element);
            }
            Some(full) => {
                shrink(full);
                self.nodes.push_front(Node::single(element, limits));
            }
            None => self.nodes.push_front(Node::single(element, limits)),
        }
        self.len += 1;
    }

    /// Inserts `element` before position `at` (`at` the length: appends it).
    pub fn insert(&mut self, at: usize, element: &[u8], limits: ListLimits) {
        let limits = node_limits(limits);
        if at == self.len {
            return self.push_back(element, limits);
        }
        let (i, off) = self.locate(at);
        if let Node::Packed(p) = &mut self.nodes[i] {
            if limits.admits(p, element.len(), None) {
                p.insert_one(off, element);
                self.len += 1;
                return;
            }
        }
        // The node is full: split it where the element goes, then append the element to the
        // node before the split or give it a node of its own.
        let i = self.split(i, off);
        match i.checked_sub(1).map(|before| &mut self.nodes[before]) {
            Some(Node::Packed(p)) if limits.admits(p, element.len(), None) => p.push(element),
            _ => self.nodes.insert(i, Node::single(element, limits)),
        }
        self.len += 1;
    }

    /// Replaces the element at `at` (which must exist).
    pub fn set(&mut self, at: usize, element: &[u8], limits: ListLimits) {
        let limits = node_limits(limits);
        let (i, off) = self.locate(at);
        match &mut self.nodes[i] {
            Node::Packed(p) => {
                let old = p.get(off).expect("within the node").len();
                if limits.admits(p, element.len(), Some(old)) {
                    p.replace(off, element);
                    return;
                }
            }
            Node::Plain(_) => {
                self.nodes[i] = Node::single(element, limits);
                return;
            }
        }
        // Too long for its node: the element gets a node of its own between the halves.
        let i = self.split(i, off);
        self.remove_first_of(i);
        self.nodes.insert(i, Node::single(element, limits));
        self.len += 1;
    }

    /// Splits node `i` before its element `off`; returns the index of the node that starts
    /// with that element.
    fn split(&mut self, i: usize, off: usize) -> usize {
        if off == 0 {
            return i;
        }
        let Node::Packed(p) = &mut self.nodes[i] else {
            unreachable!("a plain node has one element");
        };
        let mut right = Packed::with_capacity(p.byte_len());
        for element in p.iter().skip(off) {
            right.push(element);
        }
        right.shrink_to_fit();
        p.remove(off, p.len() - off);
        self.nodes.insert(i + 1, Node::Packed(right));
        i + 1
    }

    /// Removes the first element of node `i` (and the node if it was its last).
    fn remove_first_of(&mut self, i: usize) {
        let emptied = match &mut self.nodes[i] {
            Node::Packed(p) => {
                p.remove(0, 1);
                p.is_empty()
            }
            Node::Plain(_) => true,
        };
        if emptied {
            self.nodes.remove(i);
        }
        self.len -= 1;
    }

    /// Removes up to `n` elements from the front, in order.
    pub fn pop_front_n(&mut self, n: usize) -> Vec<Box<[u8]>> {
        let n = n.min(self.len);
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let want = n - out.len();
            match self.nodes.front_mut() {
                Some(Node::Packed(p)) if want < p.len() => {
                    out.extend(p.iter().take(want).map(Box::from));
                    p.remove_keeping_capacity(0, want);
                }
                Some(_) => match self.nodes.pop_front() {
                    Some(Node::Packed(p)) => out.extend(p.iter().map(Box::from)),
                    Some(Node::Plain(e)) => out.push(e),
                    None => unreachable!("a front node was just seen"),
                },
                None => unreachable!("{} elements left in no node", self.len - out.len()),
            }
        }
        self.len -= n;
        out
    }

    /// Removes up to `n` elements from the back, last first.
    pub fn pop_back_n(&mut self, n: usize) -> Vec<Box<[u8]>> {
        let n = n.min(self.len);
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let want = n - out.len();
            match self.nodes.back_mut() {
                Some(Node::Packed(p)) if want < p.len() => out.extend(p.take_back(want)),
                Some(_) => match self.nodes.pop_back() {
                    Some(Node::Packed(p)) => {
                        let mut taken: Vec<Box<[u8]>> = p.iter().map(Box::from).collect();
                        taken.reverse();
                        out.extend(taken);
                    }
                    Some(Node::Plain(e)) => out.push(e),
                    None => unreachable!("a back node was just seen"),
                },
                None => unreachable!("{} elements left in no node", self.len - out.len()),
            }
        }
        self.len -= n;
        out
    }

    /// Drops `n` (<= len) elements from the front without handing them out.
    fn drop_front(&mut self, mut n: usize) {
        self.len -= n;
        while n > 0 {
            let node = self.nodes.front_mut().expect("n <= len");
            if n < node.len() {
                if let Node::Packed(p) = node {
                    p.remove(0, n);
                }
                return;
            }
            n -= node.len();
            self.nodes.pop_front();
        }
    }

    /// Drops `n` (<= len) elements from the back without handing them out.
    fn drop_back(&mut self, mut n: usize) {
        self.len -= n;
        while n > 0 {
            let node = self.nodes.back_mut().expect("n <= len");
            if n < node.len() {
                if let Node::Packed(p) = node {
                    p.remove(p.len() - n, n);
                }
                return;
            }
            n -= node.len();
            self.nodes.pop_back();
        }
    }

    /// Keeps only positions `first..=last` (both within the list).
    pub fn keep_range(&mut self, first: usize, last: usize) {
        self.drop_back(self.len - last - 1);
        self.drop_front(first);
    }

    /// Keeps the elements for which `keep` holds, asking about each once and in list order
    /// (LREM's count makes the order matter); nodes are not merged: each keeps within its
    /// limits by only shrinking.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        let nodes = std::mem::take(&mut self.nodes);
        for mut node in nodes {
            let kept = match &mut node {
                Node::Packed(p) => {
                    super::retain_packed(p, &mut keep);
                    !p.is_empty()
                }
                Node::Plain(e) => keep(e),
            };
            if kept {
                self.nodes.push_back(node);
            }
        }
        self.len = self.nodes.iter().map(Node::len).sum();
    }

    /// Up to `count` elements from position `first` on.
    pub fn range(&self, first: usize, count: usize) -> ChunkIter<'_> {
        if first >= self.len || count == 0 {
            return ChunkIter {
                nodes: self.nodes.range(0..0),
                current: NodeItems::Plain(None),
                remaining: 0,
            };
        }
        let (i, off) = self.locate(first);
        let mut current = self.nodes[i].items();
        for _ in 0..off {
            current.next();
        }
        ChunkIter {
            nodes: self.nodes.range(i + 1..),
            current,
            remaining: count.min(self.len - first),
        }
    }

    /// Every element back to front.
    pub fn iter_rev(&self) -> ChunkIterRev<'_> {
        ChunkIterRev {
            nodes: self.nodes.iter().rev(),
            current: Vec::new().into_iter().rev(),
        }
    }
}

/// Elements of a [`Chunks`] front to back (or a range of them).
pub struct ChunkIter<'a> {
    nodes: std::collections::vec_deque::Iter<'a, Node>,
    current: NodeItems<'a>,
    remaining: usize,
}

impl<'a> Iterator for ChunkIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.remaining == 0 {
            return None;
        }
        loop {
            if let Some(element) = self.current.next() {
                self.remaining -= 1;
                return Some(element);
            }
            self.current = self.nodes.next()?.items();
        }
    }

    /// Node by node, a packed node's items in a loop of their own (what `for_each` runs, as
    /// LRANGE does). Why: through `next` each element went through the count, the node kind
    /// and the packed walk's `Option`s, ~33 instructions per element of an LRANGE against a
    /// few for a deque of boxed elements (callgrind, `-t lrange_100`).
    fn fold<B, F>(self, init: B, mut f: F) -> B
    where
        F: FnMut(B, &'a [u8]) -> B,
    {
        let ChunkIter {
            mut nodes,
            mut current,
            mut remaining,
        } = self;
        let mut acc = init;
        while remaining > 0 {
            match current {
                NodeItems::Packed(mut items) => {
                    while remaining > 0 {
                        let Some(element) = items.next() else {
                            break;
                        };
                        remaining -= 1;
                        acc = f(acc, element);
                    }
                }
                NodeItems::Plain(Some(element)) => {
                    remaining -= 1;
                    acc = f(acc, element);
                }
                NodeItems::Plain(None) => {}
            }
            if remaining == 0 {
                break;
            }
            let Some(node) = nodes.next() else {
                break;
            };
            current = node.items();
        }
        acc
    }
}

/// Elements of a [`Chunks`] back to front: a packed node's items only walk forward, so each
/// node's are listed (at most a node's worth), then handed out backwards.
pub struct ChunkIterRev<'a> {
    nodes: std::iter::Rev<std::collections::vec_deque::Iter<'a, Node>>,
    current: std::iter::Rev<std::vec::IntoIter<&'a [u8]>>,
}

impl<'a> Iterator for ChunkIterRev<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        loop {
            if let Some(element) = self.current.next() {
                return Some(element);
            }
            let node = self.nodes.next()?;
            self.current = node.items().collect::<Vec<_>>().into_iter().rev();
        }
    }
}
