//! `rfs-daytona-sim`: start a server, print its `DAYTONA_API_URL` and
//! `DAYTONA_API_KEY`, serve until killed (manual use, benchmarks).

use std::io::Write;

fn main() {
    let mut opts = rfs_daytona_sim::SimOptions::default();
    if let Ok(key) = std::env::var("DAYTONA_SIM_API_KEY") {
        opts.api_key = key;
    }
    // The round trip of a real region: added to every response and to
    // every WebSocket frame the server sends.
    let ms = |k: &str| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .map(std::time::Duration::from_millis)
    };
    if let Some(l) = ms("DAYTONA_SIM_LATENCY_MS") {
        opts.latency = l;
    }
    if let Some(l) = ms("DAYTONA_SIM_FRAME_LATENCY_MS") {
        opts.frame_latency = l;
    }
    let sim = match rfs_daytona_sim::Sim::start(opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rfs-daytona-sim: {e}");
            std::process::exit(1);
        }
    };
    println!("DAYTONA_API_URL={}", sim.api_url());
    println!("DAYTONA_API_KEY={}", sim.api_key());
    let _ = std::io::stdout().flush();
    // Serve until SIGINT/SIGTERM, then clean up every sandbox.
    let mut signals = nix::sys::signal::SigSet::empty();
    signals.add(nix::sys::signal::Signal::SIGINT);
    signals.add(nix::sys::signal::Signal::SIGTERM);
    let _ = signals.thread_block();
    let _ = signals.wait();
    sim.shutdown();
}
