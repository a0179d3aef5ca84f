//! Mutual TLS's client authorities, read again when their file changes (a CA bundle rotated
//! beside the certificate) without a restart: a handshake checks a client against the
//! authorities read last that held a certificate.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use tokio_rustls::rustls;

/// The verifier of the authorities in `path`, swapped when they are read again.
#[derive(Debug)]
pub(super) struct ClientCas {
    path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Arc<dyn ClientCertVerifier>>,
}

impl ClientCas {
    /// The authorities in `path`, read now.
    pub(super) fn read(path: &Path, provider: Arc<CryptoProvider>) -> std::io::Result<ClientCas> {
        let current = super::tls::client_verifier(path, Arc::clone(&provider))?;
        Ok(ClientCas {
            path: path.to_owned(),
            provider,
            current: RwLock::new(current),
        })
    }

    /// The file they are read from.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file again; the authorities in use stay if it holds none now, said in a
    /// warning.
    pub(super) fn reload(&self) {
        match super::tls::client_verifier(&self.path, Arc::clone(&self.provider)) {
            Ok(next) => {
                *self.current.write().unwrap_or_else(PoisonError::into_inner) = next;
                tracing::info!(ca = %self.path.display(), "TLS client authorities read again");
            }
            Err(e) => {
                tracing::warn!("TLS client authorities not read again, those in use stay: {e}")
            }
        }
    }

    fn now(&self) -> Arc<dyn ClientCertVerifier> {
        Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner))
    }
}

impl ClientCertVerifier for ClientCas {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    /// None: the authorities change, and the hints would be borrowed from those in use. A
    /// client then offers the certificate it has (Envoy sends its one).
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.now()
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.now().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.now().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.now().supported_verify_schemes()
    }
}
