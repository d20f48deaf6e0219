//! Users, their SCRAM-SHA-256 credentials and their permissions: the one place these
//! live. The handshake reads credentials through `proto::handshake::UserLookup`; the
//! `rethinkdb.users`/`rethinkdb.permissions` tables and `grant` change them here.
//!
//! Each user is one record in the `users` storage space (key: the user name), written
//! and fsynced before a change is acknowledged, by the catalog's one writer
//! (`crate::catalog::Catalog`, commands `PutUser`, `DeleteUser`, `SetPermissions`). Passwords are never stored: only the
//! salted PBKDF2 material SCRAM needs (`ScramCredentials`). A user "without a password"
//! has credentials for the empty password, as in RethinkDB, and reads back as
//! `password: false`.
//!
//! Permission rules follow RethinkDB 2.4 (`auth/user.cc`, `user_context.cc`): the most
//! specific set value wins (table, then database, then global); writing needs `read`
//! and `write`; `config` falls back from table to database to global; `connect` is
//! global only. `admin` has everything and cannot be changed or deleted. For the
//! `rethinkdb` system database the global scope does not apply to reads and writes:
//! access must be granted on the database or its tables.

mod perms;
mod store;

pub use perms::{Perm, Perms};
pub(crate) use store::User;
pub use store::{Scope, Users, ADMIN};
