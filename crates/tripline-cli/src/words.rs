//! Counted nouns for output lines: "1 run", "5 runs", "0 calls". Every
//! line the command prints reads as written English, so a count of one is
//! never "1 calls".

/// `n` and `noun`, plural (noun + "s") unless `n` is 1.
pub(crate) fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1, "run"), "1 run");
        assert_eq!(count(0, "run"), "0 runs");
        assert_eq!(count(5, "abandoned probe"), "5 abandoned probes");
    }
}
