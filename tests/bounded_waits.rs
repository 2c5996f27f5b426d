//! No wait without a bound (issue #20, class 7): a step whose background
//! process keeps the output pipes open ends like any other step, with the
//! same semantics on every provider.

mod common;
use common::*;

provider_tests! {
    fn a_background_process_holding_the_output_pipe_does_not_hang_a_step(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(
            repo.path(),
            r#"let r = step("bg", "(setsid sh -c 'sleep 777 &' &); echo started", #{ timeout: 60 });
            print(`exit=${r.exit}`);
            let again = step("next", "echo next-ran");
            print(again.stdout);"#,
        );
        out.assert_code(0);
        assert!(out.stdout.contains("exit=0"), "{}", out.stdout);
        assert!(out.stdout.contains("next-ran"), "{}", out.stdout);
        assert!(!out.stderr.contains("timed out"), "{}", out.stderr);
        rfs.assert_no_leftovers();
    }
}
