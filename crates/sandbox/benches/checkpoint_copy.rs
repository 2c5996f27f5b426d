//! A checkpoint's copy (issue #43): `untrusted_tree::copy` (by
//! descriptor, never following a link the sandbox made) against the
//! `cp -a --reflink=auto` it replaced, on the 20,000-file benchmark tree
//! (`scripts/bench-lib.sh`'s `gen_repo` shape: 20,500 files of 1–9 KB and
//! 4 × 25 MiB), in the same run, alternating, on the same filesystem.
//! Target: the copy costs at most 1.2× `cp -a`.
//!
//! Run: `cargo bench -p rfs-sandbox --bench checkpoint_copy` (RUNS=5,
//! BENCH_DIR=a folder on the filesystem of rfs's state directory).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn generate(root: &Path) {
    // A fixed pseudo-random sequence: the same tree every run.
    let mut x: u64 = 42;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for a in 0..20 {
        for b in 0..25 {
            let d = root.join(format!("pkg{a:02}/mod{b:02}/src"));
            std::fs::create_dir_all(&d).unwrap();
            for c in 0..41 {
                let size = 1000 + (next() % 8000) as usize;
                let body: Vec<u8> = (0..size).map(|_| b'a' + (next() % 16) as u8).collect();
                std::fs::write(d.join(format!("file{c:03}.txt")), body).unwrap();
            }
        }
    }
    std::fs::create_dir_all(root.join("assets")).unwrap();
    for i in 0..4 {
        let body: Vec<u8> = (0..25 << 20).map(|_| next() as u8).collect();
        std::fs::write(root.join(format!("assets/big{i}.bin")), body).unwrap();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    let runs: usize = std::env::var("RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let base =
        std::env::var("BENCH_DIR").unwrap_or_else(|_| std::env::temp_dir().display().to_string());
    let work = tempfile::tempdir_in(base).unwrap();
    let tree = work.path().join("tree");
    generate(&tree);
    let (mut cp, mut ours) = (vec![], vec![]);
    for r in 0..runs {
        let to = work.path().join(format!("cp-{r}"));
        let t = Instant::now();
        let ok = Command::new("cp")
            .args(["-a", "--reflink=auto", "--no-target-directory"])
            .arg(&tree)
            .arg(&to)
            .status()
            .unwrap()
            .success();
        assert!(ok);
        cp.push(t.elapsed().as_secs_f64() * 1000.0);
        let to = work.path().join(format!("ours-{r}"));
        let t = Instant::now();
        let done = rfs_sandbox::untrusted_tree::copy(&tree, &to).unwrap();
        ours.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(done.special_skipped, 0);
        for d in [work.path().join(format!("cp-{r}")), to] {
            rfs_sandbox::untrusted_tree::remove(&d).unwrap();
        }
    }
    let (c, o) = (median(cp.clone()), median(ours.clone()));
    println!(
        "checkpoint copy of the 20,000-file tree: untrusted_tree::copy {o:.0} ms, cp -a --reflink=auto {c:.0} ms (baseline), ratio {:.2}x (target <= 1.2; runs: ours {ours:.0?}, cp {cp:.0?})",
        o / c
    );
}
