//! The linker side of [`WriteCap`]: the four shadowed
//! `wasi:filesystem/types` writers, generic over the store data (which
//! holds the call's [`CallWasi`] and its cap).

use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView as _};
use wasmtime_wasi::p2::DynOutputStream;
use wasmtime_wasi::p2::bindings::filesystem::types::{self, ErrorCode, HostDescriptor};

use super::call::CallWasi;
use super::write_cap::{CappedStream, WriteCap};
use crate::capability::shape::GuestStore;

/// The interface whose writers are shadowed, at the version wasmtime-wasi
/// links (a guest importing an older 0.2 version is served by it too).
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

/// The length of the file `fd` names (0 for a directory, which the
/// delegated call then refuses).
fn file_len<T: GuestStore>(state: &mut T, fd: &Resource<Descriptor>) -> wasmtime::Result<u64> {
    let fs = state.filesystem();
    Ok(match fs.table.get(fd)? {
        Descriptor::File(f) => f.file.metadata().map(|m| m.len()).unwrap_or(0),
        Descriptor::Dir(_) => 0,
    })
}

/// Wraps the stream wasmtime-wasi made at `stream` into a [`CappedStream`]
/// starting at `end`, under a new handle.
fn capped<T: GuestStore>(
    state: &mut T,
    plugin: Arc<str>,
    stream: Resource<DynOutputStream>,
    cap: Arc<WriteCap>,
    end: u64,
) -> wasmtime::Result<Resource<DynOutputStream>> {
    let fs = state.filesystem();
    let inner = fs.table.delete(stream)?;
    let wrapped: DynOutputStream = Box::new(CappedStream {
        inner,
        cap,
        end,
        plugin,
    });
    Ok(fs.table.push(wrapped)?)
}

type Answer<T> = wasmtime::Result<(Result<T, ErrorCode>,)>;

/// The guest-facing answer of a delegated call: its value, or its error
/// code (a trap stays a trap).
fn answer<S: GuestStore, T>(state: &mut S, result: wasmtime_wasi::p2::FsResult<T>) -> Answer<T> {
    match result {
        Ok(value) => Ok((Ok(value),)),
        Err(e) => {
            let code = types::Host::convert_error_code(&mut state.filesystem(), e)?;
            Ok((Err(code),))
        }
    }
}

/// Replaces the writers of `wasi:filesystem/types` with capped ones (see
/// the module's doc). Call after wasmtime-wasi is linked.
pub fn shadow_writers<T: GuestStore>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut CallWasi,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut types = linker.instance(FILESYSTEM_TYPES)?;
    types.func_wrap_async(
        "[method]descriptor.write",
        move |mut store: StoreContextMut<'_, T>,
              (fd, mut buf, offset): (Resource<Descriptor>, Vec<u8>, u64)| {
            Box::new(async move {
                let state = store.data_mut();
                let Some(cap) = get(state).write_cap.clone() else {
                    let result =
                        HostDescriptor::write(&mut state.filesystem(), fd, buf, offset).await;
                    return answer(state, result);
                };
                let end = offset;
                let n = match cap.room(end, buf.len() as u64) {
                    Ok(n) => n,
                    Err(code) => return Ok((Err(cap.refuse(&get(state).plugin, code)),)),
                };
                if !cap.take(n) {
                    let code = cap.refuse(&get(state).plugin, ErrorCode::InsufficientSpace);
                    return Ok((Err(code),));
                }
                buf.truncate(n as usize);
                let result = HostDescriptor::write(&mut state.filesystem(), fd, buf, offset).await;
                let written = result.as_ref().map_or(0, |w| *w);
                cap.give_back(n.saturating_sub(written));
                answer(state, result)
            })
        },
    )?;
    types.func_wrap_async(
        "[method]descriptor.set-size",
        move |mut store: StoreContextMut<'_, T>, (fd, size): (Resource<Descriptor>, u64)| {
            Box::new(async move {
                let state = store.data_mut();
                let mut grown = 0;
                if let Some(cap) = get(state).write_cap.clone() {
                    if size > cap.max_file {
                        let code = cap.refuse(&get(state).plugin, ErrorCode::FileTooLarge);
                        return Ok((Err(code),));
                    }
                    grown = size.saturating_sub(file_len(state, &fd)?);
                    if !cap.take(grown) {
                        let code = cap.refuse(&get(state).plugin, ErrorCode::InsufficientSpace);
                        return Ok((Err(code),));
                    }
                }
                let result = HostDescriptor::set_size(&mut state.filesystem(), fd, size).await;
                if result.is_err()
                    && let Some(cap) = &get(state).write_cap
                {
                    cap.give_back(grown);
                }
                answer(state, result)
            })
        },
    )?;
    types.func_wrap(
        "[method]descriptor.write-via-stream",
        move |mut store: StoreContextMut<'_, T>, (fd, offset): (Resource<Descriptor>, u64)| {
            let state = store.data_mut();
            let cap = get(state).write_cap.clone();
            let result = HostDescriptor::write_via_stream(&mut state.filesystem(), fd, offset);
            match (result, cap) {
                (Ok(stream), Some(cap)) => {
                    let plugin = get(state).plugin.clone();
                    Ok((Ok(capped(state, plugin, stream, cap, offset)?),))
                }
                (result, _) => answer(state, result),
            }
        },
    )?;
    types.func_wrap(
        "[method]descriptor.append-via-stream",
        move |mut store: StoreContextMut<'_, T>, (fd,): (Resource<Descriptor>,)| {
            let state = store.data_mut();
            let Some(cap) = get(state).write_cap.clone() else {
                let result = HostDescriptor::append_via_stream(&mut state.filesystem(), fd);
                return answer(state, result);
            };
            let end = file_len(state, &fd)?;
            let result = HostDescriptor::append_via_stream(&mut state.filesystem(), fd);
            match result {
                Ok(stream) => {
                    let plugin = get(state).plugin.clone();
                    Ok((Ok(capped(state, plugin, stream, cap, end)?),))
                }
                Err(e) => answer(state, Err(e)),
            }
        },
    )?;
    linker.allow_shadowing(false);
    Ok(())
}
