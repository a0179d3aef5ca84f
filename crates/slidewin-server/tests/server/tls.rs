//! TLS as a managed deployment needs it (issue 31): mutual TLS on both listeners (with a
//! client CA, a client must present a certificate that chains to it, or its handshake is
//! refused), and a certificate rotated on disk served without a restart or a dropped
//! connection. Certificates are made at test time.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest as PbRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair,
};
use slidewin::time::MonotonicClock;
use slidewin_server::{
    Bounds, Config, Endpoints, Engine, Listeners, Metrics, ServeOptions, TlsFiles,
};
use slidewin_store::Memory;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::rustls;
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

use crate::support::server::{self, Served};

/// A certificate and its key, in PEM.
pub(crate) struct Pem {
    pub(crate) cert: String,
    pub(crate) key: String,
}

/// The server's certificate for `localhost`, a client CA, a client it signed, and a client
/// signed by another CA, with the server's files written to a fresh directory.
struct Pki {
    dir: PathBuf,
    /// The server's certificate, which the clients trust.
    server: String,
    trusted: Pem,
    stranger: Pem,
}

/// `params` named `name`: a leaf whose name were its issuer's would look self-signed to
/// OpenSSL (Redis), and rcgen names every certificate alike by default.
pub(crate) fn named(mut params: CertificateParams, name: &str) -> CertificateParams {
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params
}

pub(crate) fn authority() -> CertifiedIssuer<'static, KeyPair> {
    let mut params = named(
        CertificateParams::new(Vec::<String>::new()).unwrap(),
        "test CA",
    );
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

pub(crate) fn client_of(ca: &CertifiedIssuer<'static, KeyPair>) -> Pem {
    let mut params = named(
        CertificateParams::new(vec!["envoy".to_owned()]).unwrap(),
        "envoy",
    );
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    Pem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    }
}

fn pki(test: &str) -> (Pki, TlsFiles) {
    let server = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (ca, other) = (authority(), authority());
    let dir = std::env::temp_dir().join(format!("slidewin-mtls-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let files = TlsFiles {
        cert: dir.join("cert.pem"),
        key: dir.join("key.pem"),
        client_ca: Some(dir.join("client-ca.pem")),
        only_grpc: false,
    };
    std::fs::write(&files.cert, server.cert.pem()).unwrap();
    std::fs::write(&files.key, server.signing_key.serialize_pem()).unwrap();
    std::fs::write(files.client_ca.as_ref().unwrap(), ca.pem()).unwrap();
    let pki = Pki {
        dir,
        server: server.cert.pem(),
        trusted: client_of(&ca),
        stranger: client_of(&other),
    };
    (pki, files)
}

async fn start(files: TlsFiles) -> Served {
    let config = Config::parse(Config::EXAMPLE, "example.yaml").unwrap();
    let engine = Engine::new(
        Memory::new(),
        config,
        Arc::new(MonotonicClock),
        Bounds::default(),
        Metrics::new(),
    )
    .unwrap();
    let options = ServeOptions {
        tls: Some(files),
        ..server::local()
    };
    Served::start(Endpoints::new(engine, vec![]), &options).await
}

/// A gRPC check over TLS as `client` (none: no certificate): whether it was answered.
async fn grpc_answered(pki: &Pki, grpc: SocketAddr, client: Option<&Pem>) -> bool {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&pki.server))
        .domain_name("localhost");
    if let Some(client) = client {
        tls = tls.identity(Identity::from_pem(&client.cert, &client.key));
    }
    let endpoint = Endpoint::from_shared(format!("https://{grpc}"))
        .unwrap()
        .tls_config(tls)
        .unwrap();
    let Ok(channel) = endpoint.connect().await else {
        return false;
    };
    let request = PbRequest {
        domain: "example".to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "client".to_owned(),
                value: "ann".to_owned(),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    };
    RateLimitServiceClient::new(channel)
        .should_rate_limit(request)
        .await
        .is_ok()
}

