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

/// A mount table in which `dir` is an NFS mount with `options`.
fn nfs_mountinfo(
    scratch: &std::path::Path,
    dir: &std::path::Path,
    options: &str,
) -> std::path::PathBuf {
    let table = scratch.join("mountinfo");
    let text = format!(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
         30 22 0:40 / {} rw,relatime shared:20 - nfs4 server:/export rw,{options},addr=10.0.0.1\n",
        dir.display()
    );
    #[allow(clippy::disallowed_methods)] // the test's own scratch file, not a volume
    std::fs::write(&table, text).expect("write");
    table
}

#[test]
fn an_nfs_mount_with_unsafe_options_is_refused_naming_each_option() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let data = scratch.path().join("data");
    #[allow(clippy::disallowed_methods)] // the test's own scratch directory
    std::fs::create_dir(&data).expect("mkdir");
    let data = data.canonicalize().expect("canonical");
    let table = nfs_mountinfo(scratch.path(), &data, "vers=4.2,soft,hard,nocto");
    // Run as `starts` does, so that a check that let it start fails the
    // test instead of hanging it.
    let out = match starts(&data, &table, &[]) {
        Ok(()) => panic!("kaas started on an unsafe NFS mount"),
        Err(out) => out,
    };
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    for option in [
        "soft:",
        "nocto:",
        "lookupcache=all:",
        "--allow-unsafe-mount",
    ] {
        assert!(err.contains(option), "names {option}: {err}");
    }
    #[allow(clippy::disallowed_methods)] // reading the test's own scratch directory
    let written = std::fs::read_dir(&data).expect("list").count();
    assert_eq!(written, 0, "nothing is written to a refused volume");
}

/// Starts kaas on `data` with the mount table `table` and `extra`
/// arguments: still running after a second (then killed), or its exit.
fn starts(
    data: &std::path::Path,
    table: &std::path::Path,
    extra: &[&str],
) -> Result<(), std::process::Output> {
    let mut child = kaas()
        .arg("--data-dir")
        .arg(data)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--mountinfo")
        .arg(table)
        .args(extra)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kaas");
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        if child.try_wait().expect("wait").is_some() {
            return Err(child.wait_with_output().expect("output"));
        }
    }
    child.kill().expect("kill");
    child.wait().expect("wait");
    Ok(())
}

#[test]
fn a_conforming_nfs_mount_starts_and_the_override_starts_an_unsafe_one() {
    let scratch = tempfile::tempdir().expect("tempdir");
    for (name, options, extra) in [
        ("good", "vers=4.1,hard,lookupcache=pos", &[][..]),
        ("forced", "vers=4.2,hard", &["--allow-unsafe-mount"][..]),
    ] {
        let data = scratch.path().join(name);
        #[allow(clippy::disallowed_methods)] // the test's own scratch directory
        std::fs::create_dir(&data).expect("mkdir");
        let data = data.canonicalize().expect("canonical");
        let table = nfs_mountinfo(scratch.path(), &data, options);
        if let Err(out) = starts(&data, &table, extra) {
            panic!("{name}: kaas exited: {out:?}");
        }
    }
}

/// Runs a broker on `data` until it has started, then stops it with
/// SIGTERM: the volume is then a kaas volume, cleanly left.
fn run_a_broker_on(data: &std::path::Path) {
    use std::io::BufRead;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = kaas()
        .env("KAAS_LOG", "info")
        .arg("--data-dir")
        .arg(data)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kaas");
    let mut lines = std::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    let started = lines.any(|l| l.is_ok_and(|l| l.contains("broker started")));
    assert!(started, "kaas ended before it started");
    drop(lines); // a closed stderr is fine (see the test below)
    assert_eq!(terminate(&mut child).code(), Some(0));
}

#[test]
fn fsck_exit_codes_say_clean_problems_or_unreadable() {
    let scratch = tempfile::tempdir().expect("tempdir");
    // `kaas --data-dir D fsck` and `kaas fsck --data-dir D` alike.
    let run = |dir: &std::path::Path, json: bool| {
        let mut cmd = kaas();
        if json {
            cmd.arg("--data-dir").arg(dir).args(["fsck", "--json"]);
        } else {
            cmd.arg("fsck").arg("--data-dir").arg(dir);
        }
        cmd.output().expect("run kaas fsck")
    };
    // No broker ever ran here: no kaas volume, however empty and clean.
    let empty = run(scratch.path(), false);
    assert_eq!(empty.status.code(), Some(2), "{empty:?}");
    assert!(
        String::from_utf8_lossy(&empty.stderr).contains("not a kaas volume"),
        "{empty:?}"
    );
    run_a_broker_on(scratch.path());
    let clean = run(scratch.path(), false);
    assert_eq!(clean.status.code(), Some(0), "{clean:?}");
    assert!(String::from_utf8_lossy(&clean.stdout).contains("0 errors, 0 warnings"));
    #[allow(clippy::disallowed_methods)] // the test's own scratch directory
    std::fs::create_dir_all(
        scratch
            .path()
            .join("topics/0b7e9d4c-0000-4000-8000-000000000000"),
    )
    .expect("mkdir");
    let damaged = run(scratch.path(), true);
    assert_eq!(damaged.status.code(), Some(1), "{damaged:?}");
    let out = String::from_utf8_lossy(&damaged.stdout);
    assert!(
        out.contains("\"severity\": \"error\"") && out.contains("without its meta"),
        "{out}"
    );
    let missing = run(&scratch.path().join("not-mounted"), false);
    assert_eq!(missing.status.code(), Some(2), "{missing:?}");
    // --repair removes a deleted topic's leftovers, says so, then checks:
    // the topic without a meta is not its to fix.
    #[allow(clippy::disallowed_methods)] // the test's own scratch directory
    std::fs::create_dir_all(scratch.path().join("topics/.tombstone-gone/0")).expect("mkdir");
    let repaired = kaas()
        .arg("--data-dir")
        .arg(scratch.path())
        .args(["fsck", "--repair", "--json"])
        .output()
        .expect("run kaas fsck --repair");
    assert_eq!(repaired.status.code(), Some(1), "{repaired:?}");
    let out = String::from_utf8_lossy(&repaired.stdout);
    assert!(
        out.contains("\"repairs\"") && out.contains("topics/.tombstone-gone"),
        "{out}"
    );
    assert!(!scratch.path().join("topics/.tombstone-gone").exists());
    // Nor is /etc a kaas volume, nor is it repaired.
    let etc = kaas()
        .args(["fsck", "--repair", "--data-dir", "/etc"])
        .output()
        .expect("run kaas fsck");
    assert_eq!(etc.status.code(), Some(2), "{etc:?}");
}

