//! The admin token's tests: reading it, and each way a request may carry it.

use super::*;

const TOKEN: &str = "0123456789abcdef0123";

fn token() -> AdminToken {
    AdminToken::new(TOKEN).unwrap()
}

#[test]
fn matches_only_the_token() {
    let token = token();
    assert!(token.matches(TOKEN.as_bytes()));
    // Same length, one byte off, at either end.
    assert!(!token.matches(b"1123456789abcdef0123"));
    assert!(!token.matches(b"0123456789abcdef0124"));
    // Other lengths: a prefix, an extension, nothing.
    assert!(!token.matches(b"0123456789abcdef012"));
    assert!(!token.matches(b"0123456789abcdef01234"));
    assert!(!token.matches(b""));
}

#[test]
fn refuses_short_and_unsendable_tokens() {
    assert_eq!(
        AdminToken::new("abc").unwrap_err(),
        AdminTokenError::TooShort { len: 3 }
    );
    assert_eq!(
        AdminToken::new("").unwrap_err(),
        AdminTokenError::TooShort { len: 0 }
    );
    for (bad, at) in [
        ("0123456789abcdef;x", 16),
        ("0123456789 abcdef", 10),
        ("\"0123456789abcdef", 0),
        ("0123456789abcdef\\", 16),
        ("0123456789abcdef,", 16),
        ("0123456789abcdef\n", 16),
        ("0123456789abcdeé", 15),
    ] {
        assert_eq!(
            AdminToken::new(bad).unwrap_err(),
            AdminTokenError::Character { position: at },
            "{bad:?}"
        );
    }
    // What `openssl rand -base64 32` makes is fine.
    assert!(AdminToken::new("q0Vf+3t/XyZ8m2Lk9QpR1sT4uV6wX7yZaBcDeFgHiJk=").is_ok());
}

#[test]
fn debug_hides_the_token() {
    assert!(!format!("{:?}", token()).contains(TOKEN));
}

#[test]
fn reads_the_bearer_scheme_in_any_case() {
    assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
    assert_eq!(bearer_token(b"bearer   abc "), Some(&b"abc"[..]));
    assert_eq!(bearer_token(b"Basic abc"), None);
    assert_eq!(bearer_token(b"Bearer"), None);
    assert_eq!(bearer_token(b"Bearer "), None);
}

#[test]
fn reads_every_admin_cookie() {
    let found: Vec<&[u8]> =
        cookie_values(b"a=1; slidewin_admin=x; slidewin_admin_2=y;slidewin_admin=z").collect();
    assert_eq!(found, [&b"x"[..], &b"z"[..]]);
}

#[test]
fn admits_the_token_in_the_header_and_its_hmac_in_the_cookie() {
    let token = token();
    let mut headers = HeaderMap::new();
    assert!(!token.admits(&headers));
    // The raw token is no cookie.
    headers.insert(
        header::COOKIE,
        HeaderValue::from_static("slidewin_admin=0123456789abcdef0123"),
    );
    assert!(!token.admits(&headers));
    headers.append(
        header::AUTHORIZATION,
        HeaderValue::from_static("Bearer 0123456789abcdef0123"),
    );
    assert!(token.admits(&headers));
    let cookie = String::from_utf8(token.cookie.to_vec()).unwrap();
    assert!(cookie.len() == 64 && !cookie.contains(TOKEN), "{cookie}");
    let pair = format!("theme=dark; slidewin_admin={cookie}");
    let headers = HeaderMap::from_iter([(header::COOKIE, HeaderValue::from_str(&pair).unwrap())]);
    assert!(token.admits(&headers));
    // Another token of this process has another cookie; the same token, the same one.
    assert_eq!(AdminToken::new(TOKEN).unwrap().cookie, token.cookie);
    let other = AdminToken::new("0123456789abcdef0124").unwrap();
    assert!(!other.admits(&headers));
    // Under another key (another process), the same token has another cookie.
    let key = hmac::Key::new(hmac::HMAC_SHA256, b"another process's key");
    assert_ne!(cookie_value(&key, TOKEN.as_bytes()), token.cookie);
}

#[test]
fn takes_the_token_out_of_the_query() {
    assert_eq!(
        query_token("updates=3&token=a%2Bb%3D&x"),
        Some((b"a+b=".to_vec(), "updates=3&x".to_owned()))
    );
    assert_eq!(query_token("token"), Some((Vec::new(), String::new())));
    assert_eq!(query_token("updates=3"), None);
    assert_eq!(percent_decode("%zz%4"), b"%zz%4");
}

#[test]
fn reads_the_token_file_trimmed() {
    let path = std::env::temp_dir().join(format!("slidewin-token-{}", std::process::id()));
    std::fs::write(&path, format!("  {TOKEN}\r\n")).unwrap();
    assert!(
        AdminToken::from_file(&path)
            .unwrap()
            .matches(TOKEN.as_bytes())
    );
    std::fs::write(&path, "\n").unwrap();
    assert_eq!(
        AdminToken::from_file(&path).unwrap_err(),
        AdminTokenError::TooShort { len: 0 }
    );
    std::fs::remove_file(&path).unwrap();
    let missing = AdminToken::from_file(&path).unwrap_err();
    assert!(matches!(missing, AdminTokenError::File { .. }), "{missing}");
}
