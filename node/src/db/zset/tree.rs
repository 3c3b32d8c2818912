//! The order-statistic AVL tree threaded through an [`Indexed`]'s map entries.
//!
//! Nodes are map entries addressed by index; each keeps parent and child links, the size of
//! its left subtree (for rank and select) and its height (for balance). Every walk is
//! iterative and bounded by the tree height, which AVL balance keeps below 1.45 log2(n + 2):
//! under 47 for [`super::indexed::MAX_LEN`] nodes.
//!
//! Large sets are bound by cache misses, one per node visited, so the operations are shaped
//! to visit the search path only: left-subtree counts let rank, select and partition read no
//! siblings, an insert counts itself on the way down, and rebalancing stops at the first
//! subtree whose height is unchanged (amortised O(1) levels).

use super::indexed::{Indexed, Node, NIL};
use std::cmp::Ordering;

/// Upper bound on any root-to-leaf walk (AVL height for `u32::MAX` nodes is under 47).
const MAX_HEIGHT: usize = 64;

impl Indexed {
    pub(super) fn node(&self, i: u32) -> &Node {
        &self.map[i as usize]
    }

    pub(super) fn node_mut(&mut self, i: u32) -> &mut Node {
        &mut self.map[i as usize]
    }

    fn height(&self, i: u32) -> u8 {
        if i == NIL {
            0
        } else {
            self.node(i).height
        }
    }

    /// Whether (score a, member a) orders before (score b, member b).
    pub(super) fn key_less(&self, a_score: f64, a: &[u8], b_score: f64, b: &[u8]) -> bool {
        super::order_before(a_score, a, b_score, b)
    }

    fn node_less(&self, a: u32, b: u32) -> bool {
        let (am, ascore) = self.entry(a);
        let (bm, bscore) = self.entry(b);
        self.key_less(ascore, am, bscore, bm)
    }

    /// Recomputes the height of `i` from its children.
    fn update_height(&mut self, i: u32) {
        let Node { left, right, .. } = *self.node(i);
        let height = 1 + self.height(left).max(self.height(right));
        self.node_mut(i).height = height;
    }

    /// Hangs `new` from `parent` where `old` hung (or makes it the root).
    fn replace_child(&mut self, parent: u32, old: u32, new: u32) {
        if parent == NIL {
            self.root = new;
        } else if self.node(parent).left == old {
            self.node_mut(parent).left = new;
        } else {
            debug_assert_eq!(self.node(parent).right, old);
            self.node_mut(parent).right = new;
        }
        if new != NIL {
            self.node_mut(new).parent = parent;
        }
    }

    fn rotate_left(&mut self, x: u32) -> u32 {
        let y = self.node(x).right;
        let parent = self.node(x).parent;
        let inner = self.node(y).left;
        self.node_mut(x).right = inner;
        if inner != NIL {
            self.node_mut(inner).parent = x;
        }
        self.replace_child(parent, x, y);
        // y's left subtree becomes x, x's left subtree and the inner subtree.
        let x_left = self.node(x).left_size;
        let n = self.node_mut(y);
        n.left = x;
        n.left_size += x_left + 1;
        self.node_mut(x).parent = y;
        self.update_height(x);
        self.update_height(y);
        y
    }

    fn rotate_right(&mut self, x: u32) -> u32 {
        let y = self.node(x).left;
        let parent = self.node(x).parent;
        let inner = self.node(y).right;
        self.node_mut(x).left = inner;
        if inner != NIL {
            self.node_mut(inner).parent = x;
        }
        self.replace_child(parent, x, y);
        // x's left subtree shrinks to the inner subtree.
        let y_left = self.node(y).left_size;
        let n = self.node_mut(x);
        n.left_size -= y_left + 1;
        n.parent = y;
        self.node_mut(y).right = x;
        self.update_height(x);
        self.update_height(y);
        y
    }

    /// Rebalances the subtree rooted at `i` if its children's heights differ by two; returns
    /// the subtree's root afterwards.
    fn balance(&mut self, i: u32) -> u32 {
        let Node { left, right, .. } = *self.node(i);
        let balance = self.height(left) as i32 - self.height(right) as i32;
        if balance > 1 {
            let l = *self.node(left);
            if self.height(l.left) < self.height(l.right) {
                self.rotate_left(left);
            }
            self.rotate_right(i)
        } else if balance < -1 {
            let r = *self.node(right);
            if self.height(r.right) < self.height(r.left) {
                self.rotate_right(right);
            }
            self.rotate_left(i)
        } else {
            i
        }
    }