/// Sends SIGTERM to `child` and waits up to a minute for its exit.
fn terminate(child: &mut std::process::Child) -> std::process::ExitStatus {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    for _ in 0..600 {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    child.kill().expect("kill");
    panic!("kaas did not stop within a minute of SIGTERM");
}

#[test]
fn a_closed_stderr_neither_panics_nor_stops_the_broker() {
    use std::io::BufRead;
    let scratch = tempfile::tempdir().expect("tempdir");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = kaas()
        .env("KAAS_LOG", "info")
        .arg("--data-dir")
        .arg(scratch.path())
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kaas");
    // `kaas 2>&1 | head -3`: three lines read, then the pipe is closed.
    let mut lines = std::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    for _ in 0..3 {
        lines.next().expect("a log line").expect("read");
    }
    drop(lines);
    // The broker's shutdown logs into the closed pipe.
    let status = terminate(&mut child);
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn sigterm_during_start_up_is_a_clean_shutdown() {
    let scratch = tempfile::tempdir().expect("tempdir");
    let mut child = kaas()
        .env("KAAS_LOG", "info")
        .arg("--data-dir")
        .arg(scratch.path())
        .arg("--listen")
        .arg("127.0.0.1:0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kaas");
    // Once the volume is opened the signal handlers are in place, long
    // before the broker serves.
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(child.stderr.take().expect("stderr")).lines();
    while let Some(Ok(line)) = lines.next() {
        if line.contains("volume opened") {
            break;
        }
    }
    let status = terminate(&mut child);
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// Two processes started at the same moment with one broker id, on a
/// volume where that id never ran: one exits saying the id is taken, the
/// other keeps running. Many rounds, so both orders of the race and the
/// exact tie (both reach the exclusive create) come up.
#[test]
fn of_two_processes_started_with_one_broker_id_exactly_one_runs() {
    use std::process::{Child, Stdio};
    use std::time::{Duration, Instant};
    let scratch = tempfile::tempdir().expect("tempdir");
    let start = |data: &std::path::Path, log: &std::path::Path| -> Child {
        #[allow(clippy::disallowed_types)] // the test's own log file
        let log = std::fs::File::create(log).expect("log file");
        kaas()
            .env("KAAS_LOG", "info")
            .arg("--data-dir")
            .arg(data)
            .args(["--broker-id", "3", "--listen", "127.0.0.1:0"])
            .args([
                "--heartbeat-interval-secs",
                "1",
                "--advertised-check-secs",
                "0",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("run kaas")
    };
    for round in 0..6 {
        let data = scratch.path().join(format!("volume-{round}"));
        #[allow(clippy::disallowed_methods)] // the test's own scratch directory
        std::fs::create_dir(&data).expect("mkdir");
        let logs = [0, 1].map(|i| scratch.path().join(format!("{round}-{i}.log")));
        let mut children = [start(&data, &logs[0]), start(&data, &logs[1])];
        // The loser exits within its start-up: at most the claim's two
        // heartbeat intervals and its retries, far below this deadline.
        let deadline = Instant::now() + Duration::from_secs(120);
        let loser = loop {
            let exited: Vec<usize> = (0..2)
                .filter(|&i| children[i].try_wait().expect("wait").is_some())
                .collect();
            if let [i] = exited[..] {
                break i;
            }
            assert!(exited.is_empty(), "round {round}: both processes exited");
            assert!(
                Instant::now() < deadline,
                "round {round}: both processes still run after two minutes"
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let winner = 1 - loser;
        let status = children[loser].wait().expect("wait");
        #[allow(clippy::disallowed_methods)] // the test's own log file
        let said = std::fs::read_to_string(&logs[loser]).expect("log");
        assert!(!status.success(), "round {round}: {status:?}\n{said}");
        assert!(
            said.contains("broker id 3 is already taken"),
            "round {round}: the loser says why it stopped:\n{said}"
        );
        eprintln!(
            "round {round}: {}",
            if said.contains("while this one was starting") {
                "both reached the exclusive create"
            } else {
                "the loser saw the winner's heartbeat"
            }
        );
        // The winner is not superseded by the loser's half-done start:
        // it outlives several of its heartbeat intervals.
        std::thread::sleep(Duration::from_secs(2));
        assert!(
            children[winner].try_wait().expect("wait").is_none(),
            "round {round}: the winner stopped too"
        );
        assert_eq!(terminate(&mut children[winner]).code(), Some(0));
    }
}
