//! `bad-mapper`: a mapper that fails on purpose, for tests. Its plugin config
//! `mode` says how: `error` returns a mapper error, `trap` panics, `garbage`
//! returns text that is not JSON, `huge` answers a 10 MB JSON string (past the
//! output cap).

use hangar_sdk::mapper::{CallContext, Guest, MapperError, config};

struct BadMapper;

impl Guest for BadMapper {
    fn map(_cx: CallContext, _payload: String) -> Result<String, MapperError> {
        match config("mode").as_deref() {
            Some("trap") => panic!("bad-mapper trapped on purpose"),
            Some("garbage") => Ok("this is not json".into()),
            Some("huge") => {
                // Built in place: one 10 MB copy fits the default memory cap.
                let mut text = String::with_capacity(10_000_002);
                text.push('"');
                text.extend(std::iter::repeat_n('h', 10_000_000));
                text.push('"');
                Ok(text)
            }
            _ => Err(MapperError {
                message: "bad-mapper refused on purpose".into(),
            }),
        }
    }
}

hangar_sdk::export_mapper!(BadMapper);