/// `GET /healthz` over TLS as `client`: the answer's first line, or `None` when the handshake
/// or the connection failed.
async fn https_status(pki: &Pki, http: SocketAddr, client: Option<&Pem>) -> Option<String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(pki.server.as_bytes()).unwrap())
        .unwrap();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let config = match client {
        None => builder.with_no_client_auth(),
        Some(client) => builder
            .with_client_auth_cert(
                vec![CertificateDer::from_pem_slice(client.cert.as_bytes()).unwrap()],
                PrivateKeyDer::from_pem_slice(client.key.as_bytes()).unwrap(),
            )
            .unwrap(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(http).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    // In TLS 1.3 the client finishes its handshake before the server has checked its
    // certificate: a refusal shows as the connection failing at the first read.
    let mut tls = connector.connect(name, tcp).await.ok()?;
    tls.write_all(b"GET /healthz HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut answer = String::new();
    tls.read_to_string(&mut answer).await.ok()?;
    answer.lines().next().map(str::to_owned)
}

#[tokio::test]
async fn issue_31_mtls_admits_only_clients_of_the_ca_on_both_listeners() {
    let (pki, files) = pki("both");
    let served = start(files).await;
    std::fs::remove_dir_all(&pki.dir).unwrap();

    assert!(grpc_answered(&pki, served.grpc, Some(&pki.trusted)).await);
    assert!(
        !grpc_answered(&pki, served.grpc, None).await,
        "no certificate"
    );
    assert!(
        !grpc_answered(&pki, served.grpc, Some(&pki.stranger)).await,
        "another CA's"
    );

    let ok = https_status(&pki, served.http, Some(&pki.trusted)).await;
    assert_eq!(ok.as_deref(), Some("HTTP/1.1 200 OK"));
    assert_eq!(https_status(&pki, served.http, None).await, None);
    assert_eq!(
        https_status(&pki, served.http, Some(&pki.stranger)).await,
        None
    );
    // Refusals leave the service serving.
    assert!(grpc_answered(&pki, served.grpc, Some(&pki.trusted)).await);
    served.stop().await;
}

#[tokio::test]
async fn issue_31_a_client_ca_file_without_a_certificate_is_a_startup_error_naming_it() {
    let (pki, files) = pki("bad-ca");
    let ca = files.client_ca.clone().unwrap();
    std::fs::write(&ca, "not a certificate").unwrap();
    let options = ServeOptions {
        tls: Some(files),
        ..server::local()
    };
    let Err(error) = Listeners::bind(&options).await else {
        panic!("bound with a client CA file that holds no certificate")
    };
    std::fs::remove_dir_all(&pki.dir).unwrap();
    let error = error.to_string();
    assert!(error.contains(&ca.display().to_string()), "{error}");
    assert!(error.contains("no CERTIFICATE"), "{error}");
}

/// A self-signed certificate for `localhost`, written over `files`' chain and key (each
/// through a rename, as a rotation writes them): its PEM.
fn rotate(files: &TlsFiles) -> String {
    let next = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    for (path, pem) in [
        (&files.cert, next.cert.pem()),
        (&files.key, next.signing_key.serialize_pem()),
    ] {
        let staged = path.with_extension("next");
        std::fs::write(&staged, pem).unwrap();
        std::fs::rename(&staged, path).unwrap();
    }
    next.cert.pem()
}

/// A channel to `grpc` that trusts only `server` (a certificate's PEM).
async fn channel(grpc: SocketAddr, server: &str) -> Option<tonic::transport::Channel> {
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(server))
        .domain_name("localhost");
    let endpoint = Endpoint::from_shared(format!("https://{grpc}"))
        .unwrap()
        .tls_config(tls)
        .unwrap();
    endpoint.connect().await.ok()
}

async fn answers(channel: tonic::transport::Channel) -> bool {
    let request = PbRequest {
        domain: "example".to_owned(),
        descriptors: vec![RateLimitDescriptor {
            entries: vec![Entry {
                key: "client".to_owned(),
                value: "ann".to_owned(),
            }],
            ..Default::default()
        }],
        hits_addend: 0,
    };
    RateLimitServiceClient::new(channel)
        .should_rate_limit(request)
        .await
        .is_ok()
}

#[tokio::test]
async fn issue_31_a_rotated_certificate_is_served_without_a_restart_or_a_dropped_connection() {
    let (pki, mut files) = pki("rotation");
    files.client_ca = None;
    let served = start(files.clone()).await;
    let before = channel(served.grpc, &pki.server)
        .await
        .expect("the first certificate is served");
    assert!(answers(before.clone()).await);

    let next = rotate(&files);
    // The files are watched: ask until a handshake trusting only the new certificate
    // succeeds (bounded, and no timing is asserted).
    let mut after = None;
    for _ in 0..100_000 {
        if let Some(channel) = channel(served.grpc, &next).await {
            after = Some(channel);
            break;
        }
        tokio::task::yield_now().await;
    }
    let after = after.expect("the rotated certificate is served");
    assert!(answers(after).await);
    // The connection made before the rotation goes on, on the certificate it began with.
    assert!(answers(before).await);
    // And a client that trusts only the old one is refused now.
    assert!(channel(served.grpc, &pki.server).await.is_none());

    // A rotation half written (a key that is not the chain's) keeps the certificate in use.
    std::fs::write(&files.key, KeyPair::generate().unwrap().serialize_pem()).unwrap();
    let still = channel(served.grpc, &next)
        .await
        .expect("the certificate in use stays");
    assert!(answers(still).await);
    served.stop().await;
    std::fs::remove_dir_all(&pki.dir).unwrap();
}

/// `POST /json` for one client of the example config: the status and the body.
pub(crate) async fn json_check(http: SocketAddr) -> (u16, String) {
    let mut tcp = TcpStream::connect(http).await.unwrap();
    let body =
        r#"{"domain":"example","descriptors":[{"entries":[{"key":"client","value":"ann"}]}]}"#;
    let request = format!(
        "POST /json HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tcp.read_to_string(&mut answer).await.unwrap();
    let status = answer[9..12].parse().unwrap();
    (status, answer)
}

/// Issue 31: envoy ratelimit's `GRPC_SERVER_USE_TLS` is TLS on gRPC only: mutual TLS there,
/// and the HTTP listener, which the kubelet probes over plain HTTP, speaks plain text.
#[tokio::test]
async fn issue_31_tls_on_grpc_only_leaves_the_http_listener_plain() {
    let (pki, mut files) = pki("grpc-only");
    files.only_grpc = true;
    let served = start(files).await;
    std::fs::remove_dir_all(&pki.dir).unwrap();

    assert!(grpc_answered(&pki, served.grpc, Some(&pki.trusted)).await);
    assert!(
        !grpc_answered(&pki, served.grpc, None).await,
        "no certificate"
    );
    let mut plain = TcpStream::connect(served.http).await.unwrap();
    plain
        .write_all(b"GET /healthcheck HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut answer = String::new();
    plain.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    assert_eq!(
        https_status(&pki, served.http, Some(&pki.trusted)).await,
        None
    );
    served.stop().await;
}

/// Issue 31: the client CA file rotated (a new authority) is read again without a restart:
/// a client of the new authority is then admitted, and one of the old refused.
#[tokio::test]
async fn issue_31_a_rotated_client_ca_is_read_again() {
    let (pki, files) = pki("ca-rotation");
    let served = start(files.clone()).await;
    assert!(grpc_answered(&pki, served.grpc, Some(&pki.trusted)).await);
    let next = authority();
    let newcomer = client_of(&next);
    let ca = files.client_ca.clone().unwrap();
    let staged = ca.with_extension("next");
    std::fs::write(&staged, next.pem()).unwrap();
    std::fs::rename(&staged, &ca).unwrap();
    // The file is watched: ask until the new authority's client is admitted (bounded).
    let mut admitted = false;
    for _ in 0..10_000 {
        if grpc_answered(&pki, served.grpc, Some(&newcomer)).await {
            admitted = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(admitted, "the new authority's client is admitted");
    assert!(
        !grpc_answered(&pki, served.grpc, Some(&pki.trusted)).await,
        "the old one's is refused"
    );
    std::fs::remove_dir_all(&pki.dir).unwrap();
    served.stop().await;
}
