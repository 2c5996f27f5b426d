//! A [`StyledScreen`] drawn as SVG: one `<text>` per row with a `<tspan>`
//! per run of one style (each placed at its column, so rows line up in any
//! monospace font), background rectangles, and the cursor. Deterministic,
//! self-contained, every character escaped.

use std::fmt::Write as _;

use super::styled::{Rgb, StyledCell, StyledScreen};

/// Cell size in SVG units.
const CELL_W: f32 = 8.4;
const CELL_H: f32 = 17.0;
/// The baseline's offset in a cell.
const BASELINE: f32 = 13.0;
/// Padding around the grid.
const PAD: f32 = 8.0;
const DEFAULT_FG: Rgb = [0xe5, 0xe5, 0xe5];
const DEFAULT_BG: Rgb = [0x1e, 0x1e, 0x1e];
const CURSOR: Rgb = [0xc0, 0xc0, 0xc0];

fn hex(c: Rgb) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// `s` escaped for XML (and HTML) text and quoted attributes; a control
/// character goes through `control` (shown or dropped), a bidi control or
/// zero-width character (text that would read as something it is not)
/// becomes U+FFFD.
pub fn escape_markup(s: &str, control: impl Fn(char, &mut String)) -> String {
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => control(c, &mut out),
            c if crate::validate::is_invisible(c) => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// [`escape_markup`] for a cell: control characters (none should reach
/// one) are dropped.
fn xml(s: &str) -> String {
    escape_markup(s, |_, _| {})
}

/// The colours a cell is drawn with (inverse applied).
fn colours(c: &StyledCell) -> (Rgb, Option<Rgb>) {
    let fg = c.fg.unwrap_or(DEFAULT_FG);
    if c.inverse {
        (c.bg.unwrap_or(DEFAULT_BG), Some(fg))
    } else {
        (fg, c.bg)
    }
}

/// The screen as an SVG document (an `<svg>` element, no XML prolog, so
/// it can stand inside HTML).
pub fn render(s: &StyledScreen) -> String {
    let width = PAD * 2.0 + CELL_W * f32::from(s.cols);
    let height = PAD * 2.0 + CELL_H * f32::from(s.lines);
    let mut out = String::with_capacity(4096);
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"screen\" viewBox=\"0 0 {width:.1} {height:.1}\" \
         width=\"{width:.1}\" height=\"{height:.1}\" role=\"img\" aria-label=\"terminal screen {}x{}\">\
         <rect width=\"100%\" height=\"100%\" fill=\"{}\"/>",
        s.cols,
        s.lines,
        hex(DEFAULT_BG)
    );
    for (y, row) in s.rows.iter().enumerate() {
        backgrounds(&mut out, y, row);
    }
    if s.cursor_visible {
        let _ = write!(
            out,
            "<rect class=\"cursor\" x=\"{:.1}\" y=\"{:.1}\" width=\"{CELL_W:.1}\" height=\"{CELL_H:.1}\" fill=\"{}\" fill-opacity=\"0.6\"/>",
            PAD + CELL_W * f32::from(s.cursor.1),
            PAD + CELL_H * f32::from(s.cursor.0),
            hex(CURSOR)
        );
    }
    out.push_str(
        "<g font-family=\"ui-monospace, 'DejaVu Sans Mono', Menlo, Consolas, monospace\" font-size=\"14\">",
    );
    for (y, row) in s.rows.iter().enumerate() {
        text_row(&mut out, y, row);
    }
    out.push_str("</g></svg>");
    out
}

/// Rectangles for the row's cells that have a background, merged where
/// neighbours share one.
fn backgrounds(out: &mut String, y: usize, row: &[StyledCell]) {
    let mut col = 0usize;
    let mut run: Option<(usize, usize, Rgb)> = None;
    let flush = |out: &mut String, run: Option<(usize, usize, Rgb)>| {
        if let Some((start, end, c)) = run {
            let _ = write!(
                out,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{CELL_H:.1}\" fill=\"{}\"/>",
                PAD + CELL_W * start as f32,
                PAD + CELL_H * y as f32,
                CELL_W * (end - start) as f32,
                hex(c)
            );
        }
    };
    for cell in row {
        let w = usize::from(cell.width);
        match (colours(cell).1, run) {
            (Some(c), Some((s, e, rc))) if rc == c && e == col => run = Some((s, col + w, c)),
            (Some(c), r) => {
                flush(out, r);
                run = Some((col, col + w, c));
            }
            (None, r) => {
                flush(out, r);
                run = None;
            }
        }
        col += w;
    }
    flush(out, run);
}

