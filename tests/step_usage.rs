//! What a step used (issue #35, item 3): each `step.end` carries
//! `usage` — the memory peak of that step alone, the process peak, the
//! disk used — on `local` (its cgroups and disk) and `docker` (the
//! container's cgroups), and every view shows it: `EVIDENCE.md`,
//! `report.html`, the `--json` summary; `rfs verify` still passes.

mod common;
use common::*;

/// The steps every provider's peaks are checked with: a 100 MB
/// allocation, then a step that allocates nothing, then 30 processes.
const PEAK_STEPS: &str = r#"step("alloc", "dd if=/dev/zero of=/dev/null bs=100M count=1");
        step("quiet", "true");
        step("many", "for i in $(seq 30); do sleep 2 & done; wait");"#;

/// `usage.KEY` of the `i`th `step.end`.
fn usage(ends: &[serde_json::Value], i: usize, k: &str) -> u64 {
    ends[i]["usage"][k]
        .as_u64()
        .unwrap_or_else(|| panic!("{}", ends[i]))
}

/// The peaks of [`PEAK_STEPS`]: each step's memory peak is its own.
fn assert_peaks(ends: &[serde_json::Value]) {
    assert!(usage(ends, 0, "memory_peak") >= 100 << 20, "{}", ends[0]);
    assert!(
        usage(ends, 1, "memory_peak") < 50 << 20,
        "the peak was not the step's own: {}",
        ends[1]
    );
    assert!(usage(ends, 2, "pids_peak") >= 30, "{}", ends[2]);
}

/// Each step's `step.end` on `local` says what it used: the memory peak
/// of that step alone (a 100 MB allocation, then a step that allocates
/// nothing), the process peak, and the disk used at its end.
#[test]
fn each_local_step_journals_its_memory_and_process_peaks_and_disk_used() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = format!(
        "sandbox(#{{ memory: \"512M\" }});\n{PEAK_STEPS}\nstep(\"write\", \"dd if=/dev/zero of=f bs=1M count=20\");"
    );
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    let ends = out.entries("step.end");
    assert_peaks(&ends);
    assert!(usage(&ends, 3, "disk_used") >= 20 << 20, "{}", ends[3]);
    assert!(usage(&ends, 0, "disk_used") < 20 << 20, "{}", ends[0]);
    rfs.assert_no_leftovers();
}

/// What a step used is shown where a person reads the run — a `- used:`
/// line under the step in `EVIDENCE.md`, the same in `report.html`, a
/// `usage` object per step in the `--json` summary — and `rfs verify`
/// re-derives those views from the journal.
#[test]
fn a_steps_usage_is_shown_in_evidence_the_report_and_the_json_summary() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        r#"sandbox(#{ memory: "512M" });
        step("alloc", "dd if=/dev/zero of=/dev/null bs=40M count=1");"#,
        &["--json"],
    );
    out.assert_code(0);
    let used = out.entries("step.end")[0]["usage"].clone();
    let peak = used["memory_peak"].as_u64().expect("a memory peak");
    assert!(peak >= 40 << 20, "{used}");
    let line = format!(
        "- used: memory peak {} · processes {} · disk {}",
        rfs::provider::limits::show_used(peak),
        used["pids_peak"].as_u64().unwrap(),
        rfs::provider::limits::show_used(used["disk_used"].as_u64().unwrap()),
    );
    let ev = out.evidence();
    let step = &ev[ev.find("### 1. `alloc`").expect("the step's section")..];
    assert!(step.contains(&format!("\n{line}\n")), "{line}\n{ev}");
    let html = std::fs::read_to_string(out.out_dir.join("report.html")).unwrap();
    assert!(
        html.contains(&format!("<p class=\"usage\">used: {}</p>", &line[8..])),
        "{line}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(summary["steps"][0]["usage"], used, "{summary}");
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
    rfs.assert_no_leftovers();
}

/// On `docker` each `step.end` says what the step used too: the
/// container's memory peak of that step alone (read from this host's
/// cgroup files, reset when the step starts) and its process peak, shown
/// under the step in `EVIDENCE.md`.
#[test]
fn each_docker_step_journals_its_memory_and_process_peaks() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let out = rfs.run(repo.path(), PEAK_STEPS);
    out.assert_code(0);
    let ends = out.entries("step.end");
    assert_peaks(&ends);
    assert!(ends[0]["usage"].get("disk_used").is_none(), "{}", ends[0]);
    let ev = out.evidence();
    assert!(
        ev.contains(&format!(
            "- used: memory peak {} · processes {}\n",
            rfs::provider::limits::show_used(usage(&ends, 0, "memory_peak")),
            usage(&ends, 0, "pids_peak")
        )),
        "{ev}"
    );
    rfs.assert_no_leftovers();
}
