//! Import cycles between the files of one crate (issue 38). For each crate under
//! `crates/*/src`, the module tree is followed from `lib.rs` (and `main.rs`, a tree of
//! its own) through its `mod name;` declarations; each file is one node. A file points
//! at another when its code names a path into it: `use crate::a::b`, `crate::a::b::X`,
//! `super::x`, `self::x`, or a path that starts with one of its own child modules
//! (`steer::f()` in `lib.rs`). A path resolves to the deepest file that holds it:
//! `a::b::C` is `a/b.rs` (or `a/b/mod.rs`) where that file exists, else `a.rs`, else the
//! crate root; where that file re-exports the next segment, on to the file the
//! re-export names.
//!
//! What is not read: comments, string and char literals, `macro_rules!` bodies' `$crate`,
//! `pub(in path)`, items under `#[cfg(test)]` (a test module, inline or its own file),
//! files named `tests.rs` and files under a `tests/` folder. What is not seen: a use
//! that names no path (a method call on a value of another file's type), an inline
//! `mod x { .. }` (part of its file), `#[path]`, and a cycle that closes only through
//! a parent's use of its own child (`command.rs` → `seg/accept.rs` → `seg/mod.rs`,
//! which declares `seg/desc.rs` → `command.rs`: appif's, cut by 89422bf).
//!
//! The rule of the structure review (2026-12-02, section 3): a parent using its own
//! children is not a cycle, so an edge from a module to one of its descendants
//! (`a/mod.rs` or `a.rs` → `a/b.rs`) is dropped. The crate root is the one exception:
//! every top-level file is its child, so it counts as their peer and its edges are kept
//! (`lib.rs` → `udp.rs` → `lib.rs` would be a cycle).
//!
//! A re-export (`pub use`, `pub(crate) use`) is followed, not counted: `crate::Foo`
//! where `lib.rs` says `pub use tcp::Foo` points at `tcp.rs`, and the re-export itself
//! is no use of `tcp.rs`.
//!
//! A cycle is a strongly connected component of two or more files. The test prints
//! every crate's cycles, each with the edges that tie it (`file:line → file`), and
//! fails when a cycle is not in [`ALLOWED`] or when an entry of [`ALLOWED`] is no
//! longer found, so that the list only shrinks and stays true.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The known cycles still to cut: crate, the files of the component (paths from the
/// crate's `src/`, sorted), and why it is left.
const ALLOWED: &[(&str, &[&str], &str)] = &[
    (
        "engine",
        &["tcp/plpmtud.rs", "tcp/recovery.rs", "tcp/tcb.rs"],
        "recovery.rs and plpmtud.rs add methods to the Tcb, which holds their state (issue 38: recovery as a type of its own)",
    ),
    (
        "preload",
        &[
            "epoll/mod.rs",
            "epoll/regs.rs",
            "obj.rs",
            "sock/mod.rs",
        ],
        "the shim's socket floor: sock and epoll hold each other through obj (Obj names both), and a socket nudges its epolls (sock → epoll/regs) (issue 38)",
    ),
];

/// The repository root: two levels above this crate.
fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().expect("the repository root")
}

/// The source with comments and the contents of string and char literals turned into
/// spaces, line breaks kept.
fn blank_non_code(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out: Vec<char> = b.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            let end = (i..b.len()).find(|&j| b[j] == '\n').unwrap_or(b.len());
            blank(&mut out, i, end);
            i = end;
        } else if c == '/' && next == Some('*') {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j] == '/' && b.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if b[j] == '*' && b.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if c == 'r'
            && (i == 0 || !ident(b[i - 1]) || (b[i - 1] == 'b' && (i < 2 || !ident(b[i - 2]))))
            && matches!(next, Some('"') | Some('#'))
        {
            let hashes = b[i + 1..].iter().take_while(|&&x| x == '#').count();
            if b.get(i + 1 + hashes) != Some(&'"') {
                i += 1;
                continue;
            }
            let start = i + 2 + hashes;
            let mut j = start;
            while j < b.len() {
                if b[j] == '"'
                    && b[j + 1..]
                        .iter()
                        .take(hashes)
                        .filter(|&&x| x == '#')
                        .count()
                        == hashes
                {
                    break;
                }
                j += 1;
            }
            blank(&mut out, start, j);
            i = j + 1 + hashes;
        } else if c == '"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != '"' {
                j += if b[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i + 1, j);
            i = j + 1;
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}'); a lifetime ('a) is left alone.
            if next == Some('\\') {
                let end = (i + 2..b.len()).find(|&j| b[j] == '\'').unwrap_or(b.len());
                blank(&mut out, i + 1, end);
                i = end + 1;
            } else if b.get(i + 2) == Some(&'\'') {
                blank(&mut out, i + 1, i + 2);
                i += 3;
            } else {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out.into_iter().collect()
}

