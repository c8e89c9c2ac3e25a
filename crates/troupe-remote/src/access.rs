//! How a node signs in to NATS and protects its connection: the credentials it presents, the
//! certificate authority it trusts for TLS, and the root of the subjects its answers come back
//! on.
//!
//! The server decides what each user may publish and subscribe to. A node's traffic uses these
//! subjects, so that a server's permissions can give each role only what it needs:
//!
//! ```text
//! troupe.x.<name>         asks and tells to the actor exported as <name> (publish: senders;
//!                         subscribe: the exporter)
//! troupe.hb.<node id>     heartbeats of a node that exports something (publish: exporters;
//!                         subscribe: watchers)
//! troupe.down.<name>      "it stopped" (publish: exporters; subscribe: watchers)
//! <inbox_prefix>.<...>    answers: replies to asks, to look-ups, to the probe a node sends itself
//!                         (publish: exporters, and the node itself; subscribe: the node)
//! ```
//!
//! So a server can confine a user to `<its inbox prefix>.>` for reading: it then reads its own
//! answers and nobody else's.

use std::fmt;
use std::path::{Path, PathBuf};

use async_nats::ConnectOptions;

use crate::error::RemoteError;

/// Who a node is to the NATS server.
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Credentials {
    /// Nothing: for a server without authorization.
    #[default]
    None,
    /// An nkey seed (`SU...`), read from this file when the node connects. The server's
    /// configuration names the user by the matching public key (`U...`), so it holds no secret.
    NkeyFile(PathBuf),
    /// A credentials file (a user JWT and its nkey seed), for servers in operator mode.
    CredsFile(PathBuf),
    /// A user name and a password.
    UserPassword {
        /// The user.
        user: String,
        /// Its password.
        password: String,
    },
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A password is never printed, in logs or in panics.
        match self {
            Credentials::None => f.write_str("None"),
            Credentials::NkeyFile(p) => f.debug_tuple("NkeyFile").field(p).finish(),
            Credentials::CredsFile(p) => f.debug_tuple("CredsFile").field(p).finish(),
            Credentials::UserPassword { user, .. } => f
                .debug_struct("UserPassword")
                .field("user", user)
                .field("password", &"<hidden>")
                .finish_non_exhaustive(),
        }
    }
}

fn read(path: &Path, what: &str) -> Result<String, RemoteError> {
    std::fs::read_to_string(path).map_err(|e| {
        RemoteError::InvalidOption(format!("cannot read the {what} {}: {e}", path.display()))
    })
}

impl Credentials {
    /// Adds these credentials to `options`, reading and checking their files now: a missing
    /// file or a seed that does not parse is an error here, not a refused connection later.
    pub(crate) fn apply(&self, options: ConnectOptions) -> Result<ConnectOptions, RemoteError> {
        Ok(match self {
            Credentials::None => options,
            Credentials::NkeyFile(path) => {
                let text = read(path, "nkey seed file")?;
                let seed = text
                    .lines()
                    .map(str::trim)
                    .find(|l| l.starts_with("SU"))
                    .ok_or_else(|| {
                        RemoteError::InvalidOption(format!(
                            "{} holds no user nkey seed (a line starting with SU)",
                            path.display()
                        ))
                    })?;
                nkeys::KeyPair::from_seed(seed).map_err(|e| {
                    RemoteError::InvalidOption(format!(
                        "the nkey seed in {} does not parse: {e}",
                        path.display()
                    ))
                })?;
                options.nkey(seed.to_string())
            }
            Credentials::CredsFile(path) => {
                let text = read(path, "credentials file")?;
                options.credentials(&text).map_err(|e| {
                    RemoteError::InvalidOption(format!(
                        "the credentials file {} does not parse: {e}",
                        path.display()
                    ))
                })?
            }
            Credentials::UserPassword { user, password } => {
                options.user_and_password(user.clone(), password.clone())
            }
        })
    }
}

/// Adds TLS with `ca` as the only trusted authority; the connection is refused if the server
/// does not speak TLS.
pub(crate) fn apply_tls(
    options: ConnectOptions,
    ca: Option<&Path>,
) -> Result<ConnectOptions, RemoteError> {
    let Some(ca) = ca else {
        return Ok(options);
    };
    if !ca.is_file() {
        return Err(RemoteError::InvalidOption(format!(
            "tls_ca {}: no such file",
            ca.display()
        )));
    }
    Ok(options
        .add_root_certificates(ca.to_path_buf())
        .require_tls(true))
}

/// True if a server error says an operation was refused for lack of permission.
pub(crate) fn is_denial(text: &str) -> bool {
    text.to_ascii_lowercase().contains("permissions violation")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_never_printed() {
        let c = Credentials::UserPassword {
            user: "alice".into(),
            password: "hunter2".into(),
        };
        let shown = format!("{c:?}");
        assert!(
            shown.contains("alice") && !shown.contains("hunter2"),
            "{shown}"
        );
    }

    #[test]
    fn bad_credential_files_are_refused_before_connecting() {
        let dir = std::env::temp_dir().join(format!("troupe-access-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = Credentials::NkeyFile(dir.join("missing.nk"));
        assert!(matches!(
            missing.apply(ConnectOptions::new()),
            Err(RemoteError::InvalidOption(e)) if e.contains("cannot read")
        ));
        let junk = dir.join("junk.nk");
        std::fs::write(&junk, "SUnotaseed\n").unwrap();
        assert!(matches!(
            Credentials::NkeyFile(junk).apply(ConnectOptions::new()),
            Err(RemoteError::InvalidOption(e)) if e.contains("does not parse")
        ));
        let good = dir.join("good.nk");
        let seed = nkeys::KeyPair::new_user().seed().unwrap();
        std::fs::write(&good, format!("{seed}\n")).unwrap();
        assert!(Credentials::NkeyFile(good)
            .apply(ConnectOptions::new())
            .is_ok());
        assert!(apply_tls(ConnectOptions::new(), Some(&dir.join("no-ca.pem"))).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
