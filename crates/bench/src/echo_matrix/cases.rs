//! The impairment cases of `bench echo-matrix`: one setting of `corestack impair` each, the
//! same in both directions, and the `--cases` that picks some.

use anyhow::{anyhow, bail, Result};
use serde::Serialize;

/// One impairment setting of the bridge (each direction alike).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Case {
    /// Short name for `--cases`.
    pub key: &'static str,
    /// Name in the table.
    pub name: &'static str,
    /// Frames dropped, percent.
    pub loss: f64,
    /// Frames held back behind a later one, percent.
    pub reorder: f64,
    /// Frames sent twice, percent.
    pub duplicate: f64,
    /// Frames with one bit flipped, percent.
    pub corrupt: f64,
    /// Delay added in each direction (one way), µs.
    pub delay_us: u64,
}

/// No impairment: the bridge's own cost.
pub(super) const CLEAN: Case = Case {
    key: "clean",
    name: "clean",
    loss: 0.0,
    reorder: 0.0,
    duplicate: 0.0,
    corrupt: 0.0,
    delay_us: 0,
};

/// Every case, in table order.
pub const CASES: [Case; 9] = [
    CLEAN,
    Case {
        key: "loss0.1",
        name: "loss 0.1 %",
        loss: 0.1,
        ..CLEAN
    },
    Case {
        key: "loss1",
        name: "loss 1 %",
        loss: 1.0,
        ..CLEAN
    },
    Case {
        key: "loss5",
        name: "loss 5 %",
        loss: 5.0,
        ..CLEAN
    },
    Case {
        key: "delay10-loss1",
        name: "10 ms + loss 1 %",
        loss: 1.0,
        delay_us: 10_000,
        ..CLEAN
    },
    Case {
        key: "delay2-reorder5",
        name: "2 ms + reorder 5 %",
        reorder: 5.0,
        delay_us: 2_000,
        ..CLEAN
    },
    Case {
        key: "dup1",
        name: "duplicate 1 %",
        duplicate: 1.0,
        ..CLEAN
    },
    Case {
        key: "corrupt0.1",
        name: "corrupt 0.1 %",
        corrupt: 0.1,
        ..CLEAN
    },
    Case {
        key: "all-at-once",
        name: "all at once",
        loss: 1.0,
        reorder: 5.0,
        duplicate: 1.0,
        corrupt: 0.1,
        delay_us: 10_000,
    },
];

/// Lower case, without spaces and `%`: how `--cases` names are compared.
fn normalize(s: &str) -> String {
    s.chars()
        .filter(|c| !c.is_whitespace() && *c != '%')
        .flat_map(char::to_lowercase)
        .collect()
}

/// The cases `--cases` names, in table order; `all` is every case.
pub fn select_cases(arg: &str) -> Result<Vec<Case>> {
    if normalize(arg) == "all" {
        return Ok(CASES.to_vec());
    }
    let mut wanted = Vec::new();
    for part in arg.split(',').filter(|p| !p.trim().is_empty()) {
        let n = normalize(part);
        let case = CASES
            .iter()
            .find(|c| normalize(c.key) == n || normalize(c.name) == n)
            .ok_or_else(|| {
                let keys: Vec<&str> = CASES.iter().map(|c| c.key).collect();
                anyhow!(
                    "no case {part:?} (--cases takes all, or some of: {})",
                    keys.join(", ")
                )
            })?;
        if !wanted.contains(&case.key) {
            wanted.push(case.key);
        }
    }
    if wanted.is_empty() {
        bail!("--cases names no case");
    }
    Ok(CASES
        .iter()
        .filter(|c| wanted.contains(&c.key))
        .copied()
        .collect())
}

impl Case {
    /// `corestack impair` arguments for this case with bridge seed `seed`.
    pub(super) fn impair_args(&self, seed: u64) -> Vec<String> {
        let mut v = Vec::new();
        for (flag, pct) in [
            ("--loss", self.loss),
            ("--reorder", self.reorder),
            ("--duplicate", self.duplicate),
            ("--corrupt", self.corrupt),
        ] {
            if pct > 0.0 {
                v.extend([flag.to_string(), pct.to_string()]);
            }
        }
        if self.delay_us > 0 {
            v.extend(["--delay-us".to_string(), self.delay_us.to_string()]);
        }
        v.extend(["--seed".to_string(), seed.to_string()]);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_cases_by_key_or_name_in_table_order() {
        let keys =
            |arg: &str| -> Vec<&str> { select_cases(arg).unwrap().iter().map(|c| c.key).collect() };
        assert_eq!(keys("all").len(), CASES.len());
        assert_eq!(keys("loss 1%,clean"), ["clean", "loss1"]);
        assert_eq!(keys("Loss 0.1 %, loss1, loss1"), ["loss0.1", "loss1"]);
        assert_eq!(keys("10 ms + loss 1 %"), ["delay10-loss1"]);
        let err = select_cases("clean,nosuch").unwrap_err().to_string();
        assert!(
            err.contains("nosuch") && err.contains("delay2-reorder5"),
            "{err}"
        );
        assert!(select_cases(",").is_err());
    }

    #[test]
    fn impair_args_carry_only_what_the_case_sets_and_the_seed() {
        let all = CASES.iter().find(|c| c.key == "all-at-once").unwrap();
        assert_eq!(
            all.impair_args(7).join(" "),
            "--loss 1 --reorder 5 --duplicate 1 --corrupt 0.1 --delay-us 10000 --seed 7"
        );
        assert_eq!(CLEAN.impair_args(5).join(" "), "--seed 5");
    }
}
