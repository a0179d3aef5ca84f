//! The live dashboard: `GET /`, its embedded assets, and `GET /api/events` (server-sent events).
//! (Placeholder until the dashboard lands.)

use std::sync::Arc;

use crate::SnapshotSource;

/// The dashboard's routes.
pub fn dashboard_router(source: Arc<dyn SnapshotSource>) -> axum::Router {
    let _ = source;
    axum::Router::new()
}