/// One `<text>` for the row: runs of one style, each at its column; a
/// wide character is a run of its own. `xml:space="preserve"` sits on
/// each `<text>` (Chromium does not apply it from an enclosing `<g>`), so
/// an indented row keeps its leading and inner spaces.
fn text_row(out: &mut String, y: usize, row: &[StyledCell]) {
    let _ = write!(
        out,
        "<text y=\"{:.1}\" xml:space=\"preserve\">",
        PAD + CELL_H * y as f32 + BASELINE
    );
    let mut col = 0usize;
    let mut i = 0;
    while i < row.len() {
        let first = &row[i];
        let mut text = first.text.clone();
        let mut width = usize::from(first.width);
        let mut j = i + 1;
        while first.width == 1 && j < row.len() && row[j].width == 1 && row[j].same_style(first) {
            text.push_str(&row[j].text);
            width += 1;
            j += 1;
        }
        let (fg, _) = colours(first);
        let mut attrs = format!(" fill=\"{}\"", hex(fg));
        if first.bold {
            attrs.push_str(" font-weight=\"bold\"");
        }
        if first.italic {
            attrs.push_str(" font-style=\"italic\"");
        }
        if first.underline {
            attrs.push_str(" text-decoration=\"underline\"");
        }
        let _ = write!(
            out,
            "<tspan x=\"{:.1}\"{attrs}>{}</tspan>",
            PAD + CELL_W * col as f32,
            xml(&text)
        );
        col += width;
        i = j;
    }
    out.push_str("</text>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::{AlacrittyEmulator, Emulator};

    /// The text of each `<text>` row (tags dropped, entities decoded).
    pub fn svg_text_rows(svg: &str) -> Vec<String> {
        svg.split("<text ")
            .skip(1)
            .map(|t| {
                let inner = &t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()];
                let mut s = String::new();
                let mut tag = false;
                for c in inner.chars() {
                    match c {
                        '<' => tag = true,
                        '>' => tag = false,
                        c if !tag => s.push(c),
                        _ => {}
                    }
                }
                s.replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&quot;", "\"")
                    .replace("&#39;", "'")
                    .replace("&amp;", "&")
            })
            .collect()
    }

    fn svg_of(bytes: &[u8]) -> (String, AlacrittyEmulator) {
        let mut e = AlacrittyEmulator::new(30, 5);
        e.feed(bytes);
        (render(&e.styled()), e)
    }

    #[test]
    fn the_svg_text_is_the_screen_row_by_row() {
        let (svg, e) =
            svg_of("\x1b[1;31mred\x1b[0m  plain\r\n漢字 wide\r\n\x1b[44m bg \x1b[0m x".as_bytes());
        let rows: Vec<String> = svg_text_rows(&svg)
            .into_iter()
            .map(|r| r.trim_end().to_owned())
            .collect();
        assert_eq!(rows, e.snapshot().lines);
        assert!(svg.contains("font-weight=\"bold\" ") || svg.contains("font-weight=\"bold\">"));
        assert!(svg.contains("fill=\"#cd0000\""), "{svg}");
        assert!(
            svg.contains("fill=\"#0000ee\""),
            "the blue background: {svg}"
        );
        assert!(svg.contains("class=\"cursor\""));
    }

    #[test]
    fn xml_hostile_text_is_escaped() {
        let (svg, _) = svg_of(b"<script>&\"' </svg>");
        assert!(
            !svg.contains("<script>") && !svg.contains("</svg><"),
            "{svg}"
        );
        assert_eq!(svg_text_rows(&svg)[0], "<script>&\"' </svg>");
        assert!(svg.ends_with("</svg>") && svg.matches("<svg").count() == 1);
    }

    #[test]
    fn the_rendering_is_deterministic() {
        let (a, _) = svg_of(b"\x1b[32mgreen\x1b[0m");
        let (b, _) = svg_of(b"\x1b[32mgreen\x1b[0m");
        assert_eq!(a, b);
    }
}