/// One token of code: an identifier or keyword, `::`, or one punctuation character,
/// with its line.
#[derive(Clone, Debug, PartialEq)]
struct Tok {
    text: String,
    line: usize,
}

fn tokens(code: &str) -> Vec<Tok> {
    let b: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < b.len() {
        let c = b[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(Tok {
                text: b[start..i].iter().collect(),
                line,
            });
        } else if c == ':' && b.get(i + 1) == Some(&':') {
            out.push(Tok {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            out.push(Tok {
                text: c.to_string(),
                line,
            });
            i += 1;
        }
    }
    out
}

/// The index just past the bracket that closes the one at `open`.
fn past_close(t: &[Tok], open: usize) -> usize {
    let mut depth = 0i32;
    for (j, tok) in t.iter().enumerate().skip(open) {
        match tok.text.as_str() {
            "(" | "[" | "{" => depth += 1,
            ")" | "]" | "}" => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
    }
    t.len()
}

/// Whether the attribute whose `[` is at `open` is a `cfg` that holds only under test.
fn is_cfg_test(t: &[Tok], open: usize) -> bool {
    let end = past_close(t, open);
    let inner = &t[open + 1..end.saturating_sub(1)];
    inner.first().is_some_and(|x| x.text == "cfg")
        && inner.iter().any(|x| x.text == "test")
        && !inner.iter().any(|x| x.text == "not")
}

/// The tokens without the items under `#[cfg(test)]`; `None` when the whole file is
/// (`#![cfg(test)]`).
fn strip_test_items(t: Vec<Tok>) -> Option<Vec<Tok>> {
    let mut out = Vec::with_capacity(t.len());
    let mut i = 0;
    while i < t.len() {
        if t[i].text == "#"
            && t.get(i + 1).is_some_and(|x| x.text == "!")
            && t.get(i + 2).is_some_and(|x| x.text == "[")
            && is_cfg_test(&t, i + 2)
        {
            return None;
        }
        if !(t[i].text == "#"
            && t.get(i + 1).is_some_and(|x| x.text == "[")
            && is_cfg_test(&t, i + 1))
        {
            out.push(t[i].clone());
            i += 1;
            continue;
        }
        // Skip this and any further attributes, then the item: to a `;` outside
        // brackets, or through its first outer `{ ... }` block (a `use` goes on to `;`).
        let mut j = past_close(&t, i + 1);
        while j + 1 < t.len() && t[j].text == "#" && t[j + 1].text == "[" {
            j = past_close(&t, j + 1);
        }
        let is_use = t[j..].iter().take(3).any(|x| x.text == "use");
        while j < t.len() {
            match t[j].text.as_str() {
                ";" => {
                    j += 1;
                    break;
                }
                "(" | "[" => j = past_close(&t, j),
                "{" => {
                    j = past_close(&t, j);
                    if !is_use {
                        break;
                    }
                }
                _ => j += 1,
            }
        }
        i = j;
    }
    Some(out)
}

/// One file of a module tree.
struct File {
    /// The path from the crate's `src/`, as printed.
    name: String,
    /// The module path (`["tcp", "rate"]`); empty for the root.
    module: Vec<String>,
    toks: Vec<Tok>,
    /// Its child modules declared with `mod name;`.
    children: BTreeSet<String>,
}

/// The files of the module tree rooted at `root` (`lib.rs` or `main.rs`).
fn module_tree(src: &Path, root: &str) -> Vec<File> {
    let mut files = Vec::new();
    let mut todo = vec![(src.join(root), Vec::<String>::new())];
    while let Some((path, module)) = todo.pop() {
        let rel = path
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let skipped = rel == "tests.rs"
            || rel.ends_with("/tests.rs")
            || rel.starts_with("tests/")
            || rel.contains("/tests/");
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let Some(toks) = strip_test_items(tokens(&blank_non_code(&text))) else {
            continue;
        };
        if skipped {
            continue;
        }
        // The folder that holds this file's child modules.
        let stem = path.file_stem().unwrap().to_string_lossy().to_string();
        let dir = path.parent().unwrap();
        let own_dir = if module.is_empty() || stem == "mod" {
            dir.to_path_buf()
        } else {
            dir.join(&stem)
        };
        let mut children = BTreeSet::new();
        for w in toks.windows(3) {
            if w[0].text == "mod" && w[2].text == ";" {
                let name = w[1].text.clone();
                let flat = own_dir.join(format!("{name}.rs"));
                let nested = own_dir.join(&name).join("mod.rs");
                let mut m = module.clone();
                m.push(name.clone());
                if flat.is_file() {
                    todo.push((flat, m));
                } else if nested.is_file() {
                    todo.push((nested, m));
                }
                children.insert(name);
            }
        }
        files.push(File {
            name: rel,
            module,
            toks,
            children,
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    files
}

/// A path named by a file.
struct Named {
    path: Vec<String>,
    line: usize,
    /// The name it takes here: its alias (`as x`) or its last segment.
    leaf: String,
    /// Whether it is named by a re-export (`pub use`, `pub(crate) use`).
    reexport: bool,
}

/// The module paths a file names: every path that starts with `crate`, `self`, `super`
/// or one of the file's own children, `use` groups expanded.
fn named_paths(f: &File) -> Vec<Named> {
    struct Walk<'a> {
        t: &'a [Tok],
        reexport: bool,
        out: Vec<Named>,
    }
    impl Walk<'_> {
        fn leaf(&mut self, path: Vec<String>, line: usize, alias: Option<String>) {
            let leaf = alias.or_else(|| path.last().cloned()).unwrap_or_default();
            self.out.push(Named {
                path,
                line,
                leaf,
                reexport: self.reexport,
            });
        }
        /// Walks one path (or use tree) from `i`; returns the index after it.
        fn path(&mut self, mut i: usize, mut path: Vec<String>) -> usize {
            let t = self.t;
            let line = t[i.min(t.len() - 1)].line;
            loop {
                match t.get(i).map(|x| x.text.as_str()) {
                    Some("{") => {
                        i += 1;
                        while i < t.len() && t[i].text != "}" {
                            if t[i].text == "," {
                                i += 1;
                                continue;
                            }
                            i = self.path(i, path.clone()).max(i + 1);
                        }
                        return i + 1;
                    }
                    Some("*") => {
                        self.leaf(path, line, Some("*".into()));
                        return i + 1;
                    }
                    Some(s) if s.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                        if s != "self" || path.is_empty() {
                            path.push(s.to_string());
                        }
                        i += 1;
                    }
                    _ => {
                        self.leaf(path, line, None);
                        return i;
                    }
                }
                if t.get(i).is_some_and(|x| x.text == "::") {
                    i += 1;
                } else {
                    let alias = (t.get(i).is_some_and(|x| x.text == "as"))
                        .then(|| t.get(i + 1).map(|x| x.text.clone()))
                        .flatten();
                    self.leaf(path, line, alias.clone());
                    return if alias.is_some() { i + 2 } else { i };
                }
            }
        }
    }
    let t = &f.toks;
    let mut w = Walk {
        t,
        reexport: false,
        out: Vec::new(),
    };
    let mut i = 0;
    while i < t.len() {
        if t[i].text == "use" {
            w.reexport = i > 0
                && (t[i - 1].text == "pub"
                    || (t[i - 1].text == ")" && i > 3 && t[i - 4].text == "pub"));
        } else if t[i].text == ";" {
            w.reexport = false;
        }
        let starts = i == 0 || !matches!(t[i - 1].text.as_str(), "::" | "$");
        let first = t[i].text.as_str();
        let head = matches!(first, "crate" | "self" | "super") || f.children.contains(first);
        let in_use = i > 0 && t[i - 1].text == "use";
        let followed = t.get(i + 1).is_some_and(|x| x.text == "::");
        let vis_in = i > 0 && t[i - 1].text == "in";
        if starts && head && !vis_in && (followed || (in_use && first != "self")) {
            i = w.path(i, Vec::new()).max(i + 1);
        } else {
            i += 1;
        }
    }
    w.out
}

/// The absolute module path of `path` as named from `module`.
fn absolute(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut segs = path.iter().peekable();
    let mut abs: Vec<String> = match segs.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segs.next();
            Vec::new()
        }
        _ => module.to_vec(),
    };
    if segs.peek().is_some_and(|s| *s == "self") {
        segs.next();
    }
    while segs.peek().is_some_and(|s| *s == "super") {
        segs.next();
        abs.pop()?;
    }
    abs.extend(segs.cloned());
    Some(abs)
}

/// The cycles of one module tree: each strongly connected component of two or more
/// files, as sorted file names, with the lines that tie it.
fn cycles(files: &[File]) -> Vec<(Vec<String>, Vec<String>)> {
    let by_module: BTreeMap<&[String], usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.module.as_slice(), i))
        .collect();
    let named: Vec<Vec<Named>> = files.iter().map(named_paths).collect();
    // Each file's re-exports: the name it gives → the absolute path it stands for.
    let reexports: Vec<BTreeMap<&str, Vec<String>>> = files
        .iter()
        .zip(&named)
        .map(|(f, n)| {
            n.iter()
                .filter(|x| x.reexport && x.leaf != "*")
                .filter_map(|x| Some((x.leaf.as_str(), absolute(&f.module, &x.path)?)))
                .collect()
        })
        .collect();
    // The file that defines what `abs` names: its deepest file, followed through that
    // file's re-exports.
    let resolve = |mut abs: Vec<String>| -> Option<usize> {
        for _ in 0..16 {
            let (n, at) = (0..=abs.len())
                .rev()
                .find_map(|n| by_module.get(&abs[..n]).map(|&i| (n, i)))?;
            match abs.get(n).and_then(|name| reexports[at].get(name.as_str())) {
                Some(target) if !abs.starts_with(target) => {
                    abs = target.iter().chain(&abs[n + 1..]).cloned().collect();
                }
                _ => return Some(at),
            }
        }
        None
    };
    let mut edges: Vec<BTreeMap<usize, usize>> = vec![BTreeMap::new(); files.len()];
    for (from, f) in files.iter().enumerate() {
        for x in named[from].iter().filter(|x| !x.reexport) {
            let Some(to) = absolute(&f.module, &x.path).and_then(resolve) else {
                continue;
            };
            let descendant = !f.module.is_empty() && files[to].module.starts_with(&f.module);
            if to != from && !descendant {
                edges[from].entry(to).or_insert(x.line);
            }
        }
    }
    // Tarjan's strongly connected components.
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(v: usize, edges: &[BTreeMap<usize, usize>], s: &mut State) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in edges[v].keys() {
            match s.index[w] {
                None => {
                    visit(w, edges, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(comp);
        }
    }
    let n = files.len();
    let mut s = State {
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(v, &edges, &mut s);
        }
    }
    let mut found = Vec::new();
    for comp in s.out.into_iter().filter(|c| c.len() > 1) {
        let members: BTreeSet<usize> = comp.iter().copied().collect();
        let mut names: Vec<String> = members.iter().map(|&i| files[i].name.clone()).collect();
        names.sort();
        let mut ties = Vec::new();
        for &a in &members {
            for (&b, &line) in &edges[a] {
                if members.contains(&b) {
                    ties.push(format!("{}:{} → {}", files[a].name, line, files[b].name));
                }
            }
        }
        found.push((names, ties));
    }
    found.sort();
    found
}

