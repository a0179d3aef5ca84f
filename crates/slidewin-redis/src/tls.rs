//! [`RedisTls`]: Redis over TLS (`rediss://`) with certificates of the operator's own: the
//! authorities to trust, and a client certificate for a Redis that asks for one. Most managed
//! Redis services accept TLS only. With the `tls` feature.

use std::fmt;

use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
use redis::{Client, ClientTlsConfig, IntoConnectionInfo, TlsCertificates, TlsMode};

use crate::connect::{client, cluster_client, not_a_url};
use crate::error::{RedisError, redact};
use crate::limiter::RedisLimiter;
use crate::sentinel::{self, SentinelPrimary};

/// The certificates of a connection over TLS, in PEM. Without them, a `rediss://` URL trusts
/// the system's authorities and sends no client certificate. A password or an ACL user goes
/// in the URL, as always (`rediss://user:password@host:6380/`).
///
/// ```
/// use slidewin_redis::RedisTls;
/// let tls = RedisTls {
///     ca: Some(b"-----BEGIN CERTIFICATE-----\n...".to_vec()),
///     ..RedisTls::default()
/// };
/// assert!(format!("{tls:?}").contains("ca: true"));
/// ```
#[derive(Clone, Default)]
pub struct RedisTls {
    /// The authorities to trust instead of the system's (PEM `CERTIFICATE` blocks).
    pub ca: Option<Vec<u8>>,
    /// A client certificate chain and its private key (PEM), for a Redis that verifies its
    /// clients (`tls-auth-clients yes`).
    pub client: Option<(Vec<u8>, Vec<u8>)>,
}

/// Says which certificates are set, never their bytes.
impl fmt::Debug for RedisTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisTls")
            .field("ca", &self.ca.is_some())
            .field("client", &self.client.is_some())
            .finish()
    }
}

impl RedisTls {
    fn certificates(&self) -> TlsCertificates {
        TlsCertificates {
            client_tls: self
                .client
                .clone()
                .map(|(client_cert, client_key)| ClientTlsConfig {
                    client_cert,
                    client_key,
                }),
            root_cert: self.ca.clone(),
        }
    }
}

impl RedisLimiter {
    /// [`connect_lazily`](RedisLimiter::connect_lazily) to a `rediss://` URL with `tls`'s
    /// certificates.
    ///
    /// # Errors
    ///
    /// As [`connect_lazily`](RedisLimiter::connect_lazily); a certificate or key that does
    /// not parse, said with the URL (its password hidden).
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin_redis::{RedisLimiter, RedisTls};
    /// let tls = RedisTls { ca: Some(std::fs::read("/etc/redis/ca.pem")?), ..RedisTls::default() };
    /// let redis = RedisLimiter::connect_lazily_with_tls("rediss://:secret@redis.internal:6380/", &tls).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_lazily_with_tls(
        url: &str,
        tls: &RedisTls,
    ) -> Result<RedisLimiter, RedisError> {
        // The URL checked as any other first: its error says what is wrong with it.
        let (_, shown) = client(url)?;
        let info = url
            .into_connection_info()
            .map_err(|e| not_a_url(url, &shown, &e))?;
        let client =
            Client::build_with_tls(info, tls.certificates()).map_err(|e| RedisError::Config {
                detail: format!("`{shown}`: the TLS certificates: {e}"),
            })?;
        RedisLimiter::lazily(client, shown).await
    }

    /// [`connect_cluster_lazily`](RedisLimiter::connect_cluster_lazily) to `rediss://` nodes
    /// with `tls`'s certificates.
    ///
    /// # Errors
    ///
    /// As [`connect_cluster_lazily`](RedisLimiter::connect_cluster_lazily).
    pub async fn connect_cluster_lazily_with_tls(
        nodes: &[&str],
        tls: &RedisTls,
    ) -> Result<RedisLimiter, RedisError> {
        let (client, seeds) = cluster_client(nodes, |builder| builder.certs(tls.certificates()))?;
        RedisLimiter::cluster_lazily(client, seeds).await
    }

    /// [`connect_sentinel_lazily`](RedisLimiter::connect_sentinel_lazily) over TLS: the
    /// sentinels are `rediss://` URLs, and the primary they name is reached over TLS too, both
    /// with `tls`'s certificates. The sentinels share one user and password (a sentinel URL's,
    /// `rediss://:password@host:26379/`); `auth` is the primary's.
    ///
    /// # Errors
    ///
    /// As [`connect_sentinel_lazily`](RedisLimiter::connect_sentinel_lazily); a sentinel that
    /// is not `rediss://`, sentinels with different passwords, a certificate that does not
    /// parse.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use slidewin_redis::{RedisLimiter, RedisTls};
    /// let tls = RedisTls { ca: Some(std::fs::read("/etc/redis/ca.pem")?), ..RedisTls::default() };
    /// let sentinels = ["rediss://sentinel-0.redis:26379/", "rediss://sentinel-1.redis:26379/"];
    /// let redis =
    ///     RedisLimiter::connect_sentinel_lazily_with_tls("mymaster", &sentinels, Some("secret"), &tls)
    ///         .await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn connect_sentinel_lazily_with_tls(
        master: &str,
        sentinels: &[&str],
        auth: Option<&str>,
        tls: &RedisTls,
    ) -> Result<RedisLimiter, RedisError> {
        let shown = sentinel::shown(master, sentinels)?;
        let config = |detail: String| RedisError::Config { detail };
        let mut addresses = Vec::with_capacity(sentinels.len());
        let mut theirs: Option<(Option<String>, Option<String>)> = None;
        for url in sentinels {
            let redacted = redact(url);
            if !url.starts_with("rediss://") {
                return Err(config(format!(
                    "`{redacted}`: over TLS, every sentinel is a rediss:// URL"
                )));
            }
            let info = url
                .into_connection_info()
                .map_err(|e| not_a_url(url, &redacted, &e))?;
            let settings = info.redis_settings();
            let these = (
                settings.username().map(str::to_owned),
                settings.password().map(str::to_owned),
            );
            if theirs.get_or_insert_with(|| these.clone()) != &these {
                return Err(config(format!(
                    "{shown}: the sentinels' URLs name different users or passwords; they share one"
                )));
            }
            addresses.push(info.addr().clone());
        }
        let mut builder = SentinelClientBuilder::new(addresses, master, SentinelServerType::Master)
            .map_err(|e| config(format!("{shown}: {e}")))?
            .set_client_to_sentinel_tls_mode(TlsMode::Secure)
            .set_client_to_sentinel_certificates(tls.certificates())
            .set_client_to_redis_tls_mode(TlsMode::Secure)
            .set_client_to_redis_certificates(tls.certificates());
        let (user, password) = theirs.unwrap_or_default();
        if let Some(user) = user {
            builder = builder.set_client_to_sentinel_username(user);
        }
        if let Some(password) = password {
            builder = builder.set_client_to_sentinel_password(password);
        }
        if let Some((user, password)) = sentinel::credentials(auth) {
            builder = builder.set_client_to_redis_password(password);
            if let Some(user) = user {
                builder = builder.set_client_to_redis_username(user);
            }
        }
        let client = builder
            .build()
            .map_err(|e| config(format!("{shown}: the TLS certificates: {e}")))?;
        RedisLimiter::on_sentinel(SentinelPrimary::with_client(client, shown)).await
    }
}
