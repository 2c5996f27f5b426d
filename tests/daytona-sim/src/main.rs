//! `rfs-daytona-sim`: start a server, print its `DAYTONA_API_URL` and
//! `DAYTONA_API_KEY`, serve until killed (manual use, benchmarks).

use std::io::Write;

fn main() {
    let mut opts = rfs_daytona_sim::SimOptions::default();
    if let Ok(key) = std::env::var("DAYTONA_SIM_API_KEY") {
        opts.api_key = key;
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
