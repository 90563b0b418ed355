//! The `kaas` binary itself: what an operator sees when start-up fails.
#![cfg(not(madsim))]

use std::process::Command;

fn kaas() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kaas"));
    cmd.env_remove("KAAS_DATA_DIR").env("KAAS_LOG", "off");
    cmd
}

#[test]
fn a_missing_named_data_dir_is_refused_with_what_to_do() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let missing = scratch.path().join("not-mounted");
    let out = kaas()
        .arg("--data-dir")
        .arg(&missing)
        .output()
        .expect("run kaas");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not exist"), "{err}");
    assert!(err.contains("NFS volume"), "names the reason: {err}");
    assert!(
        err.contains(&format!("mkdir -p {}", missing.display())),
        "says how to create it: {err}"
    );
    assert!(err.contains("leave --data-dir"), "names the default: {err}");
    assert!(!missing.exists(), "a named data directory is never created");
}

#[test]
fn a_named_data_dir_that_is_a_file_is_refused() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let file = scratch.path().join("plain-file");
    #[allow(clippy::disallowed_methods)] // the test's own scratch file, not a volume
    std::fs::write(&file, b"x").expect("write");
    let out = kaas()
        .arg("--data-dir")
        .arg(&file)
        .output()
        .expect("run kaas");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a directory"), "{err}");
}

#[test]
fn the_missing_data_dir_message_applies_to_the_environment_variable_too() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let missing = scratch.path().join("from-env");
    let out = kaas()
        .env("KAAS_DATA_DIR", &missing)
        .output()
        .expect("run kaas");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("does not exist"), "{err}");
    assert!(!missing.exists());
}
