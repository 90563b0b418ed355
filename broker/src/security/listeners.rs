//! Named listeners, each with its security protocol and advertised address,
//! as Kafka's `listeners`, `advertised.listeners` and
//! `listener.security.protocol.map` describe them.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    pub fn tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    pub fn sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

impl FromStr for SecurityProtocol {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_uppercase().as_str() {
            "PLAINTEXT" => Ok(Self::Plaintext),
            "SSL" => Ok(Self::Ssl),
            "SASL_PLAINTEXT" => Ok(Self::SaslPlaintext),
            "SASL_SSL" => Ok(Self::SaslSsl),
            _ => Err(format!(
                "unknown security protocol `{s}` (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)"
            )),
        }
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        })
    }
}

/// One listener: where it binds, what clients are told, how it is secured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub bind: SocketAddr,
    pub advertised: String,
    pub protocol: SecurityProtocol,
}

/// The flags that describe the listeners, as given.
#[derive(Clone, Debug)]
pub struct ListenerFlags<'a> {
    pub listeners: Option<&'a str>,
    pub advertised_listeners: Option<&'a str>,
    pub protocol_map: Option<&'a str>,
    /// The single-listener flags (`--listen`, `--advertised-listener`),
    /// used when `listeners` is unset.
    pub listen: SocketAddr,
    pub advertised_listener: Option<&'a str>,
}

/// `NAME://host:port` items of a comma-separated list.
fn named_addresses(flag: &str, list: &str) -> Result<Vec<(String, String)>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(|item| {
            let (name, addr) = item
                .split_once("://")
                .ok_or_else(|| format!("{flag}: `{item}` is not NAME://host:port"))?;
            let valid = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !valid {
                return Err(format!("{flag}: `{name}` is not a listener name"));
            }
            Ok((name.to_ascii_uppercase(), addr.to_owned()))
        })
        .collect()
}

/// Resolves the flags into listeners, checking that every name is bound
/// once, has a protocol, and that advertised names are listeners.
pub fn resolve(f: &ListenerFlags<'_>) -> Result<Vec<Listener>, String> {
    let mut map: BTreeMap<String, SecurityProtocol> = BTreeMap::new();
    if let Some(m) = f.protocol_map {
        for item in m.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (name, proto) = item.split_once(':').ok_or_else(|| {
                format!("--listener-security-protocol-map: `{item}` is not NAME:PROTOCOL")
            })?;
            map.insert(name.to_ascii_uppercase(), proto.parse()?);
        }
    }
    let protocol_of = |name: &str| -> Result<SecurityProtocol, String> {
        map.get(name).copied().map_or_else(
            || {
                name.parse().map_err(|_| {
                    format!(
                        "listener {name} has no security protocol: add {name}:<protocol> to \
                         --listener-security-protocol-map"
                    )
                })
            },
            Ok,
        )
    };
    let Some(list) = f.listeners else {
        if f.advertised_listeners.is_some() {
            return Err(
                "--advertised-listeners needs --listeners; with the single --listen, \
                        use --advertised-listener"
                    .into(),
            );
        }
        let name = "PLAINTEXT".to_owned();
        return Ok(vec![Listener {
            protocol: protocol_of(&name)?,
            name,
            bind: f.listen,
            advertised: f
                .advertised_listener
                .map_or_else(|| f.listen.to_string(), str::to_owned),
        }]);
    };
    let advertised: BTreeMap<String, String> = match f.advertised_listeners {
        Some(a) => named_addresses("--advertised-listeners", a)?
            .into_iter()
            .collect(),
        None => BTreeMap::new(),
    };
    let mut out: Vec<Listener> = Vec::new();
    for (name, addr) in named_addresses("--listeners", list)? {
        if out.iter().any(|l| l.name == name) {
            return Err(format!("--listeners: {name} is named twice"));
        }
        let bind: SocketAddr = addr.parse().map_err(|e| {
            format!("--listeners: {name}://{addr}: {e} (bind to an ip:port, such as 0.0.0.0:9092)")
        })?;
        out.push(Listener {
            protocol: protocol_of(&name)?,
            advertised: advertised
                .get(&name)
                .cloned()
                .unwrap_or_else(|| bind.to_string()),
            name,
            bind,
        });
    }
    if out.is_empty() {
        return Err("--listeners names no listener".into());
    }
    if let Some(unknown) = advertised
        .keys()
        .find(|n| !out.iter().any(|l| &l.name == *n))
    {
        return Err(format!(
            "--advertised-listeners names {unknown}, which --listeners does not"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags<'a>(listeners: &'a str, advertised: &'a str, map: &'a str) -> ListenerFlags<'a> {
        ListenerFlags {
            listeners: Some(listeners).filter(|s| !s.is_empty()),
            advertised_listeners: Some(advertised).filter(|s| !s.is_empty()),
            protocol_map: Some(map).filter(|s| !s.is_empty()),
            listen: "127.0.0.1:9092".parse().unwrap(),
            advertised_listener: None,
        }
    }

    #[test]
    fn the_single_listener_is_plaintext_on_listen() {
        let l = resolve(&flags("", "", "")).unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].name, "PLAINTEXT");
        assert_eq!(l[0].advertised, "127.0.0.1:9092");
        assert_eq!(l[0].protocol, SecurityProtocol::Plaintext);
    }

    #[test]
    fn named_listeners_take_their_protocols_and_addresses() {
        let l = resolve(&flags(
            "INTERNAL://0.0.0.0:9092,external://0.0.0.0:9093",
            "INTERNAL://kaas-0.kaas:9092,EXTERNAL://203.0.113.7:30093",
            "INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
        ))
        .unwrap();
        assert_eq!(l[1].name, "EXTERNAL");
        assert_eq!(l[1].protocol, SecurityProtocol::SaslSsl);
        assert_eq!(l[1].advertised, "203.0.113.7:30093");
        assert_eq!(l[0].advertised, "kaas-0.kaas:9092");
        let plain = resolve(&flags("SASL_SSL://127.0.0.1:9094", "", "")).unwrap();
        assert_eq!(plain[0].protocol, SecurityProtocol::SaslSsl);
        assert_eq!(plain[0].advertised, "127.0.0.1:9094");
    }

    #[test]
    fn mistakes_are_named() {
        for (l, a, m, says) in [
            ("CLIENT://0.0.0.0:1", "", "", "no security protocol"),
            ("A://0.0.0.0:1,a://0.0.0.0:2", "", "A:SSL", "named twice"),
            ("A://nowhere", "", "A:SSL", "bind to an ip:port"),
            (
                "A://0.0.0.0:1",
                "B://x:1",
                "A:SSL",
                "which --listeners does not",
            ),
            ("A://0.0.0.0:1", "", "A:TLS", "unknown security protocol"),
            ("0.0.0.0:1", "", "", "NAME://host:port"),
        ] {
            let err = resolve(&flags(l, a, m)).unwrap_err();
            assert!(err.contains(says), "{l} {a} {m}: {err}");
        }
    }
}
