//! The emulator against tmux as an oracle: the same byte streams go to
//! `AlacrittyEmulator` and to a real tmux pane; screens, cursor and
//! alternate-screen state must agree. Requires tmux (fails if missing).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rfs::terminal::{AlacrittyEmulator, Emulator};

const COLS: u16 = 80;
const ROWS: u16 = 24;

/// A private tmux server on a socket in its own temporary directory; the
/// server is killed and the directory removed on drop.
struct Tmux {
    socket: String,
    _dir: tempfile::TempDir,
}

impl Tmux {
    fn start() -> Self {
        match Command::new("tmux").arg("-V").output() {
            Ok(out) if out.status.success() => {}
            other => panic!(
                "tmux is required for this test (install it, e.g. `apt-get install tmux`): {other:?}"
            ),
        }
        let dir = tempfile::tempdir().expect("socket dir");
        Tmux {
            socket: dir.path().join("tmux.sock").display().to_string(),
            _dir: dir,
        }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-S", &self.socket, "-f", "/dev/null"])
            .env("TERM", "xterm-256color")
            .env_remove("TMUX");
        c
    }

    fn run(&self, args: &[&str]) -> String {
        let out: Output = self.cmd().args(args).output().expect("run tmux");
        assert!(
            out.status.success(),
            "tmux {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("tmux output is UTF-8")
    }

    /// Show `bytes` verbatim (no output post-processing) in a new 80x24 pane
    /// and return (lines, cursor, alternate screen on).
    fn render(&self, name: &str, file: &Path) -> (Vec<String>, (u16, u16), bool) {
        let shell = format!(
            "stty -opost; cat '{}'; tmux -S '{}' wait-for -S {name}; sleep 100",
            file.display(),
            self.socket
        );
        self.run(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "80",
            "-y",
            "24",
            &shell,
        ]);
        let size = self.run(&["display", "-p", "-t", name, "#{pane_width}x#{pane_height}"]);
        assert_eq!(size.trim(), "80x24", "tmux pane size");

        // Wait for `cat` to finish, then for tmux to have parsed everything.
        let mut waiter = self
            .cmd()
            .args(["wait-for", name])
            .stdout(Stdio::null())
            .spawn()
            .expect("tmux wait-for");
        let deadline = Instant::now() + Duration::from_secs(10);
        while waiter.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "tmux pane {name} never finished");
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut last = String::new();
        loop {
            std::thread::sleep(Duration::from_millis(60));
            let now = self.run(&["capture-pane", "-p", "-t", name])
                + self
                    .run(&[
                        "display",
                        "-p",
                        "-t",
                        name,
                        "#{cursor_y} #{cursor_x} #{alternate_on}",
                    ])
                    .as_str();
            if now == last {
                break;
            }
            assert!(Instant::now() < deadline, "tmux pane {name} never settled");
            last = now;
        }
        let mut lines: Vec<String> = last.lines().map(|l| l.trim_end().to_string()).collect();
        let status = lines.pop().expect("cursor line");
        let nums: Vec<u16> = status.split(' ').map(|n| n.parse().unwrap()).collect();
        lines.resize(ROWS as usize, String::new());
        (lines, (nums[0], nums[1]), nums[2] == 1)
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").stderr(Stdio::null()).status();
    }
}

/// Byte streams covering what full-screen programs do.
fn cases() -> Vec<(&'static str, Vec<u8>)> {
    let mut fill = Vec::new();
    for i in 0..ROWS {
        write!(fill, "\x1b[{};1H{}", i + 1, format!("{i:02}").repeat(40)).unwrap();
    }
    let with_fill = |tail: &str| [fill.clone(), tail.as_bytes().to_vec()].concat();
    let mut numbered = Vec::new();
    for i in 0..30 {
        write!(numbered, "line {i}\r\n").unwrap();
    }
    vec![
        (
            "cursor_movement",
            b"abc\x1b[5;10Hxy\x1b[2Aup\x1b[3Cright\x1b[10Dl\x1b[Hhome\x1b[20Gcol20\x1b[10dline10\x1b[2Bdown\x1b[E\x1b[3;3f!".to_vec(),
        ),
        (
            "colours",
            b"\x1b[31mred\x1b[0m \x1b[1;4;42mbold\x1b[0m \x1b[38;5;196m256\x1b[38;2;1;2;3mrgb\x1b[m\r\n\x1b[7minverse\x1b[27m \x1b[2mdim\x1b[22m next".to_vec(),
        ),
        ("save_restore_esc_7_8", b"start\x1b7\x1b[10;10Hmoved\x1b8after".to_vec()),
        ("save_restore_csi_s_u", b"start\x1b[s\x1b[10;10Hmoved\x1b[uafter".to_vec()),
        (
            "alternate_screen_on",
            b"main text\r\nline2\x1b[?1049h\x1b[Halt content\x1b[5;5Hmore".to_vec(),
        ),
        (
            "alternate_screen_round_trip",
            b"main text\r\nline2\x1b[?1049h\x1b[2J\x1b[Halt content\x1b[5;5Hmore\x1b[?1049lback".to_vec(),
        ),
        (
            "wide_cjk_and_emoji",
            "中文字符 テスト\r\n😀 emoji 🎉 done\r\n\x1b[3;80H中x\x1b[6;79H界y\x1b[8;1H한국어"
                .as_bytes()
                .to_vec(),
        ),
        (
            "combining_marks",
            "e\u{301} a\u{308} n\u{303}|\r\ncafe\u{301} re\u{301}sume\u{301}|\x1b[5;1Hx\u{301}\u{302}y"
                .as_bytes()
                .to_vec(),
        ),
        (
            "dec_line_drawing",
            b"\x1b(0lqqwqqk\r\nx  x  x\r\ntqqnqqu\r\nmqqvqqj\x1b(B plain lqk".to_vec(),
        ),
        (
            "scroll_region",
            [
                numbered.clone(),
                b"\x1b[5;10r\x1b[10;1H\nnew1\nnew2\x1b[5;1H\x1bMrev\x1b[r\x1b[24;1Hbottom".to_vec(),
            ]
            .concat(),
        ),
        ("scroll_up_down", [numbered.clone(), b"\x1b[3S\x1b[1T\x1b[Htop".to_vec()].concat()),
        (
            "erase",
            with_fill("\x1b[3;5H\x1b[K\x1b[4;5H\x1b[1K\x1b[5;1H\x1b[2K\x1b[6;3H\x1b[4X\x1b[20;10H\x1b[J"),
        ),
        ("erase_above", with_fill("\x1b[6;7H\x1b[1J")),
        ("erase_display", with_fill("\x1b[2J\x1b[5;5Hafter")),
        (
            "insert_delete",
            with_fill("\x1b[3;1H\x1b[2L\x1b[8;1H\x1b[3M\x1b[12;5H\x1b[3@ins\x1b[14;5H\x1b[4P"),
        ),
        (
            "autowrap_and_pending_wrap",
            format!(
                "{}Z\r\n{}\x1b[24;1H{}",
                "a".repeat(80),
                "b".repeat(80),
                "c".repeat(85)
            )
            .into_bytes(),
        ),
        ("tabs", b"a\tb\tc\r\n\x1b[3g\x1b[5G\x1bH\rx\ty\r\n\t\tz".to_vec()),
        (
            "origin_mode",
            b"\x1b[5;15r\x1b[?6h\x1b[1;1Horigin\x1b[?6l\x1b[r\x1b[1;1Hhome".to_vec(),
        ),
        (
            "osc_and_noise",
            b"\x1b]0;title\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ \x1b[?2004h\x1bP+q544e\x1b\\text\x1b[?25l".to_vec(),
        ),
        ("backspace_and_cr", b"hello\x08\x08XY\rA\r\n12345\x1b[3D\x1b[K".to_vec()),
    ]
}

