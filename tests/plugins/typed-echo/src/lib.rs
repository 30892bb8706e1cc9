//! `typed-echo`: `echo: func(text: string) -> string` as a plain component
//! (no hangar-sdk), built slim; the benchmark twin of plugins/echo's `echo`.

wit_bindgen::generate!({
    world: "typed-echo",
    path: "wit",
});

#[cfg(target_os = "unknown")]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

struct TypedEcho;

impl Guest for TypedEcho {
    fn echo(text: String) -> String {
        text
    }
}

export!(TypedEcho);
