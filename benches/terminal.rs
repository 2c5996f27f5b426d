//! Terminal-layer benchmark (run: `cargo bench --bench terminal`).
//!
//! 1. Emulator throughput: 50 MB of escape-heavy output fed in 64 KiB
//!    chunks to `AlacrittyEmulator`; resident memory sampled at 10% and
//!    100% to show it stays flat.
//! 2. Output → `wait_for` latency: this binary re-runs itself under a local
//!    PTY as a child that, per input line, stamps CLOCK_MONOTONIC and writes
//!    it on screen; the parent measures from that stamp to `wait_for`
//!    returning (median, p90, max over 200 samples).
//! 3. End to end: the child floods 50 MB through the PTY into a session
//!    (emulator + asciicast recording to a temp file).

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use rfs::provider::local::pty::spawn_local_pty;
use rfs::provider::PtyRequest;
use rfs::terminal::{AlacrittyEmulator, Emulator, Pattern, SessionOptions, TerminalSession};

const MB: usize = 1024 * 1024;
const TOTAL: usize = 50 * MB;
const SAMPLES: usize = 200;

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec to a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// About 1 MiB of what busy TUIs emit: SGR colours, absolute moves, erases,
/// scroll regions, wide and combining characters, line drawing, newlines.
fn mixed_block() -> Vec<u8> {
    let mut out = Vec::with_capacity(MB + 4096);
    let mut i = 0u64;
    while out.len() < MB {
        let row = i % 24 + 1;
        let col = (i * 7) % 60 + 1;
        let fg = 30 + i % 8;
        let c256 = i % 256;
        write!(
            out,
            "\x1b[{row};{col}H\x1b[1;{fg}mstatus {i:08}\x1b[0m \x1b[38;5;{c256}m中文 e\u{301}\x1b[m\x1b[K\
             \x1b(0lqqk\x1b(B \x1b[48;2;10;20;{b}mrgb\x1b[49m\r\nthe quick brown fox jumps over the lazy dog \x1b[2;20r\x1b[20;1H\n\x1b[r\x1b[3X\x1b[2P",
            b = i % 256,
        )
        .unwrap();
        i += 1;
    }
    out
}

fn child_main(mode: &str) {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match mode {
        "echo" => {
            for line in std::io::stdin().lock().lines() {
                let Ok(seq) = line else { return };
                let t = monotonic_ns();
                write!(out, "\x1b[5;1Hseq={} t={t} \x1b[K", seq.trim()).unwrap();
                out.flush().unwrap();
            }
        }
        "flood" => {
            let block = mixed_block();
            let mut sent = 0;
            while sent < TOTAL {
                out.write_all(&block).unwrap();
                sent += block.len();
            }
            write!(out, "\x1b[2J\x1b[HFLOOD-DONE {sent}").unwrap();
            out.flush().unwrap();
            std::thread::sleep(Duration::from_secs(30));
        }
        other => panic!("unknown child mode {other}"),
    }
}

fn bench_emulator() {
    let block = mixed_block();
    let mut emu = AlacrittyEmulator::new(80, 24);
    let start = Instant::now();
    let mut fed = 0;
    let mut rss_10 = 0;
    while fed < TOTAL {
        for chunk in block.chunks(64 * 1024) {
            emu.feed(chunk);
            fed += chunk.len();
        }
        let _ = emu.take_replies();
        if rss_10 == 0 && fed >= TOTAL / 10 {
            rss_10 = status_kb("VmRSS:");
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let screen = emu.snapshot();
    assert!(screen.text().contains("status"), "{}", screen.dump());
    println!(
        "emulator throughput: {:.1} MB/s ({} MB in {:.2} s)",
        fed as f64 / MB as f64 / secs,
        fed / MB,
        secs
    );
    println!(
        "emulator memory: RSS {} KiB after 10%, {} KiB after 100%",
        rss_10,
        status_kb("VmRSS:")
    );
}

fn request(mode: &str) -> PtyRequest {
    let exe = std::env::current_exe().unwrap();
    PtyRequest {
        argv: vec![exe.display().to_string()],
        cwd: "/".into(),
        env: vec![
            ("RFS_BENCH_CHILD".into(), mode.into()),
            ("TERM".into(), "xterm-256color".into()),
        ],
        cols: 80,
        rows: 24,
    }
}

async fn bench_latency() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = SessionOptions::new(80, 24);
    options.record = Some(dir.path().join("latency.cast"));
    let channel = spawn_local_pty(&request("echo")).await.unwrap();
    let s = TerminalSession::start(&tokio::runtime::Handle::current(), channel, options).unwrap();
    let mut samples = Vec::with_capacity(SAMPLES);
    for seq in 0..SAMPLES + 10 {
        s.send(&format!("{seq}\n")).unwrap();
        let re = format!(r"(?m)seq={seq} t=(\d+) *$");
        let out = s
            .wait_for(&Pattern::regex(&re).unwrap().timeout(Duration::from_secs(5)))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let done = monotonic_ns();
        let text = out.matched.unwrap().text;
        let t: u64 = text.split("t=").nth(1).unwrap().trim().parse().unwrap();
        if seq >= 10 {
            // The first few include process start-up; skip them.
            samples.push(Duration::from_nanos(done.saturating_sub(t)));
        }
    }
    samples.sort();
    let pct = |p: usize| samples[(samples.len() - 1) * p / 100];
    println!(
        "output -> wait_for latency over {} samples: median {:.3} ms, p90 {:.3} ms, max {:.3} ms",
        samples.len(),
        pct(50).as_secs_f64() * 1e3,
        pct(90).as_secs_f64() * 1e3,
        samples.last().unwrap().as_secs_f64() * 1e3,
    );
    s.close().await.unwrap();
}

async fn bench_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let cast = dir.path().join("flood.cast");
    let mut options = SessionOptions::new(80, 24);
    options.record = Some(cast.clone());
    let channel = spawn_local_pty(&request("flood")).await.unwrap();
    let start = Instant::now();
    let s = TerminalSession::start(&tokio::runtime::Handle::current(), channel, options).unwrap();
    s.wait_for(&Pattern::text("FLOOD-DONE").timeout(Duration::from_secs(300)))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let secs = start.elapsed().as_secs_f64();
    s.close().await.unwrap();
    let size = std::fs::metadata(&cast).map(|m| m.len()).unwrap_or(0);
    println!(
        "end to end (PTY -> session, recording on): {:.1} MB/s ({} MB in {:.2} s, cast file {} MB)",
        TOTAL as f64 / MB as f64 / secs,
        TOTAL / MB,
        secs,
        size / MB as u64
    );
}

fn main() {
    if let Ok(mode) = std::env::var("RFS_BENCH_CHILD") {
        child_main(&mode);
        return;
    }
    // `cargo bench` passes `--bench`; nothing else to parse.
    bench_emulator();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(bench_latency());
    rt.block_on(bench_end_to_end());
    println!("peak RSS (VmHWM): {} KiB", status_kb("VmHWM:"));
}
