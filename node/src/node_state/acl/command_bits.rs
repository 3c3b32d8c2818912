//! Which commands a user may run: one bit per command id of the catalog, a "future
//! commands" bit that only `+@all` sets (Redis's reserved bit: a user described as `+@all
//! -x` rather than `-@all +y`), and the deprecated first-argument allowances
//! (`+select|0`).

use super::catalog::{self, Catalog, CATEGORIES};
use super::error::RuleError;

/// Most first-argument allowances one user may hold (`+select|0`, `+debug|object`...): the
/// form is deprecated in Redis and a handful is all it is for; the bound keeps a user's
/// rules small whatever a client sends.
pub const FIRST_ARGS_MAX: usize = 1024;

#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct CommandBits {
    bits: Vec<u64>,
    /// Set only by `+@all`/`allcommands`: the user was given every command, including
    /// those the table would gain later.
    future: bool,
    /// Allowed first arguments of otherwise refused commands, by command id.
    first_args: Vec<(u16, Vec<Vec<u8>>)>,
}

impl CommandBits {
    pub fn none() -> Self {
        CommandBits::default()
    }

    pub fn get(&self, id: u16) -> bool {
        let (w, b) = (id as usize / 64, id as usize % 64);
        self.bits.get(w).is_some_and(|word| word & (1 << b) != 0)
    }

    fn set(&mut self, id: u16, on: bool) {
        let (w, b) = (id as usize / 64, id as usize % 64);
        if self.bits.len() <= w {
            self.bits.resize(w + 1, 0);
        }
        if on {
            self.bits[w] |= 1 << b;
        } else {
            self.bits[w] &= !(1 << b);
        }
    }

    /// Whether every command is allowed (the checks can be skipped).
    pub fn all(&self) -> bool {
        self.future && {
            let n = catalog::installed_len();
            (0..n as u16).all(|id| self.get(id))
        }
    }

    pub fn future(&self) -> bool {
        self.future
    }

    /// Whether `args` (args[0] the command) may run as command `id`.
    pub fn allows(&self, id: u16, args: &[&[u8]]) -> bool {
        if self.get(id) {
            return true;
        }
        let Some(first) = args.get(1) else {
            return false;
        };
        self.first_args
            .iter()
            .find(|(c, _)| *c == id)
            .is_some_and(|(_, allowed)| allowed.iter().any(|a| a.eq_ignore_ascii_case(first)))
    }

    pub fn set_all(&mut self, on: bool) {
        let n = catalog::installed_len();
        self.bits = vec![if on { u64::MAX } else { 0 }; n.div_ceil(64)];
        self.future = on;
        self.first_args.clear();
    }

    /// Allows or refuses a command and, for a container, every subcommand (Redis's
    /// `ACLChangeSelectorPerm`).
    pub fn change(&mut self, catalog: &Catalog, id: u16, on: bool) {
        // The future bit stays: only `+@all`/`-@all` set it (Redis's reserved bit).
        self.set(id, on);
        self.first_args.retain(|(c, _)| *c != id);
        for &sub in &catalog.entry(id).subcommands {
            self.set(sub, on);
        }
    }

    /// `+@cat` / `-@cat`: every command and subcommand in the category.
    pub fn change_category(&mut self, catalog: &Catalog, bit: u32, on: bool) {
        for id in catalog.ids() {
            if catalog.entry(id).categories & bit != 0 {
                self.change(catalog, id, on);
            }
        }
    }

    /// Applies one command rule: `+cmd`, `-cmd`, `+cmd|sub`, `-cmd|sub`, `+cmd|firstarg`,
    /// `+@cat`, `-@cat` (`+@all`/`-@all` included).
    pub fn apply(&mut self, catalog: &Catalog, op: &str) -> Result<(), RuleError> {
        let on = op.starts_with('+');
        let body = &op[1..];
        if let Some(category) = body.strip_prefix('@') {
            if category.eq_ignore_ascii_case("all") {
                self.set_all(on);
                return Ok(());
            }
            let bit = catalog::category_bit(category).ok_or(RuleError::Unknown)?;
            self.change_category(catalog, bit, on);
            return Ok(());
        }
        if let Some(id) = catalog.lookup(body) {
            self.change(catalog, id, on);
            return Ok(());
        }
        // `+command|first-arg` for a command without subcommands; never negative.
        let Some((command, first)) = body.rsplit_once('|') else {
            return Err(RuleError::Unknown);
        };
        let id = catalog.lookup(command).ok_or(RuleError::Unknown)?;
        let entry = catalog.entry(id);
        if entry.parent.is_some() {
            return Err(RuleError::FirstArgOfSubcommand);
        }
        if !entry.subcommands.is_empty() || !on {
            return Err(RuleError::Unknown);
        }
        if first.is_empty() {
            return Err(RuleError::Syntax);
        }
        let count: usize = self.first_args.iter().map(|(_, a)| a.len()).sum();
        if count >= FIRST_ARGS_MAX {
            return Err(RuleError::TooMany);
        }
        let first = first.as_bytes().to_vec();
        match self.first_args.iter_mut().find(|(c, _)| *c == id) {
            Some((_, allowed)) => {
                if !allowed.iter().any(|a| a.eq_ignore_ascii_case(&first)) {
                    allowed.push(first);
                }
            }
            None => self.first_args.push((id, vec![first])),
        }
        Ok(())
    }

    /// The rules that rebuild these bits: `+@all` or `-@all`, then the categories that fit
    /// best, then single commands, then first-argument allowances. This is Redis 7.0's
    /// greedy description: a category is used when it has more commands in common with
    /// the user than different, the one with the fewest differences first.
    pub fn describe(&self, catalog: &Catalog) -> String {
        let additive = !self.future;
        let mut rules = String::from(if additive { "-@all " } else { "+@all " });
        let mut fake = CommandBits::none();
        fake.set_all(!additive);
        // What is left to explain: the user's bits with each chosen category undone.
        let mut left = self.clone();
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best: Option<usize> = None;
            let (mut min_diff, mut max_same) = (u64::MAX, 0u64);
            for (j, _) in CATEGORIES.iter().enumerate() {
                if applied[j] {
                    continue;
                }
                let (mut on, mut off) = (0u64, 0u64);
                for id in catalog.ids() {
                    if catalog.entry(id).categories & (1 << j) != 0 {
                        if left.get(id) {
                            on += 1;
                        } else {
                            off += 1;
                        }
                    }
                }
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                    best = Some(j);
                    min_diff = diff;
                    max_same = same;
                }
            }
            let Some(j) = best else { break };
            let name = CATEGORIES[j];
            fake.change_category(catalog, 1 << j, additive);
            left.change_category(catalog, 1 << j, !additive);
            rules.push_str(if additive { "+@" } else { "-@" });
            rules.push_str(name);
            rules.push(' ');
            applied[j] = true;
        }
        for id in catalog.ids() {
            let user = self.get(id);
            if user != fake.get(id) {
                rules.push(if user { '+' } else { '-' });
                rules.push_str(catalog.entry(id).name);
                rules.push(' ');
                fake.change(catalog, id, user);
            }
            if !user {
                if let Some((_, allowed)) = self.first_args.iter().find(|(c, _)| *c == id) {
                    for a in allowed {
                        rules.push('+');
                        rules.push_str(catalog.entry(id).name);
                        rules.push('|');
                        rules.push_str(&String::from_utf8_lossy(a));
                        rules.push(' ');
                    }
                }
            }
        }
        rules.pop();
        debug_assert!(
            catalog.ids().all(|id| fake.get(id) == self.get(id)),
            "the description rebuilds the bits: {rules}"
        );
        rules
    }
}