/// tmux's plain capture prints DEC special graphics as their ASCII source
/// letters; map the emulator's box drawing back for comparison.
fn to_acs(line: &str) -> String {
    line.chars()
        .map(|c| match c {
            '┌' => 'l',
            '─' => 'q',
            '┐' => 'k',
            '│' => 'x',
            '└' => 'm',
            '┘' => 'j',
            '┬' => 'w',
            '┴' => 'v',
            '├' => 't',
            '┤' => 'u',
            '┼' => 'n',
            c => c,
        })
        .collect()
}

#[test]
fn emulator_matches_tmux() {
    let tmux = Tmux::start();
    let dir = tempfile::tempdir().unwrap();
    let mut mismatches = Vec::new();
    for (i, (name, bytes)) in cases().into_iter().enumerate() {
        let file = dir.path().join(format!("{name}.bin"));
        std::fs::write(&file, &bytes).unwrap();
        let (tmux_lines, tmux_cursor, tmux_alt) = tmux.render(&format!("c{i}"), &file);

        let mut emu = AlacrittyEmulator::new(COLS, ROWS);
        // Feed in small odd-sized chunks to exercise split sequences.
        for chunk in bytes.chunks(7) {
            emu.feed(chunk);
        }
        let screen = emu.snapshot();
        // After writing the last column the cursor is "pending wrap": tmux
        // reports column 80, xterm (and its `CSI 6 n` answer) column 79.
        let tmux_cursor = (tmux_cursor.0, tmux_cursor.1.min(COLS - 1));
        let mut ours = screen.lines.clone();
        if name == "dec_line_drawing" {
            assert_eq!(
                ours[0], "┌──┬──┐",
                "DEC graphics are rendered as box drawing"
            );
            assert!(
                ours[3].ends_with("┘ plain lqk"),
                "ESC ( B switches back: {}",
                ours[3]
            );
            ours = ours.iter().map(|l| to_acs(l)).collect();
        }
        if ours != tmux_lines || screen.cursor != tmux_cursor || screen.alt_screen != tmux_alt {
            let mut diff = format!(
                "case {name}: cursor ours {:?} tmux {:?}; alt ours {} tmux {}\n",
                screen.cursor, tmux_cursor, screen.alt_screen, tmux_alt
            );
            for (r, (a, b)) in ours.iter().zip(&tmux_lines).enumerate() {
                if a != b {
                    diff += &format!("  row {r:2} ours |{a}|\n         tmux |{b}|\n");
                }
            }
            mismatches.push(diff);
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} case(s) differ from tmux:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// Known divergences, asserted so a fix upstream shows up here: with the
/// cursor on row 1, `CSI 1 J` (erase above) leaves row 0 alone in
/// alacritty_terminal 0.26 (`cursor.line > 1` should be `>= 1` in
/// `Term::clear_screen`); tmux and xterm clear it.
#[test]
fn known_divergence_erase_above_from_row_1() {
    let tmux = Tmux::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ed1.bin");
    let bytes = b"\x1b[1;1H0000000000\x1b[2;1H1111111111\x1b[2;4H\x1b[1J";
    std::fs::write(&file, bytes).unwrap();
    let (tmux_lines, _, _) = tmux.render("ed1", &file);
    let mut emu = AlacrittyEmulator::new(COLS, ROWS);
    emu.feed(bytes);
    let ours = emu.snapshot().lines;
    assert_eq!(tmux_lines[0], "");
    assert_eq!(tmux_lines[1], "    111111");
    assert_eq!(ours[1], tmux_lines[1]);
    assert_eq!(
        ours[0], "0000000000",
        "alacritty_terminal now clears row 0 like tmux: drop this known divergence"
    );
}