    /// Restores heights and balance from `i` upwards after a change below it, stopping at
    /// the first subtree whose height came out unchanged: nothing above can be affected.
    fn retrace(&mut self, mut i: u32) {
        let mut steps = 0;
        while i != NIL {
            debug_assert!(steps <= MAX_HEIGHT, "tree deeper than AVL allows");
            steps += 1;
            let before = self.node(i).height;
            self.update_height(i);
            i = self.balance(i);
            if self.node(i).height == before {
                break;
            }
            i = self.node(i).parent;
        }
    }

    /// Subtracts one from the left counts of the ancestors of `from` (up to, not including,
    /// `stop`) that hold it in their left subtree: `from` is leaving that subtree.
    fn uncount(&mut self, from: u32, stop: u32) {
        let mut child = from;
        let mut p = self.node(from).parent;
        while p != stop && p != NIL {
            let n = self.node_mut(p);
            if n.left == child {
                n.left_size -= 1;
            }
            child = p;
            p = n.parent;
        }
    }

    /// Links detached node `x` (its score set, its member unique) into the tree.
    pub(super) fn link(&mut self, x: u32) {
        if self.root == NIL {
            self.root = x;
            return;
        }
        let mut cur = self.root;
        loop {
            let go_left = self.node_less(x, cur);
            let n = self.node_mut(cur);
            let next = if go_left {
                // x joins this node's left subtree.
                n.left_size += 1;
                n.left
            } else {
                n.right
            };
            if next == NIL {
                if go_left {
                    n.left = x;
                } else {
                    n.right = x;
                }
                self.node_mut(x).parent = cur;
                break;
            }
            cur = next;
        }
        self.retrace(cur);
    }

    /// Unlinks node `x` from the tree, leaving it detached (its map entry stays).
    pub(super) fn unlink(&mut self, x: u32) {
        self.uncount(x, NIL);
        let Node {
            left,
            right,
            parent,
            left_size,
            height,
            ..
        } = *self.node(x);
        let fix_from;
        if left == NIL || right == NIL {
            let child = if left != NIL { left } else { right };
            self.replace_child(parent, x, child);
            fix_from = parent;
        } else {
            // Two children: the successor y (leftmost of the right subtree) takes x's place,
            // with x's left subtree, count and height (the retrace corrects the height).
            let mut y = right;
            while self.node(y).left != NIL {
                y = self.node(y).left;
            }
            // The nodes between y and x lose y from their left subtrees.
            self.uncount(y, x);
            let y_parent = self.node(y).parent;
            if y_parent != x {
                let y_right = self.node(y).right;
                self.replace_child(y_parent, y, y_right);
                self.node_mut(y).right = right;
                self.node_mut(right).parent = y;
                fix_from = y_parent;
            } else {
                fix_from = y;
            }
            self.replace_child(parent, x, y);
            let n = self.node_mut(y);
            n.left = left;
            n.left_size = left_size;
            n.height = height;
            self.node_mut(left).parent = y;
        }
        let score = self.node(x).score;
        *self.node_mut(x) = Node::detached(score);
        self.retrace(fix_from);
    }

    /// Re-points the links of the node that `swap_remove` moved from index `from` to `to`.
    pub(super) fn relocated(&mut self, from: u32, to: u32) {
        let Node {
            left,
            right,
            parent,
            ..
        } = *self.node(to);
        if parent == NIL {
            debug_assert_eq!(self.root, from);
            self.root = to;
        } else if self.node(parent).left == from {
            self.node_mut(parent).left = to;
        } else {
            debug_assert_eq!(self.node(parent).right, from);
            self.node_mut(parent).right = to;
        }
        if left != NIL {
            self.node_mut(left).parent = to;
        }
        if right != NIL {
            self.node_mut(right).parent = to;
        }
    }

    /// The node at ascending position `rank`.
    pub(super) fn select(&self, mut rank: usize) -> Option<u32> {
        let mut cur = self.root;
        while cur != NIL {
            let n = self.node(cur);
            let left_size = n.left_size as usize;
            match rank.cmp(&left_size) {
                Ordering::Less => cur = n.left,
                Ordering::Equal => return Some(cur),
                Ordering::Greater => {
                    rank -= left_size + 1;
                    cur = n.right;
                }
            }
        }
        None
    }

