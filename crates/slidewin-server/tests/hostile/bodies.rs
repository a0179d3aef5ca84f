//! `/json` bodies past the bounds: 100 MB, and JSON nested 10,000 deep.

use super::*;

// ---- 100 MB bodies ----

#[tokio::test]
async fn a_100_mb_body_is_refused_before_it_is_sent() {
    let running = start(Memory::new(), CONFIG).await;
    // Declared: refused on the headers alone, not one byte of the body sent.
    let mut stream = tokio::net::TcpStream::connect(running.http).await.unwrap();
    stream
        .write_all(
            format!(
                "POST /json HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                100 << 20
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let head = read_head(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    let mut body = [0u8; 512];
    let n = stream.read(&mut body).await.unwrap();
    let body = String::from_utf8_lossy(&body[..n]);
    assert!(
        body.contains(&format!("{} bytes is too large", 100 << 20))
            && body.contains(&Bounds::MAX_BODY_BYTES.to_string()),
        "{body}"
    );
    drop(stream);
    running.still_serving().await;

    // Chunked, its length unknown: the server stops at the bound. Our writer never gets to
    // send all 100 MB: the answer comes first, then the connection is closed under it.
    let mut stream = tokio::net::TcpStream::connect(running.http).await.unwrap();
    stream
        .write_all(b"POST /json HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n")
        .await
        .unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let total = 100usize << 20;
    let writing = tokio::spawn(async move {
        let chunk = [b' '; 64 << 10];
        let framed = [
            format!("{:x}\r\n", chunk.len()).as_bytes(),
            &chunk[..],
            b"\r\n",
        ]
        .concat();
        let mut sent = 0usize;
        while sent < total {
            if writer.write_all(&framed).await.is_err() {
                return (sent, false);
            }
            sent += chunk.len();
        }
        let done = writer.write_all(b"0\r\n\r\n").await.is_ok();
        (sent, done)
    });
    let mut answer = Vec::new();
    let _ = reader.read_to_end(&mut answer).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    let (sent, finished) = writing.await.unwrap();
    assert!(
        !finished && sent < total,
        "the server read the whole body: {sent} bytes sent"
    );
    running.still_serving().await;
    running.stop().await;
}

// ---- deep JSON ----

#[tokio::test]
async fn json_nested_10_000_deep_is_a_400() {
    let running = start(Memory::new(), CONFIG).await;
    let deep_array = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let deep_object = format!("{}1{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_000));
    let open_only = "[".repeat(10_000);
    for deep in [&deep_array, &deep_object, &open_only] {
        let places = [
            deep.clone(),
            format!(r#"{{"domain":"api","descriptors":{deep}}}"#),
            format!(r#"{{"domain":"api","descriptors":[{deep}]}}"#),
            format!(r#"{{"domain":"api","descriptors":[{{"entries":{deep}}}]}}"#),
            format!(r#"{{"domain":"api","descriptors":[{{"entries":[{deep}]}}]}}"#),
            format!(
                r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"client","value":{deep}}}]}}]}}"#
            ),
            format!(
                r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"client","value":"v"}}],"hits_addend":{deep}}}]}}"#
            ),
            format!(
                r#"{{"domain":"api","hits_addend":{deep},"descriptors":[{{"entries":[{{"key":"client","value":"v"}}]}}]}}"#
            ),
            format!(
                r#"{{"domain":"api","descriptors":[{{"entries":[{{"key":"client","value":"v"}}],"limit":{{"requests_per_unit":1,"unit":{deep}}}}}]}}"#
            ),
            format!(r#"{{"domain":{deep}}}"#),
        ];
        for (i, body) in places.into_iter().enumerate() {
            let (status, answer) = running.json(body).await;
            assert_eq!(status, 400, "place {i}: {answer}");
            assert!(answer.contains("invalid request"), "place {i}: {answer}");
            // serde_json stops at the first wrong type, or at its recursion limit (128).
            assert!(answer.contains("at line 1 column"), "place {i}: {answer}");
        }
        running.still_serving().await;
    }
    running.stop().await;
}
