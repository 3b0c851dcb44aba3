//! The control socket: the Unix stream socket applications connect to (by
//! default `/run/corestack/ctl.sock`, see `appif::ctl`), say hello on, and
//! receive their segment and doorbell through. After the welcome it carries
//! nothing; its end of file tells the daemon that the application is gone.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Why the control socket could not be created. Each message says what to
/// do.
#[derive(Debug, Error)]
pub enum ControlError {
    /// The socket's directory could not be created.
    #[error("creating {} (run as root?)", dir.display())]
    CreateDir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A daemon answers on the path already.
    #[error(
        "a corestack daemon already listens on {} (stop it, or give this one another --socket)",
        path.display()
    )]
    AlreadyListens {
        /// The socket's path.
        path: PathBuf,
    },
    /// A socket file nobody answers on (left by a daemon that was killed)
    /// could not be removed.
    #[error("removing the stale socket {}", path.display())]
    RemoveStale {
        /// The socket's path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// `bind` failed.
    #[error("binding the control socket {}", path.display())]
    Bind {
        /// The socket's path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The socket could not be made connectable by every user.
    #[error("making the control socket {} connectable by every user", path.display())]
    Permissions {
        /// The socket's path.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// The daemon's listening control socket. The socket file is removed when
/// this is dropped (a daemon killed by SIGKILL leaves it behind; the next
/// one replaces it).
#[derive(Debug)]
pub struct ControlSocket {
    listener: UnixListener,
    path: PathBuf,
}

impl ControlSocket {
    /// Creates the control socket at `path` (and its directory), world
    /// connectable: permissions are enforced per port, not per connection.
    /// A socket file nobody answers on is replaced.
    ///
    /// Errors: [`ControlError::AlreadyListens`] when another daemon answers
    /// on `path` (it is left alone), or the directory or socket cannot be
    /// created.
    pub fn bind(path: &Path) -> Result<ControlSocket, ControlError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| ControlError::CreateDir {
                dir: dir.to_path_buf(),
                source,
            })?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(ControlError::AlreadyListens {
                    path: path.to_path_buf(),
                });
            }
            std::fs::remove_file(path).map_err(|source| ControlError::RemoveStale {
                path: path.to_path_buf(),
                source,
            })?;
        }
        let listener = UnixListener::bind(path).map_err(|source| ControlError::Bind {
            path: path.to_path_buf(),
            source,
        })?;
        let control = ControlSocket {
            listener,
            path: path.to_path_buf(),
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o666)).map_err(
            |source| ControlError::Permissions {
                path: path.to_path_buf(),
                source,
            },
        )?;
        Ok(control)
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The listening socket.
    pub fn listener(&self) -> &UnixListener {
        &self.listener
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
