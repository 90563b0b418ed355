//! `kaas`: the production broker binary (real tokio, POSIX volume).

#[cfg(not(madsim))]
fn main() -> std::process::ExitCode {
    production::main()
}

#[cfg(madsim)]
fn main() {
    eprintln!(
        "kaas: this binary was built for the simulator (--cfg madsim); \
         build it without that flag to run a real broker"
    );
    std::process::exit(2);
}

#[cfg(not(madsim))]
mod production {
    use std::process::ExitCode;
    use std::sync::Arc;

    use broker::config::{Command, Config, ScramUser};
    use clap::{CommandFactory, FromArgMatches, parser::ValueSource};
    use vfs::PosixVfs;

    pub fn main() -> ExitCode {
        init_logging();
        let matches = Config::command().get_matches();
        let explicit_dir = matches.value_source("data_dir") != Some(ValueSource::DefaultValue);
        let config = match Config::from_arg_matches(&matches) {
            Ok(c) => c,
            Err(e) => e.exit(),
        };
        match &config.command {
            Some(Command::ScramUser(args)) => return scram_user(&config, args),
            Some(Command::Fsck(args)) => return fsck(&config, args),
            None => {}
        }
        let volume = if explicit_dir {
            PosixVfs::open_volume(&config.data_dir)
        } else {
            PosixVfs::open_or_create_local(&config.data_dir)
        };
        let volume = match volume {
            Ok(v) => v,
            Err(e) if explicit_dir && e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("{}", missing_data_dir(&config.data_dir));
                return ExitCode::from(2);
            }
            Err(e) => {
                eprintln!("kaas: {e}");
                return ExitCode::from(2);
            }
        };
        if let Err(code) = check_mount(&config, volume.root()) {
            return code;
        }
        let volume = if volume.direct_io() && !config.nfs_direct_io {
            tracing::warn!(
                "--nfs-direct-io=false: files on NFS are opened buffered, and a host that \
                 loses power can stall the others for the server's lease"
            );
            volume.with_direct_io(false)
        } else {
            volume
        };
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("kaas: cannot start the async runtime: {e}");
                return ExitCode::FAILURE;
            }
        };
        // Listening from here on: a SIGTERM during start-up (a pod
        // deleted while it starts) is a shutdown, not the default death.
        let signals = runtime.block_on(async { Signals::listen() });
        tracing::info!(data_dir = %volume.root().display(), "volume opened");
        let ran = runtime.block_on(broker::node::run(
            Arc::new(volume),
            config,
            signals.shutdown(),
        ));
        // A volume call that hangs holds a blocking thread, and dropping
        // the runtime would wait for it forever: SIGTERM must stop the
        // process within its deadline whatever the volume does.
        runtime.shutdown_timeout(std::time::Duration::from_secs(2));
        match ran {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("kaas: {e}");
                ExitCode::FAILURE
            }
        }
    }

    /// The data directory's mount, before anything is written to it: on
    /// NFS, refuses options and versions that break the contract (unless
    /// overridden)
    /// and logs the version and attribute-cache timeouts. Where the mount
    /// table cannot be read (not Linux), says so and goes on.
    // The mount table is the host's, not the volume.
    #[allow(clippy::disallowed_methods)]
    fn check_mount(config: &Config, root: &std::path::Path) -> Result<(), ExitCode> {
        use broker::mount_check::{find, refusal};
        let table = match std::fs::read(&config.mountinfo) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(mountinfo = %config.mountinfo.display(), error = %e,
                    "cannot read the mount table: the data directory's mount options are not checked");
                return Ok(());
            }
        };
        let mount = match find(&table, root) {
            Ok(Some(m)) => m,
            Ok(None) => return Ok(()),
            Err(e) => {
                tracing::warn!(error = %e, "the data directory's mount options are not checked");
                return Ok(());
            }
        };
        if !mount.is_nfs() {
            tracing::info!(fs = %mount.fs_type, mount_point = %mount.point.display(),
                "data directory is not on NFS");
            return Ok(());
        }
        tracing::info!(mount = %mount.describe(), "data directory on NFS");
        let stats = config.mountinfo.with_file_name("mountstats");
        match std::fs::read_to_string(&stats)
            .ok()
            .and_then(|s| broker::mount_check::lease_seconds(&s, &mount.point))
        {
            Some(lease) => tracing::info!(
                lease_s = lease,
                "NFSv4 lease: after a server restart, volume calls wait out its grace period \
                 (usually the lease); a power-lost host holds no delegations of kaas's files \
                 (they are opened with O_DIRECT unless --nfs-direct-io=false)"
            ),
            None => tracing::info!(mountstats = %stats.display(), "the NFS lease is not known"),
        }
        let violations = mount.violations();
        if violations.is_empty() {
            return Ok(());
        }
        if config.allow_unsafe_mount {
            for v in &violations {
                tracing::warn!(
                    option = v.option,
                    why = v.why,
                    "unsafe NFS mount option, allowed by --allow-unsafe-mount"
                );
            }
            return Ok(());
        }
        eprintln!("{}", refusal(root, &mount, &violations));
        Err(ExitCode::from(2))
    }

    /// `kaas fsck`: the volume's report, text or JSON; the exit code says
    /// whether it found problems (1) or could not read the volume (2).
    fn fsck(config: &Config, args: &broker::config::Fsck) -> ExitCode {
        let volume = match PosixVfs::open_volume(&config.data_dir) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("kaas fsck: {}: {e}", config.data_dir.display());
                return ExitCode::from(2);
            }
        };
        let runtime = match tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("kaas fsck: cannot start the async runtime: {e}");
                return ExitCode::from(2);
            }
        };
        let checked = runtime.block_on(async {
            broker::fsck::require_volume(&volume).await?;
            let repairs = if args.repair {
                let mut r = broker::fsck::repair(&volume).await?;
                let shared: std::sync::Arc<dyn vfs::Vfs> = std::sync::Arc::new(volume.clone());
                for spec in &args.truncate_damaged {
                    let done = broker::fsck::truncate_damaged(shared.clone(), spec).await;
                    r.note_truncation(spec, done);
                }
                Some(r)
            } else {
                None
            };
            let options = broker::fsck::Options {
                verify_records: !args.metadata_only,
            };
            let mut report = broker::fsck::check_with(&volume, options).await?;
            report.repairs = repairs;
            Ok::<_, std::io::Error>(report)
        });
        let report = match checked {
            Ok(r) => r,
            Err(e) => {
                eprintln!("kaas fsck: {}: {e}", config.data_dir.display());
                return ExitCode::from(2);
            }
        };
        if args.json {
            match serde_json::to_string_pretty(&report) {
                Ok(j) => println!("{j}"),
                Err(e) => {
                    eprintln!("kaas fsck: {e}");
                    return ExitCode::from(2);
                }
            }
        } else {
            print!("{}", report.human());
        }
        ExitCode::from(u8::from(report.has_problems()))
    }

    /// `kaas scram-user`: one user's credentials, written to the volume.
    // The password file is the pod's own (a mounted Secret), not the volume.
    #[allow(clippy::disallowed_methods)]
    fn scram_user(config: &Config, args: &ScramUser) -> ExitCode {
        use broker::security::{Credential, Mechanism, bootstrap_user};
        let password = match (&args.password_file, &args.password) {
            (Some(f), _) => match std::fs::read_to_string(f) {
                Ok(p) => p.trim_end_matches(['\n', '\r']).to_owned(),
                Err(e) => {
                    eprintln!("kaas: {}: {e}", f.display());
                    return ExitCode::from(2);
                }
            },
            (None, Some(p)) => p.clone(),
            (None, None) => {
                eprintln!("kaas: give the password with --password-file or KAAS_SCRAM_PASSWORD");
                return ExitCode::from(2);
            }
        };
        if password.is_empty() || args.user.is_empty() {
            eprintln!("kaas: the user name and the password must not be empty");
            return ExitCode::from(2);
        }
        let volume = match PosixVfs::open_volume(&config.data_dir) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("kaas: {}: {e}", config.data_dir.display());
                return ExitCode::from(2);
            }
        };
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("kaas: cannot start the async runtime: {e}");
                return ExitCode::FAILURE;
            }
        };
        for mechanism in Mechanism::ALL {
            let salt: [u8; 32] = madsim::rand::random();
            let Some(credential) =
                Credential::from_password(mechanism, &password, &salt, args.iterations)
            else {
                eprintln!(
                    "kaas: cannot derive the {} credential",
                    mechanism.sasl_name()
                );
                return ExitCode::FAILURE;
            };
            match runtime.block_on(bootstrap_user(&volume, &args.user, mechanism, credential)) {
                Ok(version) => println!(
                    "{} credential of User:{} written (credentials version {version})",
                    mechanism.sasl_name(),
                    args.user
                ),
                Err(e) => {
                    eprintln!("kaas: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
        ExitCode::SUCCESS
    }

    /// Only the default `./data` is created: a named data directory is, in
    /// production, the mount point of the shared volume, and a missing one
    /// almost always means the volume is not mounted. Creating it would put
    /// the cluster's only copy of the data on this machine's own disk.
    fn missing_data_dir(dir: &std::path::Path) -> String {
        let dir = dir.display();
        format!(
            "kaas: data directory {dir} does not exist.\n\
             kaas does not create a data directory you name: in production it is the \
             mount point of the shared NFS volume, and a missing mount point usually means \
             the volume is not mounted; creating it would put the only copy of the data on \
             this machine's local disk instead.\n\
             To fix: create it (mkdir -p {dir}), mount the volume there, or leave \
             --data-dir (and KAAS_DATA_DIR) unset to use ./data, which is then created."
        )
    }

    fn init_logging() {
        use tracing_subscriber::EnvFilter;
        let filter = EnvFilter::try_from_env("KAAS_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            // A closed stderr (`kaas 2>&1 | head`) drops the log lines; the
            // default reports that with eprintln!, which panics there.
            .log_internal_errors(false)
            .init();
    }

    /// SIGTERM (what Kubernetes sends before killing a pod) and ctrl-c.
    struct Signals {
        term: Option<tokio::signal::unix::Signal>,
        interrupt: Option<tokio::signal::unix::Signal>,
    }

    impl Signals {
        /// Registers the handlers; must run inside the runtime.
        fn listen() -> Self {
            use tokio::signal::unix::{SignalKind, signal};
            let open = |kind: SignalKind, name: &str| match signal(kind) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot listen for {name}");
                    None
                }
            };
            Self {
                term: open(SignalKind::terminate(), "SIGTERM"),
                interrupt: open(SignalKind::interrupt(), "SIGINT"),
            }
        }

        /// Completes on the first of them.
        async fn shutdown(mut self) {
            async fn next(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending().await,
                }
            }
            tokio::select! {
                _ = next(&mut self.term) => {}
                _ = next(&mut self.interrupt) => {}
            }
            tracing::info!("shutdown requested");
        }
    }
}
