//! `testvol`: mounts one backing directory at several mount points, each
//! a client host of a volume that loses power on command (see the crate's
//! README for the control socket and the knobs).

// A test tool the simulator never runs: it is the filesystem under the
// broker (std::fs on the backing directory) and serves the kernel from
// system threads, which the broker's own rules forbid.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use clap::Parser;
use fuser::{MountOption, Session};
use testvol::mount::{Caches, Delayer, Mount};
use testvol::volume::{Latency, Volume};

/// A FUSE test volume that keeps what is not fsynced as pending and drops
/// it on a power cut; several mounts of it behave as several NFS clients.
#[derive(Parser, Debug)]
#[command(name = "testvol", version)]
struct Args {
    /// The directory that holds the volume's files.
    #[arg(long)]
    backing: PathBuf,
    /// A mount point, once per client host (mount 0, 1, ... in order).
    #[arg(long = "mount", required = true)]
    mounts: Vec<PathBuf>,
    /// The control socket (see the README): cut, fail, full, latency, stats.
    #[arg(long)]
    control: PathBuf,
    /// Latency of an fsync of a file or a directory, in milliseconds (a
    /// cloud NFS service commits in 2 to 3 ms).
    #[arg(long, default_value_t = 2.5)]
    commit_ms: f64,
    /// Latency of a create, mkdir, rename, unlink or rmdir, in ms.
    #[arg(long, default_value_t = 1.0)]
    metadata_ms: f64,
    /// How long a mount's kernel trusts a name it looked up, in ms (NFS
    /// caches positive lookups too). A name another mount replaced
    /// meanwhile leads to a removed file, which answers ESTALE, and the
    /// kernel looks the name up again: open still sees the newest file.
    #[arg(long, default_value_t = 1000)]
    entry_ttl_ms: u64,
    /// How long a mount's kernel trusts a file's attributes, in ms (NFS's
    /// acregmin is 3 s).
    #[arg(long, default_value_t = 1000)]
    attr_ttl_ms: u64,
    /// How long a mount remembers that a name did not exist, in ms: 0 is
    /// NFS's `lookupcache=positive`, which kaas requires; more is
    /// `lookupcache=all`, to show what goes wrong with it.
    #[arg(long, default_value_t = 0)]
    negative_ttl_ms: u64,
    /// Print every create, rename, unlink and sync to stderr.
    #[arg(long)]
    trace: bool,
    /// Threads that wait out latencies (operations in flight at once).
    #[arg(long, default_value_t = 64)]
    delay_threads: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    // Before any thread starts, so that all of them inherit the mask and
    // only the waiting thread takes the signals.
    let signals = block_signals();
    match run(args, signals) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("testvol: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Args, signals: libc::sigset_t) -> Result<(), String> {
    let mut volume = Volume::new(&args.backing, args.mounts.len() as u32)
        .map_err(|e| format!("{}: {e}", args.backing.display()))?;
    volume.latency = Latency {
        commit: Duration::from_secs_f64(args.commit_ms.max(0.0) / 1000.0),
        metadata: Duration::from_secs_f64(args.metadata_ms.max(0.0) / 1000.0),
    };
    volume.trace = args.trace;
    let volume = Arc::new(Mutex::new(volume));
    let caches = Caches {
        entry: Duration::from_millis(args.entry_ttl_ms),
        attr: Duration::from_millis(args.attr_ttl_ms),
        negative: Duration::from_millis(args.negative_ttl_ms),
    };
    let delayer = Delayer::new(args.delay_threads.max(1));
    let _ = std::fs::remove_file(&args.control);
    let listener = UnixListener::bind(&args.control)
        .map_err(|e| format!("control socket {}: {e}", args.control.display()))?;
    let mut sessions = Vec::new();
    for (id, point) in args.mounts.iter().enumerate() {
        let fs = Mount {
            id: id as u32,
            volume: volume.clone(),
            caches,
            delayer: delayer.clone(),
        };
        let options = [
            MountOption::FSName("testvol".into()),
            MountOption::Subtype("testvol".into()),
            MountOption::AllowOther,
        ];
        let session = Session::new(fs, point, &options).map_err(|e| {
            format!(
                "cannot mount {} (FUSE needs /dev/fuse and the right to mount): {e}",
                point.display()
            )
        })?;
        sessions.push(session.spawn().map_err(|e| e.to_string())?);
    }
    eprintln!(
        "testvol: {} mounted at {} mount(s); control socket {}",
        args.backing.display(),
        args.mounts.len(),
        args.control.display()
    );
    let (quit_tx, quit_rx) = channel();
    let on_signal = quit_tx.clone();
    thread::spawn(move || wait_for_signal(signals, on_signal));
    {
        let volume = volume.clone();
        thread::spawn(move || testvol::control::serve(listener, volume, quit_tx));
    }
    let _ = quit_rx.recv();
    let _ = std::fs::remove_file(&args.control);
    // Dropping a session unmounts it (lazily: a process still inside it
    // gets ENOTCONN, not a hang).
    drop(sessions);
    Ok(())
}

fn block_signals() -> libc::sigset_t {
    // SAFETY: a signal set built with sigemptyset/sigaddset and blocked
    // with pthread_sigmask, as POSIX prescribes.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Turns SIGTERM and SIGINT into a clean unmount.
fn wait_for_signal(set: libc::sigset_t, quit: std::sync::mpsc::Sender<()>) {
    let mut sig = 0;
    // SAFETY: `set` holds signals every thread blocks.
    unsafe {
        libc::sigwait(&set, &mut sig);
    }
    let _ = quit.send(());
}
