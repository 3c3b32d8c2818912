//! The import graph between the top-level modules of a crate (`src/<module>.rs` or
//! `src/<module>/`), read from the `crate::<module>` paths in each module's files, and the knots
//! in it: groups of modules that import one another around a loop (strongly connected
//! components of more than one module). A crate's modules should form layers, not knots; the
//! suite's `module_knots` test fails on a knot (issue "House redesign").
//!
//! What counts as an import, kept the same as `shared/tools/module_cycles.py` so that both
//! find the same edges: every `crate::NAME` in a file, plus every name directly inside a
//! `use crate::{...};` group; unit tests (`tests.rs`, files under a `tests*` folder, and the
//! text from `#[cfg(test)] mod tests` on) are left out, since a test may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One `from -> to` import between top-level modules, with the first file (in path order)
/// that makes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub file: String,
}

/// The graph of one crate.
#[derive(Debug, Default)]
pub struct ModuleGraph {
    pub modules: BTreeSet<String>,
    /// from -> to -> the file (relative to `src/`) that made the edge first.
    pub edges: BTreeMap<String, BTreeMap<String, String>>,
}

impl ModuleGraph {
    /// Reads every `.rs` file under `src` (a crate's `src/` folder).
    pub fn read(src: &Path) -> std::io::Result<ModuleGraph> {
        let mut graph = ModuleGraph::default();
        for entry in std::fs::read_dir(src)? {
            let entry = entry?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type()?.is_dir() {
                graph.modules.insert(name);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                if stem != "lib" && stem != "main" {
                    graph.modules.insert(stem.to_string());
                }
            }
        }
        let mut files = Vec::new();
        rust_files(src, &mut files)?;
        files.sort();
        for path in files {
            let rel = path.strip_prefix(src).unwrap_or(&path);
            if is_test_file(rel) {
                continue;
            }
            let Some(top) = rel
                .components()
                .next()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
            else {
                continue;
            };
            let top = top.strip_suffix(".rs").unwrap_or(&top).to_string();
            if !graph.modules.contains(&top) {
                continue;
            }
            let text = std::fs::read_to_string(&path)?;
            let rel_text = rel.to_string_lossy().into_owned();
            for name in imported_names(without_unit_tests(&text)) {
                if name != top && graph.modules.contains(&name) {
                    graph
                        .edges
                        .entry(top.clone())
                        .or_default()
                        .entry(name)
                        .or_insert_with(|| rel_text.clone());
                }
            }
        }
        Ok(graph)
    }

    pub fn edge_count(&self) -> usize {
        self.edges.values().map(BTreeMap::len).sum()
    }

    /// The knots: groups of two or more modules that reach one another, each sorted.
    pub fn knots(&self) -> Vec<Vec<String>> {
        let names: Vec<&String> = self.modules.iter().collect();
        let index_of: BTreeMap<&String, usize> =
            names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
        let adjacency: Vec<Vec<usize>> = names
            .iter()
            .map(|n| {
                self.edges
                    .get(*n)
                    .map(|to| to.keys().filter_map(|t| index_of.get(t).copied()).collect())
                    .unwrap_or_default()
            })
            .collect();
        let mut knots: Vec<Vec<String>> = strongly_connected(&adjacency)
            .into_iter()
            .filter(|group| group.len() > 1)
            .map(|group| {
                let mut names: Vec<String> = group.iter().map(|&i| names[i].clone()).collect();
                names.sort();
                names
            })
            .collect();
        knots.sort();
        knots
    }

    /// The edges whose both ends lie in one knot (the ones a loop runs through).
    pub fn knot_edges(&self) -> Vec<Edge> {
        let mut out = Vec::new();
        for knot in self.knots() {
            for from in &knot {
                for (to, file) in self.edges.get(from).into_iter().flatten() {
                    if knot.contains(to) {
                        out.push(Edge {
                            from: from.clone(),
                            to: to.clone(),
                            file: file.clone(),
                        });
                    }
                }
            }
        }
        out
    }

