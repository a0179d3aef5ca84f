//! Each Lua source is a valid script on its own: Redis compiles it as it is, with nothing
//! pasted around it at run time.

use crate::support;

use support::RedisServer;

#[test]
fn every_lua_source_loads_into_redis_as_it_is() {
    let server = RedisServer::start();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lua");
    let mut loaded = 0;
    for entry in std::fs::read_dir(&dir).expect("src/lua") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|e| e != "lua") {
            continue;
        }
        let source = std::fs::read_to_string(&path).expect("a Lua source");
        let said = server.cli(&["SCRIPT", "LOAD", &source]);
        let sha = said.trim();
        assert!(
            sha.len() == 40 && sha.bytes().all(|b| b.is_ascii_hexdigit()),
            "{} did not load: {said}",
            path.display()
        );
        assert_eq!(server.cli(&["SCRIPT", "EXISTS", sha]).trim(), "1");
        loaded += 1;
    }
    // check.lua runs every check of every algorithm; settle.lua changes a reservation.
    assert_eq!(loaded, 2, "check.lua and settle.lua");
}

#[test]
fn a_script_that_does_not_compile_is_told_apart() {
    // The check above would see a broken script: Redis answers with the compile error.
    let server = RedisServer::start();
    let said = server.cli(&["SCRIPT", "LOAD", "local x = "]);
    assert!(said.contains("ERR") || said.contains("Error"), "{said}");
}
