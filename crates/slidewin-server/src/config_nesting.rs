//! A config's flow nesting, measured before it is parsed.
//!
//! The YAML scanner under `yaml_serde` takes time quadratic in the depth of nested flow
//! collections (`[[[[...` or `{a: {a: ...`), and reads them all before `yaml_serde`'s own
//! recursion limit (128) can refuse the document: 50,000 levels of `{a: ` (250 KB) took 31 s
//! in a release build, and a 4 MiB file would take hours. So a config is scanned first, in one
//! pass, for the depth the YAML scanner would reach, and refused at the first bracket past
//! [`Config::MAX_FLOW_NESTING`]. Block nesting needs no such bound: it costs the scanner linear time.
//!
//! The pass knows YAML only as far as bracket counting needs: comments, quoted scalars, block
//! scalars, and where a node may start (a `[` inside a block-context plain scalar, `a[b`, is
//! text). Where it cannot tell, it counts, so a text it passes never nests deeper; the one
//! such case, brackets on a plain scalar's continuation line, must be unbalanced by more than
//! a hundred levels to be refused.

/// The byte offset of the first `[` or `{` in `text` that opens a flow collection deeper than
/// `max`, if any.
pub(crate) fn too_deep(text: &str, max: usize) -> Option<usize> {
    let b = text.as_bytes();
    let blank = |at: usize| {
        b.get(at)
            .is_none_or(|c| matches!(c, b' ' | b'\t' | b'\r' | b'\n'))
    };
    let mut depth = 0_usize;
    // Whether a node (a quoted scalar, a flow collection, a block scalar) may start here.
    let mut at_start = true;
    let mut line_start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                line_start = i + 1;
                // In block context each line may start a node; in flow context a line break
                // is a space.
                at_start |= depth == 0;
            }
            b' ' | b'\t' | b'\r' => {}
            b'#' if i == 0 || blank(i - 1) => {
                i = line_end(b, i);
                continue;
            }
            quote @ (b'\'' | b'"') if at_start => {
                i = quoted_end(b, i, quote);
                at_start = false;
                continue;
            }
            b'[' | b'{' if at_start || depth > 0 => {
                depth += 1;
                if depth > max {
                    return Some(i);
                }
                at_start = true;
            }
            b']' | b'}' if depth > 0 => {
                depth -= 1;
                at_start = false;
            }
            b',' | b':' if depth > 0 => at_start = true,
            b'-' | b'?' | b':' if blank(i + 1) => at_start = true,
            b'-' if i == line_start && b[i..].starts_with(b"---") && blank(i + 3) => {
                i += 3;
                at_start = true;
                continue;
            }
            b'|' | b'>' if at_start && depth == 0 => {
                i = block_scalar_end(b, line_start, i);
                line_start = i;
                continue;
            }
            // A tag or an anchor: the node it qualifies is still to come.
            b'!' | b'&' if at_start => {
                while i < b.len() && !blank(i) {
                    i += 1;
                }
                continue;
            }
            _ => at_start = false,
        }
        i += 1;
    }
    None
}

/// Where the line holding `at` ends: its `\n`, or the text's end.
fn line_end(b: &[u8], at: usize) -> usize {
    b[at..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |n| at + n)
}

/// Just past the quoted scalar opening at `at` (`''` is a quote in single quotes, `\` escapes
/// in double ones); the text's end if it is never closed.
fn quoted_end(b: &[u8], at: usize, quote: u8) -> usize {
    let mut i = at + 1;
    while i < b.len() {
        match b[i] {
            b'\\' if quote == b'"' => i += 1,
            c if c == quote => {
                if quote == b'\'' && b.get(i + 1) == Some(&b'\'') {
                    i += 1;
                } else {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// The start of the first line after the block scalar whose indicator (`|` or `>`) is at
/// `at`, on the line starting at `line_start`: its content is the following lines that are
/// blank or indented deeper than that line.
fn block_scalar_end(b: &[u8], line_start: usize, at: usize) -> usize {
    let indent = |from: usize| b[from..].iter().take_while(|&&c| c == b' ').count();
    let own = indent(line_start);
    let mut next = line_end(b, at) + 1;
    while next < b.len() {
        let end = line_end(b, next);
        let line = &b[next..end];
        let is_blank = line.iter().all(|c| matches!(c, b' ' | b'\t' | b'\r'));
        if !is_blank && indent(next) <= own {
            return next;
        }
        next = end + 1;
    }
    b.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn depth_ok(text: &str, max: usize) -> bool {
        too_deep(text, max).is_none()
    }

    #[test]
    fn flow_collections_count_and_the_first_past_the_bound_is_named() {
        assert_eq!(too_deep("[[[]]]", 3), None);
        assert_eq!(too_deep("[[[[]]]]", 3), Some(3));
        assert_eq!(too_deep("a: {b: [{c: [1]}]}", 3), Some(12));
        assert_eq!(too_deep("a: {b: [{c: [1]}]}", 4), None);
        // Siblings do not add up.
        assert!(depth_ok(&"[[]], ".repeat(1_000), 2));
        // Multi-line flow, JSON style, tags and anchors before a collection.
        assert_eq!(too_deep("k: [\n  {\"a\":[\n[1]]}]", 3), Some(14));
        assert_eq!(too_deep("k: !!seq &x [[[1]]]", 2), Some(14));
        assert_eq!(too_deep("--- [[1]]", 1), Some(5));
    }

    #[test]
    fn brackets_in_text_do_not_count() {
        let text = "\
# [[[[[[ a comment
a: x[[[[[ # a plain scalar, then a comment [[[[
b: '[[[[[ it''s quoted'
c: \"[[[[[ \\\" still quoted\"
d: |
  [[[[[ a block scalar

  [[[[[ still in it
e: >-
  {{{{{
f: [it's, \"[[[[\", '{{{{', a#b]
- [x]
";
        assert!(depth_ok(text, 1), "{:?}", too_deep(text, 1));
        // And what follows them still counts.
        assert_eq!(
            too_deep(&format!("{text}g: [[1]]"), 1),
            Some(text.len() + 4)
        );
    }

    #[test]
    fn a_million_brackets_are_refused_at_the_bound() {
        let text = "[".repeat(1_000_000);
        assert_eq!(
            too_deep(&text, Config::MAX_FLOW_NESTING),
            Some(Config::MAX_FLOW_NESTING)
        );
        let closed = format!("{}{}", "[".repeat(100), "]".repeat(100)).repeat(10_000);
        assert!(depth_ok(&closed, Config::MAX_FLOW_NESTING));
    }
}
