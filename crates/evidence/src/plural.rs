//! Counts as people write them: "1 sandbox", "2 sandboxes", "0 files".

/// `n` followed by `one` when it is 1, `many` otherwise.
pub fn count<N>(n: N, one: &str, many: &str) -> String
where
    N: std::fmt::Display + PartialEq + From<u8>,
{
    let word = if n == N::from(1) { one } else { many };
    format!("{n} {word}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_is_singular_and_everything_else_plural() {
        assert_eq!(super::count(1u32, "sandbox", "sandboxes"), "1 sandbox");
        assert_eq!(super::count(0u32, "sandbox", "sandboxes"), "0 sandboxes");
        assert_eq!(super::count(2u64, "file", "files"), "2 files");
    }
}
