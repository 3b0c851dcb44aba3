//! The documentation's relative links. Every link of README.md, ARCHITECTURE.md and
//! docs/*.md that names no scheme (`[text](path)`, `![alt](path)`, `[label]: path`) must
//! reach a file or folder of the repository, and its `#anchor`, where the target is a
//! Markdown file, must be one of that file's headings as GitHub names them: lowercase,
//! punctuation dropped except `-` and `_`, each space a `-`, a repeated heading `-1`,
//! `-2`, ... (`<a name>`/`id` anchors count too). Code is not read for links: fenced
//! blocks and code spans are skipped. A failure prints one line per dead link,
//! `file:line: target (why)`, paths from the repository root.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The repository root: two levels above this crate.
fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().expect("the repository root")
}

/// The documents whose links are checked: README.md, ARCHITECTURE.md, docs/**/*.md.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md"]
        .iter()
        .map(|f| root.join(f))
        .filter(|p| p.is_file())
        .collect();
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|e| e == "md") {
                docs.push(p);
            }
        }
    }
    docs.sort();
    docs
}

/// The text with everything that is code blanked out (fenced blocks, code spans), line
/// breaks kept, so that positions still give line numbers.
fn mask_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<(char, usize)> = None;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start_matches(' ');
        let marker = ['`', '~'].into_iter().find_map(|c| {
            let n = t.chars().take_while(|&x| x == c).count();
            (n >= 3 && line.len() - t.len() <= 3).then_some((c, n))
        });
        let in_code = match (fence, marker) {
            (None, Some(open)) => {
                fence = Some(open);
                true
            }
            (None, None) => false,
            (Some((c, n)), Some((c2, n2))) if c == c2 && n2 >= n && t[n2..].trim().is_empty() => {
                fence = None;
                true
            }
            (Some(_), _) => true,
        };
        if in_code {
            out.extend(line.chars().map(|c| if c == '\n' { '\n' } else { ' ' }));
        } else {
            out.push_str(line);
        }
    }
    mask_code_spans(&out)
}

/// Blanks out code spans: a run of n backticks up to the next run of exactly n within the
/// same paragraph (a run without a partner is literal text).
fn mask_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = chars.clone();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        let n = chars[i..].iter().take_while(|&&c| c == '`').count();
        let mut j = i + n;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '\n'
                && chars[j + 1..]
                    .iter()
                    .take_while(|&&c| c != '\n')
                    .all(|c| c.is_whitespace())
            {
                break; // a blank line ends the paragraph
            }
            if chars[j] == '`' {
                let m = chars[j..].iter().take_while(|&&c| c == '`').count();
                if m == n {
                    close = Some(j + m);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                for c in &mut out[i..end] {
                    if *c != '\n' {
                        *c = ' ';
                    }
                }
                i = end;
            }
            None => i += n,
        }
    }
    out.into_iter().collect()
}

/// The link destinations of a document, each with its line (1-based).
fn links(text: &str) -> Vec<(usize, String)> {
    let masked = mask_code(text);
    let line_of = |pos: usize| masked[..pos].matches('\n').count() + 1;
    let mut found = Vec::new();
    // Inline links and images: `](destination)`.
    let mut from = 0;
    while let Some(k) = masked[from..].find("](") {
        let start = from + k + 2;
        from = start;
        let rest = masked[start..].trim_start_matches([' ', '\t']);
        let dest = if let Some(r) = rest.strip_prefix('<') {
            r.split('>').next().unwrap_or("").to_string()
        } else {
            let mut depth = 0usize;
            rest.chars()
                .take_while(|&c| match c {
                    '(' => {
                        depth += 1;
                        true
                    }
                    ')' if depth == 0 => false,
                    ')' => {
                        depth -= 1;
                        true
                    }
                    c => !c.is_whitespace(),
                })
                .collect()
        };
        found.push((line_of(start), dest));
    }
    // Reference definitions: `[label]: destination` at the start of a line.
    for (i, line) in masked.lines().enumerate() {
        let t = line.trim_start_matches(' ');
        if line.len() - t.len() > 3 || !t.starts_with('[') {
            continue;
        }
        if let Some(end) = t.find("]:") {
            if !t[1..end].contains(']') && end > 1 {
                let dest = t[end + 2..].split_whitespace().next().unwrap_or("");
                found.push((
                    i + 1,
                    dest.trim_start_matches('<')
                        .trim_end_matches('>')
                        .to_string(),
                ));
            }
        }
    }
    found.sort_by_key(|(line, _)| *line);
    found
}

