//! `bad-mapper`: a mapper that fails on purpose, for tests. Its plugin config
//! `mode` says how: `error` returns a mapper error, `trap` panics, `garbage`
//! returns text that is not JSON.

use hangar_sdk::mapper::{CallContext, Guest, MapperError, config};

struct BadMapper;

impl Guest for BadMapper {
    fn map(_cx: CallContext, _payload: String) -> Result<String, MapperError> {
        match config("mode").as_deref() {
            Some("trap") => panic!("bad-mapper trapped on purpose"),
            Some("garbage") => Ok("this is not json".into()),
            _ => Err(MapperError {
                message: "bad-mapper refused on purpose".into(),
            }),
        }
    }
}

hangar_sdk::export_mapper!(BadMapper);