#[test]
fn no_import_cycle_outside_the_allow_list() {
    let root = repo_root();
    let mut crates: Vec<PathBuf> = fs::read_dir(root.join("crates"))
        .expect("crates/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("src").is_dir())
        .collect();
    crates.sort();
    let mut found: BTreeSet<(String, Vec<String>)> = BTreeSet::new();
    for dir in &crates {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let src = dir.join("src");
        let mut all = Vec::new();
        for root_file in ["lib.rs", "main.rs"] {
            if src.join(root_file).is_file() {
                all.extend(cycles(&module_tree(&src, root_file)));
            }
        }
        if all.is_empty() {
            println!("{name}: no cycle");
        }
        for (files, ties) in all {
            println!(
                "{name}: cycle of {} files: {}",
                files.len(),
                files.join(", ")
            );
            for tie in &ties {
                println!("    {tie}");
            }
            found.insert((name.clone(), files));
        }
    }
    let allowed: BTreeSet<(String, Vec<String>)> = ALLOWED
        .iter()
        .map(|(c, files, _)| (c.to_string(), files.iter().map(|f| f.to_string()).collect()))
        .collect();
    let mut failures = Vec::new();
    for (c, files) in found.difference(&allowed) {
        failures.push(format!("new cycle in {c}: {}", files.join(", ")));
    }
    for (c, files) in allowed.difference(&found) {
        failures.push(format!(
            "allowed cycle no longer found in {c} (shrink ALLOWED): {}",
            files.join(", ")
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn paths_are_read_from_code_only() {
    let code = blank_non_code("use crate::a; // crate::b\nlet s = \"crate::c\"; /* crate::d */ let q = '\"'; r#\"crate::e\"#");
    let toks: Vec<String> = tokens(&code).into_iter().map(|t| t.text).collect();
    assert!(toks.iter().any(|t| t == "a"));
    for gone in ["b", "c", "d", "e"] {
        assert!(!toks.iter().any(|t| t == gone), "{gone} in {toks:?}");
    }
    let stripped = strip_test_items(tokens(
        "fn f() {} #[cfg(test)] mod tests { use super::x; } use crate::y;",
    ))
    .unwrap();
    let texts: Vec<&str> = stripped.iter().map(|t| t.text.as_str()).collect();
    assert!(!texts.contains(&"x") && texts.contains(&"y"), "{texts:?}");
}
