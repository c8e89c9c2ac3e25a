//! Users, permissions and certificates for the servers that tests and benchmarks start: made
//! at run time in a temporary directory removed with them (no key is ever kept), and written
//! into the server's configuration.
//!
//! Each [`Role`] becomes one NATS user, named by the public half of an nkey made for it; the
//! seed (the secret half) is written to a file of its own, which a node reads through
//! [`Credentials::NkeyFile`]. The server's configuration holds public keys only. With TLS, a
//! certificate authority is made, and a certificate it signs for `127.0.0.1` and `localhost`.

use std::io;
use std::path::{Path, PathBuf};

use super::tempdir::TempDir;
use crate::{Credentials, NodeOptions};

/// What one user may do: the subjects it may publish to and subscribe to (NATS wildcards:
/// `*` one token, `>` the rest), and the root of its answers.
#[derive(Clone, Debug)]
pub struct Role {
    name: String,
    publish: Vec<String>,
    subscribe: Vec<String>,
    inbox_prefix: String,
}

impl Role {
    /// A role that may do nothing yet but read and probe its own answers, under
    /// `_INBOX.<name>`. `name`: letters, digits, '-' and '_'.
    pub fn new(name: &str) -> Role {
        Role {
            name: name.to_string(),
            publish: Vec::new(),
            subscribe: Vec::new(),
            inbox_prefix: format!("_INBOX.{name}"),
        }
    }

    /// A whole troupe node: may export any name, ask and tell any name, watch any name, and
    /// answer anyone.
    pub fn peer(name: &str) -> Role {
        Role::new(name)
            .publish(["troupe.>", "_INBOX.>"])
            .subscribe(["troupe.>", "_INBOX.>"])
    }

    /// Adds subjects it may publish to.
    pub fn publish<S: Into<String>>(mut self, subjects: impl IntoIterator<Item = S>) -> Role {
        self.publish.extend(subjects.into_iter().map(Into::into));
        self
    }