/// GitHub's anchor for a heading's text: inline markup reduced to its text, lowercase,
/// every character but letters, digits, `-`, `_` and space dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    // `[text](url)` reads as its text.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](") else {
            break;
        };
        let Some(close) = rest[open + mid..].find(')') else {
            break;
        };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..open + mid]);
        rest = &rest[open + mid + close + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The text of an ATX heading line (`## Text ##`), or None.
fn atx_heading(line: &str) -> Option<&str> {
    let t = line.trim_start_matches(' ');
    let hashes = t.chars().take_while(|&c| c == '#').count();
    let rest = &t[hashes..];
    if line.len() - t.len() > 3
        || !(1..=6).contains(&hashes)
        || !rest.chars().next().is_none_or(char::is_whitespace)
    {
        return None;
    }
    let body = rest.trim();
    // An optional closing sequence of #s, after a space.
    let open = body.trim_end_matches('#');
    Some(if open.is_empty() || open.ends_with(' ') {
        open.trim_end()
    } else {
        body
    })
}

/// The anchors of a Markdown document: its headings' slugs (ATX and setext, a repeated
/// one numbered as GitHub numbers it) and the names of its `<a name>`/`id` anchors.
fn anchors(text: &str) -> HashSet<String> {
    let masked = mask_code(text);
    let masked: Vec<&str> = masked.lines().collect();
    let original: Vec<&str> = text.lines().collect();
    let mut seen = HashSet::new();
    let mut anchors = HashSet::new();
    let mut add = |base: String| {
        let mut s = base.clone();
        let mut n = 0;
        while !seen.insert(s.clone()) {
            n += 1;
            s = format!("{base}-{n}");
        }
        anchors.insert(s);
    };
    for (i, line) in masked.iter().enumerate() {
        // The heading's text is read from the original line: code spans keep their text.
        if atx_heading(line).is_some() {
            add(slug(atx_heading(original[i]).unwrap_or("")));
            continue;
        }
        let t = line.trim();
        let underline =
            !t.is_empty() && (t.chars().all(|c| c == '=') || t.chars().all(|c| c == '-'));
        if underline && i > 0 && line.len() - line.trim_start().len() <= 3 {
            let above = masked[i - 1].trim();
            if !above.is_empty() && atx_heading(masked[i - 1]).is_none() && !above.starts_with('|')
            {
                add(slug(original[i - 1].trim()));
            }
        }
    }
    for line in &masked {
        for attr in ["name=\"", "id=\""] {
            let mut from = 0;
            while let Some(k) = line[from..].find(attr) {
                let start = from + k + attr.len();
                if let Some(end) = line[start..].find('"') {
                    anchors.insert(line[start..start + end].to_string());
                }
                from = start;
            }
        }
    }
    anchors
}

/// `%20` and friends in a link's path.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            if let Some(b) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// One line per dead relative link in `docs`, `file:line: target (why)`, and the number
/// of relative links looked at.
fn dead_links(root: &Path, docs: &[PathBuf]) -> (Vec<String>, usize) {
    let rel = |p: &Path| p.strip_prefix(root).unwrap_or(p).display().to_string();
    let mut dead = Vec::new();
    let mut checked = 0;
    for doc in docs {
        let text = fs::read_to_string(doc).expect("a readable document");
        for (line, target) in links(&text) {
            let scheme = target.split_once(':').is_some_and(|(s, _)| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
            });
            if scheme || target.starts_with("//") {
                continue; // not relative: another tool's business
            }
            checked += 1;
            let mut report =
                |why: String| dead.push(format!("{}:{line}: {target} ({why})", rel(doc)));
            if target.is_empty() {
                report("empty link".into());
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let path = percent_decode(path);
            let file = if path.is_empty() {
                doc.clone()
            } else if let Some(from_root) = path.strip_prefix('/') {
                root.join(from_root)
            } else {
                doc.parent().unwrap_or(root).join(&path)
            };
            let Ok(file) = file.canonicalize() else {
                report("no such file".into());
                continue;
            };
            if !file.starts_with(root) {
                report("outside the repository".into());
                continue;
            }
            let Some(anchor) = anchor else {
                continue;
            };
            if file.extension().is_some_and(|e| e == "md") && file.is_file() {
                let target_text = fs::read_to_string(&file).expect("a readable target");
                if !anchors(&target_text).contains(anchor) {
                    report(format!("no heading #{anchor} in {}", rel(&file)));
                }
            }
        }
    }
    (dead, checked)
}

#[test]
fn docs_every_relative_link_reaches_its_file_and_heading() {
    let root = repo_root();
    let docs = documents(&root);
    assert!(
        docs.len() >= 2,
        "README.md and ARCHITECTURE.md not found under {}",
        root.display()
    );
    let (dead, checked) = dead_links(&root, &docs);
    println!(
        "{checked} relative links checked in {} documents",
        docs.len()
    );
    assert!(
        dead.is_empty(),
        "{} dead links:\n{}",
        dead.len(),
        dead.join("\n")
    );
}

/// A scratch tree under the temporary directory, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn tree_with_a_missing_file_and_a_missing_heading_reports_both_with_their_lines() {
    let dir = std::env::temp_dir().join(format!("corestack-docs-links-{}", std::process::id()));
    let scratch = Scratch(dir.clone());
    fs::create_dir_all(dir.join("docs/plots")).expect("scratch tree");
    fs::write(dir.join("docs/plots/a.svg"), "<svg/>").expect("scratch file");
    fs::write(
        dir.join("README.md"),
        "# Top\n\n[ok](docs/guide.md#the-corestack-command) and [here](#top)\n\
         [gone](docs/missing.md)\n`[in code](nowhere.md)`\n```\n[fenced](nowhere.md)\n```\n\
         [bad anchor](docs/guide.md#no-such-part) ![pic](docs/plots/a.svg) [web](https://example.org/x)\n\
         [ref]: docs/guide.md#twice-1\n",
    )
    .expect("scratch file");
    fs::write(
        dir.join("docs/guide.md"),
        "# The `corestack` command\n\n## Twice\n\n## Twice\n\n[back](../README.md#top) [up](../../elsewhere.md)\n",
    )
    .expect("scratch file");
    let root = dir.canonicalize().expect("scratch root");
    let (dead, checked) = dead_links(&root, &documents(&root));
    assert_eq!(
        dead,
        [
            "README.md:4: docs/missing.md (no such file)",
            "README.md:9: docs/guide.md#no-such-part (no heading #no-such-part in docs/guide.md)",
            "docs/guide.md:7: ../../elsewhere.md (no such file)",
        ]
    );
    assert_eq!(checked, 8);
    drop(scratch);
}

#[test]
fn headings_with_code_punctuation_and_repeats_slug_as_github_does() {
    assert_eq!(slug("The `corestack` command"), "the-corestack-command");
    assert_eq!(slug("Many cores: `--cores N`"), "many-cores---cores-n");
    assert_eq!(
        slug("Running unmodified programs: `corestack exec`"),
        "running-unmodified-programs-corestack-exec"
    );
    assert_eq!(slug("What's new? (2026)"), "whats-new-2026");
    assert_eq!(slug("See [the shim](shim.md) now"), "see-the-shim-now");
    assert_eq!(slug("snake_case and µs"), "snake_case-and-µs");
    let a = anchors(
        "# A\n\n## A\n\n```\n# not a heading\n```\nSetext\n---\n<a name=\"x\"></a>\n## Closed ##\n",
    );
    for want in ["a", "a-1", "setext", "x", "closed"] {
        assert!(a.contains(want), "{want} missing from {a:?}");
    }
    assert!(!a.contains("not-a-heading"));
}
