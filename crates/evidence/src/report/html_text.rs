//! Text in HTML: every value the report takes from a bundle is escaped
//! here, in element content and in attribute values alike.

/// `s` escaped for HTML element content and quoted attribute values;
/// control characters other than line ends and tabs are shown as their
/// Unicode control pictures.
pub fn h(s: &str) -> String {
    use crate::journal::inert_markdown::picture;
    crate::terminal::svg::escape_markup(s, |c, out| match c {
        '\n' | '\t' => out.push(c),
        c => out.push(picture(c).unwrap_or('\u{fffd}')),
    })
}

/// `s` escaped as [`h`] does, on one line: line ends and tabs are shown
/// as their control pictures too (a name, never a block of output).
pub fn h_inline(s: &str) -> String {
    use crate::journal::inert_markdown::picture;
    crate::terminal::svg::escape_markup(s, |c, out| out.push(picture(c).unwrap_or('\u{fffd}')))
}

/// `s` as the content of a `<script type="application/json">` element:
/// JSON whose `<`, `>` and `&` are escaped, so no text can close the
/// element or start a comment.
pub fn json_in_script(value: &serde_json::Value) -> String {
    value
        .to_string()
        .replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_value_can_open_an_element_or_leave_an_attribute() {
        let e = h("<script>alert('x')</script> \"a\" & \u{1b}[31m \u{202E}txt.exe");
        assert!(!e.contains('<') && !e.contains('>') && !e.contains('"'));
        assert!(!e.contains('\u{1b}') && !e.contains('\u{202E}'));
        let j = json_in_script(&serde_json::json!({"t": "</script><!--"}));
        assert!(!j.contains("</") && !j.contains("<!--"), "{j}");
        let back: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(back["t"], "</script><!--");
    }
}
