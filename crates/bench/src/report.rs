//! What every benchmark's report shares: medians over runs, columns padded to their widest
//! cell, indented blocks.

use std::fmt::Write as _;

/// `v` sorted in `f64::total_cmp` order.
fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

/// The median of `v` (the mean of the middle two for an even count); 0 when empty.
pub fn median(v: &[f64]) -> f64 {
    let s = sorted(v);
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// The upper median of `v`: the middle value, for an even count the higher of the middle
/// two, so always a value that was measured; 0 when empty.
pub fn upper_median(v: &[f64]) -> f64 {
    sorted(v).get(v.len() / 2).copied().unwrap_or(0.0)
}

/// `rows` as lines, each cell but the last padded to its column's widest cell and followed by
/// three spaces; trailing spaces trimmed.
pub fn columns<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, (c, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}   ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Indents every line of `text` by `n` spaces.
pub fn indent(text: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    text.lines()
        .map(|l| format!("{pad}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn upper_median_of_odd_even_and_empty() {
        assert_eq!(upper_median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(upper_median(&[4.0, 1.0, 3.0, 2.0]), 3.0);
        assert_eq!(upper_median(&[]), 0.0);
    }

    #[test]
    fn columns_pad_all_but_the_last() {
        let rows = [
            ["a".to_string(), "bb".to_string(), "c".to_string()],
            ["ddd".to_string(), "e".to_string(), String::new()],
        ];
        assert_eq!(columns(&rows), "a     bb   c\nddd   e\n");
    }

    #[test]
    fn indent_pads_every_line() {
        assert_eq!(indent("a\nb", 2), "  a\n  b");
    }
}
