//! tmux-style key names to the bytes an xterm-like terminal sends.
//!
//! Grammar: optional modifier prefixes, then a key. Prefixes (any order,
//! repeatable): `C-`/`Ctrl-` (control), `M-`/`Alt-`/`Meta-` (escape prefix),
//! `S-`/`Shift-`. Keys: a single character, or one of `Enter`, `Tab`,
//! `BTab`, `Escape`/`Esc`, `Space`, `BSpace`/`Backspace`, `Up`, `Down`,
//! `Left`, `Right`, `Home`, `End`, `PageUp`/`PgUp`/`PPage`,
//! `PageDown`/`PgDn`/`NPage`, `Insert`/`IC`, `Delete`/`DC`, `F1`..`F12`
//! (named keys are case-insensitive).

use super::TerminalError;

/// How the terminal is currently set up for key input.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyMode {
    /// Application cursor keys (`CSI ? 1 h`): arrows and Home/End are sent
    /// as `ESC O x` instead of `ESC [ x`.
    pub app_cursor: bool,
}

#[derive(Default, Clone, Copy)]
struct Mods {
    ctrl: bool,
    alt: bool,
    shift: bool,
}

impl Mods {
    /// xterm's modifier parameter (`1 + shift + 2*alt + 4*ctrl`), if any.
    fn param(self) -> Option<u8> {
        let p = 1 + self.shift as u8 + 2 * self.alt as u8 + 4 * self.ctrl as u8;
        (p > 1).then_some(p)
    }
}

/// Encode one key name (e.g. `"Enter"`, `"C-c"`, `"M-x"`, `"F5"`, `"Up"`).
pub fn encode(name: &str, mode: KeyMode) -> Result<Vec<u8>, TerminalError> {
    let unknown = || TerminalError::UnknownKey(name.to_string());
    let (mods, key) = split_modifiers(name);
    if key.is_empty() {
        return Err(unknown());
    }

    // A single character (after modifiers).
    let mut chars = key.chars();
    if let (Some(ch), None) = (chars.next(), chars.next()) {
        return encode_char(ch, mods).ok_or_else(unknown);
    }

    let lower = key.to_ascii_lowercase();
    let simple: Option<&[u8]> = match lower.as_str() {
        "enter" => Some(b"\r"),
        "tab" if mods.shift => Some(b"\x1b[Z"),
        "tab" => Some(b"\t"),
        "btab" => Some(b"\x1b[Z"),
        "escape" | "esc" => Some(b"\x1b"),
        "space" => return encode_char(' ', mods).ok_or_else(unknown),
        "bspace" | "backspace" => Some(b"\x7f"),
        _ => None,
    };
    if let Some(bytes) = simple {
        let mut out = Vec::with_capacity(bytes.len() + 1);
        if mods.alt {
            out.push(0x1b);
        }
        out.extend_from_slice(bytes);
        return Ok(out);
    }

    // Cursor keys: `ESC [ A` / `ESC O A`, or `ESC [ 1 ; m A` with modifiers.
    let cursor = match lower.as_str() {
        "up" => Some(b'A'),
        "down" => Some(b'B'),
        "right" => Some(b'C'),
        "left" => Some(b'D'),
        "home" => Some(b'H'),
        "end" => Some(b'F'),
        "f1" => Some(b'P'),
        "f2" => Some(b'Q'),
        "f3" => Some(b'R'),
        "f4" => Some(b'S'),
        _ => None,
    };
    if let Some(final_byte) = cursor {
        let is_fkey = lower.starts_with('f') && lower.len() == 2;
        return Ok(match mods.param() {
            Some(m) => format!("\x1b[1;{m}{}", final_byte as char).into_bytes(),
            None if is_fkey || mode.app_cursor => vec![0x1b, b'O', final_byte],
            None => vec![0x1b, b'[', final_byte],
        });
    }

    // Tilde keys: `ESC [ n ~` or `ESC [ n ; m ~`.
    let tilde = match lower.as_str() {
        "insert" | "ic" => Some(2),
        "delete" | "dc" => Some(3),
        "pageup" | "pgup" | "ppage" => Some(5),
        "pagedown" | "pgdn" | "npage" => Some(6),
        "f5" => Some(15),
        "f6" => Some(17),
        "f7" => Some(18),
        "f8" => Some(19),
        "f9" => Some(20),
        "f10" => Some(21),
        "f11" => Some(23),
        "f12" => Some(24),
        _ => None,
    };
    if let Some(n) = tilde {
        return Ok(match mods.param() {
            Some(m) => format!("\x1b[{n};{m}~").into_bytes(),
            None => format!("\x1b[{n}~").into_bytes(),
        });
    }
    Err(unknown())
}

