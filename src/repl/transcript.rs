//! The inputs that succeeded, in order, and the script `:save` writes from
//! them: a header naming the rfs version, provider, commit and run id,
//! then each input as it was typed.

use crate::runtime::Run;

#[derive(Debug, Default)]
pub(crate) struct Transcript {
    inputs: Vec<String>,
}

impl Transcript {
    /// Record an input that compiled and evaluated without error.
    pub(crate) fn push(&mut self, input: &str) {
        self.inputs.push(input.trim_end().to_owned());
    }

    pub(crate) fn len(&self) -> usize {
        self.inputs.len()
    }

    /// The runnable script.
    pub(crate) fn script(&self, run: &Run) -> String {
        let commit = run
            .state()
            .source
            .as_ref()
            .map(|b| b.pin.commit.clone())
            .unwrap_or_else(|| "none (source not synced)".into());
        let mut s = format!(
            "// Saved from `rfs repl` by rfs {}.\n\
             // provider: {}\n\
             // commit: {}\n\
             // run: {}\n\
             // Replay from the same repository: rfs run <this file>\n\n",
            env!("CARGO_PKG_VERSION"),
            run.cfg.choice.name,
            commit,
            run.cfg.run_id,
        );
        s.push_str(&self.body());
        s
    }

    /// The inputs as script statements, one after another.
    pub(crate) fn body(&self) -> String {
        let mut s = String::new();
        for input in &self.inputs {
            s.push_str(input);
            // A bare expression as an input is a statement in a script.
            if !input.ends_with(';') && !input.ends_with('}') {
                // (On a line of its own when the input ends in a comment.)
                if input.lines().last().is_some_and(|l| l.contains("//")) {
                    s.push('\n');
                }
                s.push(';');
            }
            s.push('\n');
        }
        s
    }
}