    /// The report `module_cycles.py` prints, line for line (the file named for an edge may
    /// differ: the script takes the first in directory order, this the first in path order).
    pub fn report(&self) -> String {
        let mut out = String::new();
        let knots = self.knots();
        for knot in &knots {
            out += &format!("knot: {}\n", knot.join(" <-> "));
            for edge in self.knot_edges().iter().filter(|e| knot.contains(&e.from)) {
                out += &format!("   {} -> {}  ({})\n", edge.from, edge.to, edge.file);
            }
        }
        out += &format!(
            "{} top-level modules, {} edges, {} knot(s), largest {} modules\n",
            self.modules.len(),
            self.edge_count(),
            knots.len(),
            knots.iter().map(Vec::len).max().unwrap_or(1)
        );
        out
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// `tests.rs`, or a file in a folder whose name starts with `tests`.
fn is_test_file(rel: &Path) -> bool {
    if rel.file_name().is_some_and(|n| n == "tests.rs") {
        return true;
    }
    rel.parent().is_some_and(|dir| {
        dir.components()
            .any(|c| c.as_os_str().to_string_lossy().starts_with("tests"))
    })
}

/// The text before the first `#[cfg(test)]` that opens `mod tests` (whitespace between).
fn without_unit_tests(text: &str) -> &str {
    const MARK: &str = "#[cfg(test)]";
    let mut from = 0;
    while let Some(at) = text[from..].find(MARK) {
        let start = from + at;
        let rest = text[start + MARK.len()..].trim_start();
        if rest.starts_with("mod tests") {
            return &text[..start];
        }
        from = start + MARK.len();
    }
    text
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The names a text imports from its crate: `crate::NAME` anywhere, and each name directly
/// inside a `use crate::{...};` group (followed by `::`, `,`, `}` or the group's end).
pub fn imported_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        let word: String = rest.chars().take_while(|&c| is_word(c)).collect();
        if !word.is_empty() {
            names.insert(word);
        }
    }
    const GROUP: &str = "use crate::{";
    let mut from = 0;
    while let Some(at) = text[from..].find(GROUP) {
        let open = from + at + GROUP.len();
        let Some(len) = text[open..].find("};") else {
            break;
        };
        names.extend(group_names(&text[open..open + len]));
        from = open + len;
    }
    names
}

/// Words of a `use` group that start after `,`, `{`, whitespace or the group's start and are
/// followed by `::`, or by optional whitespace and `,` / `}` / the group's end.
fn group_names(group: &str) -> Vec<String> {
    let chars: Vec<char> = group.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if !is_word(chars[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && is_word(chars[i]) {
            i += 1;
        }
        let before_ok =
            start == 0 || matches!(chars[start - 1], ',' | '{') || chars[start - 1].is_whitespace();
        let after = &chars[i..];
        let path_follows = after.starts_with(&[':', ':']);
        let next = after.iter().find(|c| !c.is_whitespace());
        let end_follows = matches!(next, None | Some(',') | Some('}'));
        if before_ok && (path_follows || end_follows) {
            names.push(chars[start..i].iter().collect());
        }
    }
    names
}

/// Tarjan's strongly connected components, iteratively (no recursion depth limit).
fn strongly_connected(adjacency: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = adjacency.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut groups = Vec::new();
    let mut counter = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, next neighbour to look at)
        let mut work = vec![(root, 0usize)];
        index[root] = counter;
        low[root] = counter;
        counter += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (v, ref mut next)) = work.last_mut() {
            if let Some(&w) = adjacency[v].get(*next) {
                *next += 1;
                if index[w] == usize::MAX {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut group = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    group.push(w);
                    if w == v {
                        break;
                    }
                }
                groups.push(group);
            }
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, text: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn names_from_paths_and_use_groups() {
        let names = imported_names(
            "use crate::a::X;\nuse crate::{b::Y, c,\n  d::{E, F}, g as h};\nfn f() { crate::i::j(); }",
        );
        let expected: BTreeSet<String> = ["a", "b", "c", "d", "h", "i", "E", "F"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        // `g as h`: like the script, `g` is not taken (a word follows it), `h` is.
        assert_eq!(names, expected);
    }

    #[test]
    fn finds_a_loop_and_ignores_unit_tests() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path();
        write(src, "lib.rs", "pub mod a; pub mod b; pub mod c; pub mod d;");
        write(src, "a.rs", "use crate::b::Thing;");
        write(src, "b/mod.rs", "pub mod inner;");
        write(src, "b/inner.rs", "fn f() { crate::c::g() }");
        write(src, "c.rs", "use crate::{a::X, d};");
        write(
            src,
            "d.rs",
            "pub fn x() {}\n#[cfg(test)]\nmod tests { use crate::a::X; }",
        );
        write(src, "b/tests.rs", "use crate::d::x;");
        let graph = ModuleGraph::read(src).unwrap();
        assert_eq!(graph.knots(), vec![vec!["a", "b", "c"]]);
        let edges: Vec<(String, String, String)> = graph
            .knot_edges()
            .into_iter()
            .map(|e| (e.from, e.to, e.file))
            .collect();
        assert_eq!(
            edges,
            [
                ("a", "b", "a.rs"),
                ("b", "c", "b/inner.rs"),
                ("c", "a", "c.rs")
            ]
            .map(|(a, b, f)| (a.to_string(), b.to_string(), f.to_string()))
        );
        assert_eq!(graph.edge_count(), 4, "c -> d is an edge outside the knot");
        assert!(graph
            .report()
            .ends_with("4 top-level modules, 4 edges, 1 knot(s), largest 3 modules\n"));
    }
}
