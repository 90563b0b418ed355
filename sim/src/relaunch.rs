//! Re-running the simulator in its own build.
//!
//! The simulation needs every crate compiled with `--cfg madsim` (madsim then
//! replaces tokio's runtime, time, randomness and sockets). Building that into
//! `target/` would overwrite the production artefacts on every switch, so the
//! ordinary `sim` binary hands its arguments to
//! `cargo run --release -p sim --target-dir target/madsim` with the flag
//! added. The user types one command; the two builds never thrash each
//! other. Always the release build, whichever the trampoline was: a seed
//! gives the same digest in both, the release build runs it several times
//! faster, and it is the build CI's sweep and scenarios use, so a
//! contributor's `cargo run -p sim` after `bash ci/test` builds nothing
//! (a debug relaunch compiled the simulator in a profile of its own: five
//! minutes of a fresh CI run's README check).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

const GUARD: &str = "KAAS_SIM_RELAUNCHED";

/// The workspace root (this crate lives in `<root>/sim`).
pub(crate) fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// The target directory of the simulation build.
pub(crate) fn simulation_target_dir() -> PathBuf {
    std::env::var_os("KAAS_SIM_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target").join("madsim"))
}

/// Adds `--cfg madsim` to the caller's own flags, in whichever variable cargo reads.
pub(crate) fn simulation_rustflags(
    encoded: Option<OsString>,
    plain: Option<OsString>,
) -> (&'static str, OsString) {
    if let Some(encoded) = encoded {
        let mut flags = encoded.to_string_lossy().into_owned();
        if !flags.split('\x1f').any(|f| f == "madsim") {
            if !flags.is_empty() {
                flags.push('\x1f');
            }
            flags.push_str("--cfg\x1fmadsim");
        }
        return ("CARGO_ENCODED_RUSTFLAGS", flags.into());
    }
    let mut flags = plain
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !flags.contains("--cfg madsim") {
        if !flags.is_empty() {
            flags.push(' ');
        }
        flags.push_str("--cfg madsim");
    }
    ("RUSTFLAGS", flags.into())
}

pub fn command(args: impl IntoIterator<Item = OsString>) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let (var, flags) = simulation_rustflags(
        std::env::var_os("CARGO_ENCODED_RUSTFLAGS"),
        std::env::var_os("RUSTFLAGS"),
    );
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root())
        .args(["run", "--quiet", "--release", "-p", "sim", "--target-dir"])
        .arg(simulation_target_dir());
    cmd.arg("--").args(args).env(var, flags).env(GUARD, "1");
    // What the outer `cargo run` set for this process describes this
    // package, not the build: build scripts read some of it (ring's reruns
    // on CARGO_MANIFEST_DIR), and a relaunch that kept it rebuilt ring,
    // rustls, the broker and the simulator over the build CI had made.
    for (key, _) in std::env::vars_os() {
        let key_str = key.to_string_lossy();
        if SET_BY_CARGO_RUN.contains(&key_str.as_ref()) || key_str.starts_with("CARGO_PKG_") {
            cmd.env_remove(&key);
        }
    }
    cmd
}

/// The variables `cargo run` gives the program it runs (besides
/// `CARGO_PKG_*`), none of them configuration.
const SET_BY_CARGO_RUN: &[&str] = &[
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
];

pub fn into_simulation_build() -> ! {
    if std::env::var_os(GUARD).is_some() {
        eprintln!("sim: the relaunched build still lacks --cfg madsim; check RUSTFLAGS");
        std::process::exit(2);
    }
    eprintln!(
        "sim: running the simulation build (--cfg madsim, release, target dir {}); the first build takes a few minutes",
        simulation_target_dir().display()
    );
    let mut cmd = command(std::env::args_os().skip(1));
    use std::os::unix::process::CommandExt;
    let err = cmd.exec();
    eprintln!("sim: cannot run cargo for the simulation build: {err}");
    std::process::exit(2);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_the_cfg_once_and_keeps_user_flags() {
        assert_eq!(
            simulation_rustflags(None, None),
            ("RUSTFLAGS", "--cfg madsim".into())
        );
        assert_eq!(
            simulation_rustflags(None, Some("-C debuginfo=1".into())),
            ("RUSTFLAGS", "-C debuginfo=1 --cfg madsim".into())
        );
        assert_eq!(
            simulation_rustflags(None, Some("--cfg madsim".into())),
            ("RUSTFLAGS", "--cfg madsim".into())
        );
        assert_eq!(
            simulation_rustflags(Some("-Cdebuginfo=1".into()), Some("ignored".into())),
            (
                "CARGO_ENCODED_RUSTFLAGS",
                "-Cdebuginfo=1\x1f--cfg\x1fmadsim".into()
            )
        );
    }

    #[test]
    fn runs_the_sim_package_in_its_own_target_dir() {
        let cmd = command(["--seed".into(), "7".into()]);
        let args: Vec<_> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let dir = simulation_target_dir().to_string_lossy().into_owned();
        assert!(
            args.windows(2)
                .any(|w| w[0] == "--target-dir" && w[1] == dir)
        );
        assert_eq!(&args[args.len() - 3..], ["--", "--seed", "7"]);
        assert!(args.iter().any(|a| a == "--release"));
        // Cargo sets it for the tests as it does for `cargo run`.
        if std::env::var_os("CARGO_MANIFEST_DIR").is_some() {
            assert!(
                cmd.get_envs()
                    .any(|(k, v)| k == "CARGO_MANIFEST_DIR" && v.is_none()),
                "the package's own variables are not handed to the inner build"
            );
        }
        assert!(dir.ends_with("target/madsim"));
        assert_eq!(cmd.get_current_dir(), Some(workspace_root().as_path()));
    }
}