/// Strip modifier prefixes. A trailing `-` is a key, not a separator
/// (`C--` is Ctrl+minus, `-` is minus).
fn split_modifiers(name: &str) -> (Mods, &str) {
    let mut mods = Mods::default();
    let mut rest = name;
    while let Some((prefix, tail)) = rest.split_once('-') {
        if tail.is_empty() {
            break;
        }
        match prefix.to_ascii_lowercase().as_str() {
            "c" | "ctrl" => mods.ctrl = true,
            "m" | "alt" | "meta" => mods.alt = true,
            "s" | "shift" => mods.shift = true,
            _ => break,
        }
        rest = tail;
    }
    (mods, rest)
}

fn encode_char(ch: char, mods: Mods) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    if mods.alt {
        out.push(0x1b);
    }
    let ch = if mods.shift {
        let mut upper = ch.to_uppercase();
        match (upper.next(), upper.next()) {
            (Some(u), None) => u,
            _ => ch,
        }
    } else {
        ch
    };
    if mods.ctrl {
        let byte = match ch {
            'a'..='z' => ch as u8 - b'a' + 1,
            'A'..='Z' => ch as u8 - b'A' + 1,
            ' ' | '@' | '2' => 0,
            '[' | '3' => 0x1b,
            '\\' | '4' => 0x1c,
            ']' | '5' => 0x1d,
            '^' | '6' => 0x1e,
            '_' | '-' | '7' => 0x1f,
            '?' | '8' => 0x7f,
            _ => return None,
        };
        out.push(byte);
    } else {
        let mut buf = [0u8; 4];
        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(name: &str) -> Vec<u8> {
        encode(name, KeyMode::default()).unwrap()
    }

    #[test]
    fn named_keys() {
        assert_eq!(enc("Enter"), b"\r");
        assert_eq!(enc("enter"), b"\r");
        assert_eq!(enc("Tab"), b"\t");
        assert_eq!(enc("Escape"), b"\x1b");
        assert_eq!(enc("Esc"), b"\x1b");
        assert_eq!(enc("Space"), b" ");
        assert_eq!(enc("BSpace"), b"\x7f");
        assert_eq!(enc("Backspace"), b"\x7f");
        assert_eq!(enc("Up"), b"\x1b[A");
        assert_eq!(enc("Down"), b"\x1b[B");
        assert_eq!(enc("Right"), b"\x1b[C");
        assert_eq!(enc("Left"), b"\x1b[D");
        assert_eq!(enc("Home"), b"\x1b[H");
        assert_eq!(enc("End"), b"\x1b[F");
        assert_eq!(enc("PageUp"), b"\x1b[5~");
        assert_eq!(enc("PageDown"), b"\x1b[6~");
        assert_eq!(enc("Insert"), b"\x1b[2~");
        assert_eq!(enc("Delete"), b"\x1b[3~");
        assert_eq!(enc("F1"), b"\x1bOP");
        assert_eq!(enc("F4"), b"\x1bOS");
        assert_eq!(enc("F5"), b"\x1b[15~");
        assert_eq!(enc("F12"), b"\x1b[24~");
        assert_eq!(enc("BTab"), b"\x1b[Z");
        assert_eq!(enc("S-Tab"), b"\x1b[Z");
    }

    #[test]
    fn application_cursor_mode() {
        let app = KeyMode { app_cursor: true };
        assert_eq!(encode("Up", app).unwrap(), b"\x1bOA");
        assert_eq!(encode("Home", app).unwrap(), b"\x1bOH");
        assert_eq!(encode("PageUp", app).unwrap(), b"\x1b[5~");
    }

    #[test]
    fn control_and_alt() {
        assert_eq!(enc("C-c"), [3]);
        assert_eq!(enc("Ctrl-C"), [3]);
        assert_eq!(enc("Ctrl-x"), [0x18]);
        assert_eq!(enc("C-["), [0x1b]);
        assert_eq!(enc("C-Space"), [0]);
        assert_eq!(enc("M-x"), b"\x1bx");
        assert_eq!(enc("Alt-x"), b"\x1bx");
        assert_eq!(enc("M-C-a"), [0x1b, 1]);
        assert_eq!(enc("M-Enter"), b"\x1b\r");
        assert_eq!(enc("C-Up"), b"\x1b[1;5A");
        assert_eq!(enc("S-F5"), b"\x1b[15;2~");
        assert_eq!(enc("C--"), [0x1f]);
        assert_eq!(enc("-"), b"-");
        assert_eq!(enc("é"), "é".as_bytes());
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_key() {
        for bad in ["Foo", "F13", "C-é", "", "Ctrl-", "X-a"] {
            let err = encode(bad, KeyMode::default()).unwrap_err();
            assert!(
                err.to_string().contains(&format!("{bad:?}")),
                "{bad}: {err}"
            );
        }
    }
}
