//! Ctrl-C and SIGTERM, listened for once from the first moment of `hangar
//! serve` and heard by everything that ends on them: the start-up (which
//! may compile components for minutes on a first start, or wait on another
//! process's compile), the listeners, the stdio front. Listened for only
//! once the server listened, a SIGTERM during start-up found no handler
//! and was lost, or — once a later handler replaced the default action —
//! was ignored.

use tokio::sync::watch;

/// Whether a stop was asked for; cheap to clone and to wait on.
#[derive(Clone)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// Installs the handlers now (from the moment this returns, Ctrl-C and
    /// SIGTERM are heard) and waits for them in a task of their own.
    pub fn listen() -> Stop {
        let (asked, heard) = watch::channel(false);
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
            let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
            tokio::spawn(async move {
                tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
                tracing::info!("shutting down");
                let _ = asked.send(true);
            });
        }
        #[cfg(not(unix))]
        tokio::spawn(async move {
            let _ = tokio::signal::ctrl_c().await;
            tracing::info!("shutting down");
            let _ = asked.send(true);
        });
        Stop(heard)
    }

    /// Resolves once a stop was asked for (at once if it already was).
    pub fn requested(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut heard = self.0.clone();
        async move {
            // The sender lives until it sends: an error cannot happen, and
            // would mean no stop can come anymore.
            if heard.wait_for(|asked| *asked).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}
