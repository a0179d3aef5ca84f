//! [`PartitionKeys`]: the draft's `pk` parameter, a keyed digest of the key a request was
//! counted under, safe to show.

use std::fmt;

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use sfv::{Integer, ItemSerializer, KeyRef};
use slidewin_store::RequestKey;

use crate::error::HttpConfigError;

/// The partition key a `RateLimit` field names (the draft's `pk` parameter, a byte sequence):
/// which quota partition a response was counted in, so that a client behind one address with
/// several API keys, say, can tell its quotas apart.
///
/// The key a request is counted under (an address, an API key) is not safe to show: a
/// response could leak it to whoever reads it, in logs or caches. The partition key is a
/// digest of it instead, HMAC-SHA256 under a secret of yours, cut to its first 16 bytes: the
/// same key always gives the same `pk`, two keys give different ones (128 bits), and no one
/// without the secret can find the key from its `pk` or test a guess against it. Give every
/// replica of a fleet the same secret, so that a partition has one name whichever answers;
/// [`random`](PartitionKeys::random) draws one for a single process. Change the secret and
/// every partition is renamed.
///
/// # Example
///
/// ```
/// use slidewin_http::PartitionKeys;
///
/// let keys = PartitionKeys::new(b"a secret of at least 16 bytes")?;
/// assert_eq!(keys.digest("alice".into()), keys.digest("alice".into()));
/// assert_ne!(keys.digest("alice".into()), keys.digest("bob".into()));
/// assert!(PartitionKeys::new(b"short").is_err());
/// # Ok::<(), slidewin_http::HttpConfigError>(())
/// ```
#[derive(Clone)]
pub struct PartitionKeys {
    key: hmac::Key,
    /// The digest of a text no key is (keys have a kind's prefix): equal for equal secrets,
    /// so that two `PartitionKeys` compare without holding their secret.
    fingerprint: [u8; PartitionKeys::DIGEST_BYTES],
}

impl PartitionKeys {
    /// The shortest secret taken, in bytes: 128 bits, the digest's own strength.
    ///
    /// ```
    /// assert_eq!(slidewin_http::PartitionKeys::MIN_SECRET_BYTES, 16);
    /// ```
    pub const MIN_SECRET_BYTES: usize = 16;

    /// The bytes of a digest, and of a `pk`.
    pub const DIGEST_BYTES: usize = 16;

    /// Partition keys under `secret`.
    ///
    /// # Errors
    ///
    /// [`HttpConfigError::ShortSecret`] for a secret shorter than
    /// [`MIN_SECRET_BYTES`](PartitionKeys::MIN_SECRET_BYTES).
    ///
    /// ```
    /// use slidewin_http::{HttpConfigError, PartitionKeys};
    /// let err = PartitionKeys::new(b"0123456789").unwrap_err();
    /// assert_eq!(err, HttpConfigError::ShortSecret { len: 10, min: 16 });
    /// ```
    pub fn new(secret: &[u8]) -> Result<PartitionKeys, HttpConfigError> {
        if secret.len() < PartitionKeys::MIN_SECRET_BYTES {
            return Err(HttpConfigError::ShortSecret {
                len: secret.len(),
                min: PartitionKeys::MIN_SECRET_BYTES,
            });
        }
        let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
        let mut fingerprint = [0u8; PartitionKeys::DIGEST_BYTES];
        let tag = hmac::sign(&key, b"fingerprint");
        fingerprint.copy_from_slice(&tag.as_ref()[..PartitionKeys::DIGEST_BYTES]);
        Ok(PartitionKeys { key, fingerprint })
    }

    /// Partition keys under a secret drawn from the system's random source: for one process
    /// (another process names the same partition otherwise).
    ///
    /// # Errors
    ///
    /// [`HttpConfigError::NoRandom`] when the system gives no random bytes.
    ///
    /// ```
    /// use slidewin_http::PartitionKeys;
    /// let (a, b) = (PartitionKeys::random()?, PartitionKeys::random()?);
    /// assert_ne!(a.digest("alice".into()), b.digest("alice".into()));
    /// # Ok::<(), slidewin_http::HttpConfigError>(())
    /// ```
    pub fn random() -> Result<PartitionKeys, HttpConfigError> {
        let mut secret = [0u8; 32];
        SystemRandom::new()
            .fill(&mut secret)
            .map_err(|_| HttpConfigError::NoRandom)?;
        PartitionKeys::new(&secret)
    }

    /// The digest of `key`: an address and the same text are told apart, so that a limit's
    /// keys of either kind never share a name.
    #[must_use]
    pub fn digest(&self, key: RequestKey<'_>) -> [u8; PartitionKeys::DIGEST_BYTES] {
        let mut context = hmac::Context::with_key(&self.key);
        match key {
            RequestKey::Address(address) => {
                context.update(b"a");
                context.update(address.to_string().as_bytes());
            }
            RequestKey::Text(text) => {
                context.update(b"t");
                context.update(text.as_bytes());
            }
        }
        let tag = context.sign();
        let mut digest = [0u8; PartitionKeys::DIGEST_BYTES];
        digest.copy_from_slice(&tag.as_ref()[..PartitionKeys::DIGEST_BYTES]);
        digest
    }

    /// `;pk=:…:`, the parameter naming `key`'s partition, as a `RateLimit` member ends.
    pub(crate) fn parameter(&self, key: RequestKey<'_>) -> Box<[u8]> {
        let digest = self.digest(key);
        // sfv renders the byte sequence (base64 between colons); the item before it is cut.
        let text = ItemSerializer::new()
            .bare_item(Integer::constant(0))
            .parameter(KeyRef::constant("pk"), &digest[..])
            .finish();
        text.as_bytes()[1..].into()
    }
}

/// Equal when their secrets are (by a digest of each, not the secrets themselves).
///
/// ```
/// use slidewin_http::PartitionKeys;
/// let a = PartitionKeys::new(b"0123456789abcdef")?;
/// assert_eq!(a, PartitionKeys::new(b"0123456789abcdef")?);
/// assert_ne!(a, PartitionKeys::new(b"0123456789abcdeF")?);
/// # Ok::<(), slidewin_http::HttpConfigError>(())
/// ```
impl PartialEq for PartitionKeys {
    fn eq(&self, other: &PartitionKeys) -> bool {
        self.fingerprint == other.fingerprint
    }
}

impl Eq for PartitionKeys {}

impl fmt::Debug for PartitionKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secret.
        f.write_str("PartitionKeys { .. }")
    }
}
