//! Before a broker follows the cluster: the start-up checks, the listeners,
//! and the timings its config sets.

use super::*;

/// The start-up checks, each a clear error (the binary exits with it): the
/// volume is this cluster's, this process holds the broker id's newest
/// claim, the volume takes writes. Returns the cluster id, how many
/// heartbeat temps of earlier runs were swept, and the claim.
pub(super) async fn start_up(
    vfs: &dyn Vfs,
    config: &Config,
    incarnation: u64,
) -> io::Result<(String, usize, IdClaim)> {
    let id = config.broker_id;
    redrive("preparing the volume", || prepare_volume(vfs)).await?;
    let cluster_id = redrive("settling the cluster id", || {
        identity::settle(vfs, id, config.cluster_id.as_deref())
    })
    .await?;
    let token = ClaimToken::fresh(&format!(
        "broker {id} incarnation {incarnation:016x} advertising {}",
        config.advertised()
    ));
    let claimed = redrive("claiming the broker id", || {
        id_claim::claim_id(vfs, id, 2 * heartbeat_interval(config), &token)
    })
    .await
    // The claim is the first write to brokers/: a volume that refuses it
    // (read-only, another user's) is told apart from a taken id.
    .map_err(|e| match e.kind() {
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
            startup::refuses_writes(e)
        }
        _ => e,
    })?;
    // Only now is this broker id this process's, so only now are its
    // staged identity proposals of earlier runs its own to remove.
    redrive("sweeping staged cluster ids", || {
        identity::sweep_own_staging(vfs, id)
    })
    .await?;
    let swept = redrive("sweeping heartbeat temps", || heartbeat::sweep(vfs, id)).await?;
    redrive("probing the volume", || startup::probe_writable(vfs, id)).await?;
    Ok((cluster_id, swept, claimed))
}

/// The name of the listener brokers reach each other on.
pub(super) fn inter_broker_listener(config: &Config) -> Arc<str> {
    let name = config
        .inter_broker_listener_name
        .clone()
        .map(|n| n.to_ascii_uppercase())
        .or_else(|| config.listeners().ok().map(|l| l[0].name.clone()))
        .unwrap_or_else(|| "PLAINTEXT".into());
    Arc::from(name.as_str())
}

pub(super) fn heartbeat_interval(config: &Config) -> Duration {
    Duration::from_secs(config.heartbeat_interval_secs.max(1))
}

pub(super) fn session_timeout(config: &Config) -> Duration {
    Duration::from_secs(config.session_timeout_secs.max(1))
}

/// The Kafka listeners, bound, with what each is.
pub(super) type Bound = Vec<(ListenerInfo, TcpListener)>;

/// Binds the Kafka listeners (served only once the cluster is known) and
/// starts the probe server if one is configured.
pub(super) async fn listen(
    config: &Config,
    metrics: &Metrics,
) -> io::Result<(Bound, Option<JoinHandle<()>>, Readiness)> {
    let listeners = config
        .listeners()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // One acceptor per TLS protocol in use: SSL and SASL_SSL differ in
    // whether they ask for client certificates.
    #[cfg(not(madsim))]
    let mut tls = BTreeMap::new();
    #[cfg(not(madsim))]
    for l in listeners.iter().filter(|l| l.protocol.tls()) {
        let key = l.protocol.to_string();
        if tls.contains_key(&key) {
            continue;
        }
        if let Some(files) = config.tls_files(l.protocol) {
            let r = crate::security::tls::Reloading::new(files)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("TLS: {e}")))?;
            tokio::spawn(r.clone().watch(Duration::from_secs(config.ssl_reload_secs)));
            tls.insert(key, r);
        }
    }
    let mut bound = Vec::new();
    for l in listeners {
        let socket = TcpListener::bind(l.bind).await.map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot listen on {} (listener {}): {e}", l.bind, l.name),
            )
        })?;
        tracing::info!(
            listener = %l.name,
            bind = %l.bind,
            advertised = %l.advertised,
            protocol = %l.protocol,
            "listener bound"
        );
        let info = ListenerInfo {
            name: Arc::from(l.name.as_str()),
            protocol: l.protocol,
            inter_broker: *inter_broker_listener(config) == *l.name,
            #[cfg(not(madsim))]
            tls: tls.get(&l.protocol.to_string()).cloned(),
        };
        bound.push((info, socket));
    }
    let readiness = Readiness::default();
    let health = match config.health_listen {
        Some(addr) => {
            let l = TcpListener::bind(addr).await.map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot listen on {addr} (--health-listen): {e}"),
                )
            })?;
            Some(tokio::spawn(health::serve(
                l,
                readiness.clone(),
                metrics.clone(),
            )))
        }
        None => None,
    };
    Ok((bound, health, readiness))
}

/// Every listener's advertised address, when there are several.
pub(super) fn endpoints(config: &Config) -> BTreeMap<String, String> {
    match config.listeners() {
        Ok(l) if l.len() > 1 => l.into_iter().map(|l| (l.name, l.advertised)).collect(),
        _ => BTreeMap::new(),
    }
}
