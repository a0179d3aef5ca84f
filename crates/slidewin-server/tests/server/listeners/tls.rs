//! TLS on both listeners: plain text refused cleanly, stalled handshakes, bad files named,
//! limits that bound nothing refused, and the admin cookie secure.

use super::*;

/// A self-signed certificate for `localhost`, written to a fresh directory: (files, PEM).
fn self_signed() -> (TlsFiles, String) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("a certificate");
    let dir = std::env::temp_dir().join(format!(
        "slidewin-listeners-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let pem = certified.cert.pem();
    std::fs::write(&cert, &pem).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (
        TlsFiles {
            cert,
            key,
            client_ca: None,
            only_grpc: false,
        },
        pem,
    )
}

/// Removes the directory [`self_signed`] made (the files are read once, when binding).
fn remove(files: &TlsFiles) {
    if let Some(dir) = files.cert.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
}

fn tls_connector(ca_pem: &str) -> tokio_rustls::TlsConnector {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
        .unwrap();
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

async fn https_json_ok(http: SocketAddr, connector: &tokio_rustls::TlsConnector) {
    let tcp = TcpStream::connect(http).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let tls = connector.connect(name, tcp).await.expect("TLS handshake");
    let answer = tokio::time::timeout(HANG, post_json(tls))
        .await
        .expect("answered");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

async fn grpcs_ok(grpc: SocketAddr, ca_pem: &str) {
    use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
    let channel = Endpoint::from_shared(format!("https://{grpc}"))
        .unwrap()
        .tls_config(
            ClientTlsConfig::new()
                .ca_certificate(Certificate::from_pem(ca_pem))
                .domain_name("localhost"),
        )
        .unwrap()
        .connect()
        .await
        .expect("gRPC over TLS connects");
    let answer = RateLimitServiceClient::new(channel)
        .should_rate_limit(grpc_request())
        .await
        .unwrap();
    assert_eq!(answer.into_inner().overall_code, PbCode::Ok as i32);
}

#[tokio::test]
async fn tls_on_both_listeners_and_plain_text_fails_cleanly() {
    let (files, ca) = self_signed();
    let running = start(ConnectionLimits::default(), Some(files.clone())).await;
    remove(&files);
    let connector = tls_connector(&ca);
    https_json_ok(running.http, &connector).await;
    grpcs_ok(running.grpc, &ca).await;

    // Plain text to the TLS ports: no HTTP answer, the connection closed.
    let mut plain = TcpStream::connect(running.http).await.unwrap();
    plain.write_all(json_request().as_bytes()).await.unwrap();
    let said = closed_by_server(&mut plain).await;
    assert!(!said.starts_with("HTTP/"), "{said}");
    let mut client = RateLimitServiceClient::connect(format!("http://{}", running.grpc))
        .await
        .expect("TCP connects");
    assert!(client.should_rate_limit(grpc_request()).await.is_err());

    // And both keep serving.
    https_json_ok(running.http, &connector).await;
    grpcs_ok(running.grpc, &ca).await;
    running.stop().await;
}

#[tokio::test]
async fn a_stalled_tls_handshake_is_closed_on_both_listeners() {
    let (files, ca) = self_signed();
    let running = start(quick_not_idle(), Some(files.clone())).await;
    remove(&files);
    // A TLS record header announcing a 512-byte handshake message, and 40 bytes of it: more
    // than the first bytes due, less than a `ClientHello`.
    let mut stalled = [0u8; 45];
    stalled[..5].copy_from_slice(&[0x16, 0x03, 0x01, 0x02, 0x00]);
    stalled[5] = 0x01;
    let mut http = TcpStream::connect(running.http).await.unwrap();
    let mut grpc = TcpStream::connect(running.grpc).await.unwrap();
    http.write_all(&stalled).await.unwrap();
    grpc.write_all(&stalled).await.unwrap();
    tokio::join!(closed_by_server(&mut http), closed_by_server(&mut grpc));
    https_json_ok(running.http, &tls_connector(&ca)).await;
    grpcs_ok(running.grpc, &ca).await;
    running.stop().await;
}

#[tokio::test]
async fn a_missing_or_bad_tls_file_is_a_startup_error_naming_it() {
    let (files, _) = self_signed();
    let bind = |tls: TlsFiles| async move {
        let options = ServeOptions {
            tls: Some(tls),
            ..server::local()
        };
        match Listeners::bind(&options).await {
            Ok(_) => panic!("bound with a bad TLS file"),
            Err(e) => e.to_string(),
        }
    };
    let missing = PathBuf::from("/nonexistent/slidewin/cert.pem");
    let error = bind(TlsFiles {
        cert: missing.clone(),
        key: files.key.clone(),
        client_ca: None,
        only_grpc: false,
    })
    .await;
    assert!(error.contains(&missing.display().to_string()), "{error}");

    let garbage = files.key.with_file_name("garbage.pem");
    std::fs::write(&garbage, "not a key").unwrap();
    let error = bind(TlsFiles {
        cert: files.cert.clone(),
        key: garbage.clone(),
        client_ca: None,
        only_grpc: false,
    })
    .await;
    assert!(error.contains(&garbage.display().to_string()), "{error}");

    // A key that is not the certificate's.
    let (other, _) = self_signed();
    let error = bind(TlsFiles {
        cert: files.cert.clone(),
        key: other.key.clone(),
        client_ca: None,
        only_grpc: false,
    })
    .await;
    assert!(error.contains(&other.key.display().to_string()), "{error}");

    // A certificate file holding a key only.
    let error = bind(TlsFiles {
        cert: files.key.clone(),
        key: files.key.clone(),
        client_ca: None,
        only_grpc: false,
    })
    .await;
    assert!(error.contains("no CERTIFICATE"), "{error}");
    remove(&files);
    remove(&other);
}

#[tokio::test]
async fn limits_that_bound_nothing_are_refused_by_name() {
    let options = ServeOptions {
        limits: ConnectionLimits {
            header_read_timeout: Duration::ZERO,
            ..ConnectionLimits::default()
        },
        ..server::local()
    };
    let Err(error) = Listeners::bind(&options).await else {
        panic!("bound with a zero timeout")
    };
    assert!(error.to_string().contains("header_read_timeout"), "{error}");
}

/// Over TLS, the admin sign-in cookie is `Secure`; over plain http it is not (a browser would
/// drop it).
#[tokio::test]
async fn the_admin_cookie_is_secure_over_tls() {
    let (files, ca) = self_signed();
    let token = "0123456789abcdef0123456789abcdef";
    let sign_in =
        format!("GET /?token={token} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    for tls in [Some(files.clone()), None] {
        let service = Endpoints::new(engine(), vec![])
            .with_admin_token(slidewin_server::AdminToken::new(token).unwrap());
        let over_tls = tls.is_some();
        // The admin routes open (behind the token), every bound the default.
        let options = ServeOptions {
            tls,
            ..server::local()
        };
        let served = Served::start(service, &options).await;
        let http = served.http;
        let tcp = TcpStream::connect(http).await.unwrap();
        let mut answer = String::new();
        if over_tls {
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let mut stream = tls_connector(&ca)
                .connect(name, tcp)
                .await
                .expect("TLS handshake");
            stream.write_all(sign_in.as_bytes()).await.unwrap();
            let _ = stream.read_to_string(&mut answer).await;
        } else {
            let mut stream = tcp;
            stream.write_all(sign_in.as_bytes()).await.unwrap();
            let _ = stream.read_to_string(&mut answer).await;
        }
        let cookie = answer
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
            .unwrap_or_else(|| panic!("a sign-in cookie: {answer}"));
        assert!(
            cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
            "{cookie}"
        );
        assert_eq!(cookie.contains("; Secure"), over_tls, "{cookie}");
        served.stop().await;
    }
    remove(&files);
}

/// The HTTP/2 frame types `bytes` holds, in order (each frame: a 9-byte head, then its payload).
fn frame_types(bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    let mut at = 0;
    while at + 9 <= bytes.len() {
        let length = usize::from(bytes[at]) << 16
            | usize::from(bytes[at + 1]) << 8
            | usize::from(bytes[at + 2]);
        types.push(bytes[at + 3]);
        at += 9 + length;
    }
    types
}

/// Issue 31: envoy ratelimit's `GRPC_MAX_CONNECTION_AGE`. A gRPC connection, busy or not
/// (the idle timeout is out of reach here), gets a `GOAWAY` once it is old, and is closed.
#[tokio::test]
async fn issue_31_an_aged_grpc_connection_gets_a_goaway() {
    let running = start(
        ConnectionLimits {
            max_connection_age: Some(Duration::from_millis(50)),
            ..quick_not_idle()
        },
        None,
    )
    .await;
    let mut stream = TcpStream::connect(running.grpc).await.unwrap();
    stream.write_all(PREFACE).await.unwrap();
    // An empty SETTINGS frame: the client's half of the handshake.
    stream
        .write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    let mut seen = Vec::new();
    tokio::time::timeout(HANG, stream.read_to_end(&mut seen))
        .await
        .expect("the aged connection is closed")
        .unwrap();
    const GOAWAY: u8 = 7;
    assert!(
        frame_types(&seen).contains(&GOAWAY),
        "{:?}",
        frame_types(&seen)
    );
    // A new connection is served as before.
    grpc_ok(running.grpc).await;
    running.stop().await;
}

#[test]
fn a_zero_max_connection_age_is_refused_naming_it() {
    let limits = ConnectionLimits {
        max_connection_age: Some(Duration::ZERO),
        ..ConnectionLimits::default()
    };
    assert!(
        limits
            .validate()
            .unwrap_err()
            .to_string()
            .contains("max_connection_age")
    );
}