    /// Adds subjects it may subscribe to.
    pub fn subscribe<S: Into<String>>(mut self, subjects: impl IntoIterator<Item = S>) -> Role {
        self.subscribe.extend(subjects.into_iter().map(Into::into));
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The root of its answers (its nodes' `NodeOptions::inbox_prefix`).
    pub fn inbox_prefix(&self) -> &str {
        &self.inbox_prefix
    }

    /// What it may publish to, its own answers included (a node probes its subscriptions by
    /// sending itself a message).
    fn publish_allowed(&self) -> Vec<String> {
        let mut all = self.publish.clone();
        all.push(format!("{}.>", self.inbox_prefix));
        all
    }

    fn subscribe_allowed(&self) -> Vec<String> {
        let mut all = self.subscribe.clone();
        all.push(format!("{}.>", self.inbox_prefix));
        all
    }
}

struct User {
    role: Role,
    public_key: String,
    seed_file: PathBuf,
}

struct Tls {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
}

/// Users and, with TLS, certificates for a server: give it to [`super::NatsServer::secured`]
/// and take each node's options from [`Access::options`].
pub struct Access {
    users: Vec<User>,
    tls: Option<Tls>,
    dir: TempDir,
}

fn io_error(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}

/// Writes a secret readable by its owner only.
fn write_secret(path: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(text.as_bytes())
}

impl Access {
    /// An nkey per role, and certificates if `tls`.
    pub fn new(roles: impl IntoIterator<Item = Role>, tls: bool) -> io::Result<Access> {
        let dir = TempDir::new("access")?;
        let mut users = Vec::new();
        for role in roles {
            if users.iter().any(|u: &User| u.role.name == role.name) {
                return Err(io_error("roles", format!("`{}` given twice", role.name)));
            }
            let key = nkeys::KeyPair::new_user();
            let seed = key.seed().map_err(|e| io_error("an nkey seed", e))?;
            let seed_file = dir.path().join(format!("{}.nk", role.name));
            write_secret(&seed_file, &format!("{seed}\n"))?;
            users.push(User {
                public_key: key.public_key(),
                seed_file,
                role,
            });
        }
        let tls = if tls {
            Some(make_certificates(dir.path())?)
        } else {
            None
        };
        Ok(Access { users, tls, dir })
    }

    fn user(&self, role: &str) -> &User {
        self.users
            .iter()
            .find(|u| u.role.name == role)
            .unwrap_or_else(|| panic!("no role `{role}` in this access"))
    }

    /// Options for a node of `role`: its credentials, its inbox, and the certificate authority
    /// if the server speaks TLS. Panics if there is no such role (a mistake in the test).
    pub fn options(&self, role: &str) -> NodeOptions {
        let user = self.user(role);
        NodeOptions {
            credentials: Credentials::NkeyFile(user.seed_file.clone()),
            inbox_prefix: user.role.inbox_prefix.clone(),
            tls_ca: self.ca().map(Path::to_path_buf),
            ..NodeOptions::default()
        }
    }

    /// The file holding `role`'s nkey seed.
    pub fn seed_file(&self, role: &str) -> &Path {
        &self.user(role).seed_file
    }

    /// The certificate authority's PEM file, with TLS.
    pub fn ca(&self) -> Option<&Path> {
        self.tls.as_ref().map(|t| t.ca.as_path())
    }

    /// Where its files are.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server configuration: its `authorization` block and, with TLS, its `tls` block.
    pub fn server_config(&self) -> String {
        let list = |subjects: &[String]| {
            subjects
                .iter()
                .map(|s| quote(s))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut text = String::from("authorization {\n  users = [\n");
        for user in &self.users {
            text.push_str(&format!(
                "    {{ nkey: {}, permissions: {{ publish: {{ allow: [{}] }}, subscribe: {{ allow: [{}] }} }} }}\n",
                quote(&user.public_key),
                list(&user.role.publish_allowed()),
                list(&user.role.subscribe_allowed()),
            ));
        }
        text.push_str("  ]\n}\n");
        if let Some(tls) = &self.tls {
            text.push_str(&format!(
                "tls {{\n  cert_file: {}\n  key_file: {}\n  timeout: 5\n}}\n",
                quote(&tls.cert.to_string_lossy()),
                quote(&tls.key.to_string_lossy()),
            ));
        }
        text
    }
}

/// A string in the server configuration's syntax.
fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A certificate authority, and a server certificate it signs for loopback.
fn make_certificates(dir: &Path) -> io::Result<Tls> {
    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
        KeyUsagePurpose,
    };
    let fail = |e: rcgen::Error| io_error("making a certificate", e);
    let ca_key = KeyPair::generate().map_err(fail)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, "troupe test authority");
    ca.distinguished_name = name;
    let ca_cert = ca.self_signed(&ca_key).map_err(fail)?;
    let issuer = Issuer::new(ca, ca_key);

    let server_key = KeyPair::generate().map_err(fail)?;
    let mut server = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .map_err(fail)?;
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, "nats-server");
    server.distinguished_name = name;
    let server_cert = server.signed_by(&server_key, &issuer).map_err(fail)?;

    let tls = Tls {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server-key.pem"),
    };
    std::fs::write(&tls.ca, ca_cert.pem())?;
    std::fs::write(&tls.cert, server_cert.pem())?;
    write_secret(&tls.key, &server_key.serialize_pem())?;
    Ok(tls)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_configuration_names_public_keys_and_never_a_seed() {
        let access = Access::new(
            [
                Role::peer("engine"),
                Role::new("client").publish(["troupe.x.orders"]),
            ],
            true,
        )
        .unwrap();
        let config = access.server_config();
        let seed = std::fs::read_to_string(access.seed_file("client")).unwrap();
        assert!(seed.starts_with("SU"));
        assert!(!config.contains(seed.trim()), "{config}");
        assert_eq!(config.matches("nkey: \"U").count(), 2, "{config}");
        assert!(config.contains(r#"allow: ["troupe.x.orders", "_INBOX.client.>"]"#));
        assert!(config.contains("cert_file"));
        assert!(access.ca().unwrap().is_file());
        let options = access.options("client");
        assert_eq!(options.inbox_prefix, "_INBOX.client");
        assert!(options.nats_options().is_ok());
        let dir = access.dir().to_path_buf();
        drop(access);
        assert!(!dir.exists(), "the keys go with the access");
    }
}
