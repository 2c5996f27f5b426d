//! A replay's environment against the original run's: the sandbox's
//! image and host (checked at placement, `placement.rs`) and each
//! service's image (checked before it starts, `service.rs`). A different
//! image is refused unless `--allow-other-image`; a different host is a
//! warning (journaled as `placement.warning`).

use rfs_evidence::events::{Environment, ImagePin, ReplayOf};

/// What the replay's environment check found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct EnvironmentCheck {
    /// Said and journaled (`placement.warning`); the replay goes on.
    pub warnings: Vec<String>,
    /// Why the replay is refused.
    pub refused: Option<String>,
}

/// Compare the replay's sandbox environment (`now`) with the original's
/// (`of.environment`): a different docker image is refused, naming both
/// ids, unless `--allow-other-image` was given (then said); a different
/// local host is warned about.
pub(crate) fn environment_check(of: &ReplayOf, now: Option<&Environment>) -> EnvironmentCheck {
    let mut check = EnvironmentCheck::default();
    let empty = Environment::default();
    let now = now.unwrap_or(&empty);
    let Some(was) = &of.environment else {
        // A journal from an rfs that pinned no environment.
        if let Some(b) = &now.image {
            check.warnings.push(format!(
                "run {}'s journal pins no image, so this replay's image {} is not compared with it",
                of.run_id, b.id
            ));
        }
        return check;
    };
    match (&was.image, &now.image) {
        (Some(a), Some(b)) if a.id != b.id && of.allow_other_image => {
            check.warnings.push(format!(
                "replaying on image {}, not the original run's {} (--allow-other-image)",
                b.id, a.id
            ));
        }
        (Some(a), Some(b)) if a.id != b.id => {
            check.refused = Some(format!(
                "the replay's image is {}, but run {} ran on image {}: a different image under the same name is refused; load or tag the original image (a script may name it by id, `image: \"{}\"`), or pass --allow-other-image to replay on this one",
                b.id, of.run_id, a.id, a.id
            ));
        }
        (Some(a), None) => check.warnings.push(format!(
            "run {} ran on image {}; this replay's provider has no image, so it is not compared",
            of.run_id, a.id
        )),
        _ => {}
    }
    if let (Some(a), Some(b)) = (&was.host, &now.host) {
        let mut differ = vec![];
        if a.kernel != b.kernel {
            differ.push(format!("kernel {} (was {})", b.kernel, a.kernel));
        }
        if a.os != b.os {
            let os = |o: &Option<String>| o.clone().unwrap_or_else(|| "unknown".into());
            differ.push(format!("os {} (was {})", os(&b.os), os(&a.os)));
        }
        if a.packages_sha256 != b.packages_sha256 {
            differ.push("the installed packages (dpkg-query -W) differ".into());
        }
        if !differ.is_empty() {
            check.warnings.push(format!(
                "this host differs from the one run {} ran on: {}",
                of.run_id,
                differ.join(", ")
            ));
        }
    }
    check
}

/// Compare the image a replay's service `name` runs (`now`) with the
/// original's service of that name: a different one is refused as a
/// different sandbox image is, unless `--allow-other-image`.
pub(crate) fn service_image_check(of: &ReplayOf, name: &str, now: &ImagePin) -> EnvironmentCheck {
    let mut check = EnvironmentCheck::default();
    match of.services.get(name) {
        None => check.warnings.push(format!(
            "run {} started no service `{name}` (or pinned none), so this replay's image {} for it is not compared",
            of.run_id, now.id
        )),
        Some(a) if a.id != now.id && of.allow_other_image => check.warnings.push(format!(
            "service `{name}` runs image {}, not the original run's {} (--allow-other-image)",
            now.id, a.id
        )),
        Some(a) if a.id != now.id => {
            check.refused = Some(format!(
                "the replay's service `{name}` runs image {}, but run {} ran it on image {}: a different image under the same name is refused; load or tag the original image (a script may name it by id, `image: \"{}\"`), or pass --allow-other-image",
                now.id, of.run_id, a.id, a.id
            ))
        }
        Some(_) => {}
    }
    check
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replay_of(env: Environment, allow: bool) -> ReplayOf {
        ReplayOf {
            run_id: "r0".into(),
            out_dir: "/o".into(),
            journal_head: "h".into(),
            journal_sha256: "s".into(),
            commit: "c".into(),
            environment: Some(env),
            allow_other_image: allow,
            services: Default::default(),
        }
    }

    fn image(id: &str) -> Environment {
        Environment {
            image: Some(rfs_evidence::events::ImagePin {
                id: id.into(),
                repo_digests: vec![],
            }),
            host: None,
        }
    }

    fn host(kernel: &str, packages: &str) -> Environment {
        Environment {
            image: None,
            host: Some(rfs_evidence::events::HostFingerprint {
                kernel: kernel.into(),
                os: Some("debian 12".into()),
                packages_sha256: Some(packages.into()),
            }),
        }
    }

    #[test]
    fn a_different_image_is_refused_naming_both_unless_allowed() {
        let c = environment_check(
            &replay_of(image("sha256:aa"), false),
            Some(&image("sha256:bb")),
        );
        let why = c.refused.expect("refused");
        assert!(
            why.contains("sha256:aa") && why.contains("sha256:bb"),
            "{why}"
        );
        assert!(why.contains("--allow-other-image"), "{why}");
        let c = environment_check(
            &replay_of(image("sha256:aa"), true),
            Some(&image("sha256:bb")),
        );
        assert_eq!(c.refused, None);
        assert!(
            c.warnings[0].contains("--allow-other-image"),
            "{:?}",
            c.warnings
        );
        let same = environment_check(
            &replay_of(image("sha256:aa"), false),
            Some(&image("sha256:aa")),
        );
        assert_eq!(same, EnvironmentCheck::default());
    }

    #[test]
    fn a_bundle_that_pins_no_image_is_replayed_with_a_warning_saying_so() {
        let mut of = replay_of(image("sha256:aa"), false);
        of.environment = None;
        let c = environment_check(&of, Some(&image("sha256:bb")));
        assert_eq!(c.refused, None);
        assert!(c.warnings[0].contains("pins no image"), "{:?}", c.warnings);
    }

    #[test]
    fn a_different_host_is_a_warning_naming_what_differs() {
        let c = environment_check(
            &replay_of(host("6.1", "p1"), false),
            Some(&host("6.8", "p2")),
        );
        assert_eq!(c.refused, None);
        let w = &c.warnings[0];
        assert!(
            w.contains("kernel 6.8 (was 6.1)") && w.contains("packages"),
            "{w}"
        );
        let same = environment_check(
            &replay_of(host("6.1", "p1"), false),
            Some(&host("6.1", "p1")),
        );
        assert_eq!(same, EnvironmentCheck::default());
    }
}