    /// Ascending position of node `x`.
    pub(super) fn rank_of(&self, mut x: u32) -> usize {
        let mut rank = self.node(x).left_size as usize;
        loop {
            let parent = self.node(x).parent;
            if parent == NIL {
                return rank;
            }
            let p = self.node(parent);
            if p.right == x {
                rank += p.left_size as usize + 1;
            }
            x = parent;
        }
    }

    /// Number of nodes in the prefix of the order where `before` holds.
    pub(super) fn partition(&self, before: impl Fn(f64, &[u8]) -> bool) -> usize {
        let mut cur = self.root;
        let mut count = 0;
        while cur != NIL {
            let (member, score) = self.entry(cur);
            let n = self.node(cur);
            if before(score, member) {
                count += n.left_size as usize + 1;
                cur = n.right;
            } else {
                cur = n.left;
            }
        }
        count
    }

    pub(super) fn first_node(&self) -> Option<u32> {
        let mut cur = self.root;
        if cur == NIL {
            return None;
        }
        while self.node(cur).left != NIL {
            cur = self.node(cur).left;
        }
        Some(cur)
    }

    pub(super) fn last_node(&self) -> Option<u32> {
        let mut cur = self.root;
        if cur == NIL {
            return None;
        }
        while self.node(cur).right != NIL {
            cur = self.node(cur).right;
        }
        Some(cur)
    }

    /// The in-order successor of `x`.
    pub(super) fn next(&self, x: u32) -> Option<u32> {
        let right = self.node(x).right;
        if right != NIL {
            let mut cur = right;
            while self.node(cur).left != NIL {
                cur = self.node(cur).left;
            }
            return Some(cur);
        }
        let mut cur = x;
        loop {
            let parent = self.node(cur).parent;
            if parent == NIL {
                return None;
            }
            if self.node(parent).left == cur {
                return Some(parent);
            }
            cur = parent;
        }
    }

    /// The in-order predecessor of `x`.
    pub(super) fn prev(&self, x: u32) -> Option<u32> {
        let left = self.node(x).left;
        if left != NIL {
            let mut cur = left;
            while self.node(cur).right != NIL {
                cur = self.node(cur).right;
            }
            return Some(cur);
        }
        let mut cur = x;
        loop {
            let parent = self.node(cur).parent;
            if parent == NIL {
                return None;
            }
            if self.node(parent).right == cur {
                return Some(parent);
            }
            cur = parent;
        }
    }

    /// Checks every structural invariant (tests only): links agree, left counts and heights
    /// are right, AVL balance holds and the in-order walk is strictly ascending.
    #[cfg(test)]
    pub(super) fn check_invariants(&self) {
        let n = self.map.len();
        if n == 0 {
            assert_eq!(self.root, NIL);
            return;
        }
        assert_ne!(self.root, NIL);
        assert_eq!(self.node(self.root).parent, NIL);
        // Subtree sizes bottom-up: deepest nodes first.
        let depth = |mut i: u32| {
            let mut d = 0;
            while self.node(i).parent != NIL {
                i = self.node(i).parent;
                d += 1;
            }
            d
        };
        let mut by_depth: Vec<u32> = (0..n as u32).collect();
        by_depth.sort_by_key(|&i| std::cmp::Reverse(depth(i)));
        let mut sizes = vec![0usize; n];
        for &i in &by_depth {
            let Node {
                left,
                right,
                left_size,
                height,
                ..
            } = *self.node(i);
            let size_of = |c: u32| if c == NIL { 0 } else { sizes[c as usize] };
            if left != NIL {
                assert_eq!(self.node(left).parent, i);
            }
            if right != NIL {
                assert_eq!(self.node(right).parent, i);
            }
            assert_eq!(left_size as usize, size_of(left));
            assert_eq!(height, 1 + self.height(left).max(self.height(right)));
            assert!((self.height(left) as i32 - self.height(right) as i32).abs() <= 1);
            sizes[i as usize] = 1 + size_of(left) + size_of(right);
        }
        assert_eq!(sizes[self.root as usize], n);
        let order: Vec<(&[u8], f64)> = self.iter().collect();
        assert_eq!(order.len(), n);
        for w in order.windows(2) {
            assert!(self.key_less(w[0].1, w[0].0, w[1].1, w[1].0));
        }
    }
}
