//! TLS on the listeners: the certificate, read again when its files change (cert-manager
//! rotates them) without a restart or a dropped connection, and for mutual TLS the
//! authorities a client's certificate must chain to.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use tokio::sync::mpsc;
use tokio_rustls::{TlsAcceptor, rustls};

use super::TlsFiles;
use super::client_cas::ClientCas;

/// TLS, read and checked: rustls' acceptor for each kind of listener, offering HTTP/1.1 on the
/// HTTP ones (none when TLS is on gRPC only) and HTTP/2 on gRPC (ALPN), and the certificate they
/// share.
pub(super) struct Tls {
    pub(super) http: Option<TlsAcceptor>,
    pub(super) grpc: TlsAcceptor,
    certs: Arc<Certs>,
}

/// The certificate both listeners present: the one read last that held a valid chain and its
/// key. A handshake takes it as it begins; a connection keeps the one it began with.
struct Certs {
    files: TlsFiles,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<CertifiedKey>>,
    /// Mutual TLS's authorities, read again with the certificate.
    client_cas: Option<Arc<ClientCas>>,
}

impl fmt::Debug for Certs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Certs")
            .field("cert", &self.files.cert)
            .field("key", &self.files.key)
            .finish_non_exhaustive()
    }
}

impl ResolvesServerCert for Certs {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.current.read().unwrap_or_else(PoisonError::into_inner),
        ))
    }
}

/// `what` wrong with `path`, as an error naming it.
fn bad(path: &Path, what: String) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("TLS: {}: {what}", path.display()),
    )
}

fn read(path: &Path) -> io::Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("TLS: cannot read {}: {e}", path.display()),
        )
    })
}

impl Certs {
    /// The chain and key of `files`, checked to belong together.
    fn read(files: &TlsFiles, provider: &CryptoProvider) -> io::Result<CertifiedKey> {
        let (cert_pem, key_pem) = (read(&files.cert)?, read(&files.key)?);
        let certs = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(&files.cert, format!("not a PEM certificate chain: {e}")))?;
        if certs.is_empty() {
            return Err(bad(&files.cert, "holds no CERTIFICATE block".to_owned()));
        }
        let key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| bad(&files.key, format!("holds no PEM private key: {e}")))?;
        CertifiedKey::from_der(certs, key, provider).map_err(|e| {
            bad(
                &files.key,
                format!("does not fit the certificate {}: {e}", files.cert.display()),
            )
        })
    }

    /// Reads the files again; the certificate in use stays if they are not valid now (a
    /// rotation half written): said in a warning, and read again at the next change.
    fn reload(&self) {
        match Certs::read(&self.files, &self.provider) {
            Ok(next) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(next);
                tracing::info!(cert = %self.files.cert.display(), "TLS certificate read again");
            }
            Err(e) => tracing::warn!("TLS certificate not read again, the one in use stays: {e}"),
        }
        if let Some(cas) = &self.client_cas {
            cas.reload();
        }
    }
}

/// The authorities in `path`, for verifying clients.
pub(super) fn client_verifier(
    path: &Path,
    provider: Arc<CryptoProvider>,
) -> io::Result<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(&read(path)?) {
        let ca = ca.map_err(|e| bad(path, format!("not a PEM certificate: {e}")))?;
        roots
            .add(ca)
            .map_err(|e| bad(path, format!("not a certificate authority: {e}")))?;
    }
    if roots.is_empty() {
        return Err(bad(path, "holds no CERTIFICATE block".to_owned()));
    }
    WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
        .build()
        .map_err(|e| bad(path, format!("cannot verify clients with it: {e}")))
}

impl Tls {
    pub(super) fn load(files: &TlsFiles) -> io::Result<Tls> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client_cas = files
            .client_ca
            .as_deref()
            .map(|path| ClientCas::read(path, Arc::clone(&provider)).map(Arc::new))
            .transpose()?;
        let certs = Arc::new(Certs {
            current: RwLock::new(Arc::new(Certs::read(files, &provider)?)),
            files: files.clone(),
            provider: Arc::clone(&provider),
            client_cas: client_cas.clone(),
        });
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| io::Error::other(format!("TLS: {e}")))?;
        let builder = match client_cas {
            None => builder.with_no_client_auth(),
            Some(cas) => builder.with_client_cert_verifier(cas),
        };
        let mut config =
            builder.with_cert_resolver(Arc::clone(&certs) as Arc<dyn ResolvesServerCert>);
        let mut grpc = config.clone();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        grpc.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Tls {
            http: (!files.only_grpc).then(|| TlsAcceptor::from(Arc::new(config))),
            grpc: TlsAcceptor::from(Arc::new(grpc)),
            certs,
        })
    }

    /// Reads the certificate again whenever something changes in the directories of its
    /// files (a file rewritten, or Kubernetes' swap of a Secret's `..data` link), until the
    /// returned guard is dropped.
    ///
    /// # Errors
    ///
    /// The file watcher could not start.
    pub(super) fn watch(&self) -> io::Result<Rotation> {
        use notify::{RecursiveMode, Watcher};

        let (tx, mut rx) = mpsc::channel::<()>(1);
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
                if event.is_ok_and(|event| !event.kind.is_access()) {
                    // A full channel means a reload is already due.
                    let _ = tx.try_send(());
                }
            })
            .map_err(|e| io::Error::other(format!("TLS: cannot watch the certificate: {e}")))?;
        let files = &self.certs.files;
        let client_ca = self
            .certs
            .client_cas
            .as_ref()
            .map(|cas| cas.path().to_path_buf());
        let mut dirs: Vec<PathBuf> = [Some(&files.cert), Some(&files.key), client_ca.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|file| file.parent().map(Path::to_path_buf))
            .map(|dir| {
                if dir.as_os_str().is_empty() {
                    PathBuf::from(".")
                } else {
                    dir
                }
            })
            .collect();
        dirs.sort();
        dirs.dedup();
        for dir in &dirs {
            watcher
                .watch(dir, RecursiveMode::NonRecursive)
                .map_err(|e| {
                    io::Error::other(format!("TLS: cannot watch {}: {e}", dir.display()))
                })?;
        }
        let certs = Arc::clone(&self.certs);
        let task = tokio::spawn(async move {
            while rx.recv().await.is_some() {
                // A rotation writes the chain and the key in several steps: let them settle.
                tokio::time::sleep(Duration::from_millis(100)).await;
                while rx.try_recv().is_ok() {}
                certs.reload();
            }
        });
        Ok(Rotation {
            _watcher: Box::new(watcher),
            task,
        })
    }
}

/// Stops reading the certificate again when dropped.
pub(super) struct Rotation {
    _watcher: Box<dyn notify::Watcher + Send>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Rotation {
    fn drop(&mut self) {
        self.task.abort();
    }
}
