//! Ponder (or any RethinkDB-protocol server) through `client`: ReQL terms in
//! JSON, each answer checked (`inserted`, `replaced`, `deleted` counts).

use std::collections::BTreeMap;

use client::{term, Connection};
use serde_json::{json, Map, Value};

use super::{Dataset, Durability, Endpoint, TargetError};
use crate::data::{field_name, FIELDS};

/// The database.
pub const DB: &str = "bench";
/// YCSB's table.
pub const USERTABLE: &str = "usertable";
/// The key-value table.
pub const KV: &str = "kv";

/// One Ponder connection.
pub struct PonderConn {
    conn: Connection,
    write_optargs: Map<String, Value>,
    table_optargs: Map<String, Value>,
    durability: Durability,
    read_mode: String,
}

fn count(v: &Value, name: &str) -> u64 {
    v.get(name).and_then(Value::as_u64).unwrap_or(0)
}

fn write_ok(v: &Value, what: &str, ok: impl Fn(&Value) -> bool) -> Result<(), TargetError> {
    if count(v, "errors") == 0 && ok(v) {
        Ok(())
    } else {
        Err(TargetError::Unexpected(format!("{what} returned {v}")))
    }
}

impl PonderConn {
    /// Connects and authenticates.
    pub async fn connect(ep: &Endpoint, d: Durability) -> Result<Self, TargetError> {
        let conn = Connection::connect_with(&client::ConnectOptions {
            host: ep.host.clone(),
            port: ep.port,
            user: ep.user.clone(),
            password: ep.password.clone(),
            ..client::ConnectOptions::default()
        })
        .await?;
        let mut write_optargs = Map::new();
        write_optargs.insert("durability".into(), json!(d.name()));
        let mut table_optargs = Map::new();
        if ep.read_mode != "single" {
            table_optargs.insert("read_mode".into(), json!(ep.read_mode));
        }
        Ok(Self {
            conn,
            write_optargs,
            table_optargs,
            durability: d,
            read_mode: ep.read_mode.clone(),
        })
    }

    fn table(&self, name: &str) -> Value {
        term::table_with(DB, name, self.table_optargs.clone())
    }

    pub(super) async fn describe(&self) -> Result<(String, BTreeMap<String, String>), TargetError> {
        let info = self.conn.server_info().await?;
        let mut s = BTreeMap::new();
        s.insert("read_mode".into(), self.read_mode.clone());
        s.insert(
            "write durability".into(),
            format!(
                "{} (per query; kv-insert and insert-1k use soft)",
                self.durability.name()
            ),
        );
        if let Some(name) = info.get("name").and_then(Value::as_str) {
            s.insert("server name".into(), name.to_owned());
        }
        Ok((String::new(), s))
    }

    pub(super) async fn reset(&self, ds: Dataset) -> Result<(), TargetError> {
        let name = match ds {
            Dataset::Ycsb => USERTABLE,
            Dataset::Kv => KV,
        };
        let dbs = self.conn.run(term::db_list(), Value::Null).await?;
        let has = |list: &Value, n: &str| {
            list.as_array()
                .is_some_and(|a| a.iter().any(|v| v.as_str() == Some(n)))
        };
        if !has(&dbs, DB) {
            self.conn.run(term::db_create(DB), Value::Null).await?;
        }
        let tables = self.conn.run(term::table_list(DB), Value::Null).await?;
        if has(&tables, name) {
            self.conn
                .run(term::table_drop(DB, name), Value::Null)
                .await?;
        }
        self.conn
            .run(term::table_create(DB, name), Value::Null)
            .await?;
        Ok(())
    }

    async fn insert_docs(&self, table: &str, docs: Vec<Value>) -> Result<(), TargetError> {
        let n = docs.len() as u64;
        let q = term::insert(
            term::table(DB, table),
            &Value::Array(docs),
            self.write_optargs.clone(),
        );
        let r = self.conn.run(q, Value::Null).await?;
        write_ok(&r, "insert", |v| count(v, "inserted") == n)
    }

    pub(super) async fn ycsb_insert(
        &self,
        recs: &[(String, Vec<String>)],
    ) -> Result<(), TargetError> {
        let docs = recs
            .iter()
            .map(|(k, fields)| {
                let mut m = Map::with_capacity(FIELDS + 1);
                m.insert("id".into(), json!(k));
                for (f, v) in fields.iter().enumerate() {
                    m.insert(field_name(f), json!(v));
                }
                Value::Object(m)
            })
            .collect();
        self.insert_docs(USERTABLE, docs).await
    }

    pub(super) async fn ycsb_read(&self, key: &str) -> Result<Option<Vec<String>>, TargetError> {
        let v = self
            .conn
            .run(term::get(self.table(USERTABLE), &json!(key)), Value::Null)
            .await?;
        if v.is_null() {
            return Ok(None);
        }
        if v.get("id").and_then(Value::as_str) != Some(key) {
            return Err(TargetError::Unexpected(format!(
                "get({key}) returned another document"
            )));
        }
        super::ycsb_fields(&v, key).map(Some)
    }

    pub(super) async fn ycsb_update(
        &self,
        key: &str,
        field: usize,
        value: &str,
    ) -> Result<(), TargetError> {
        let mut patch = Map::new();
        patch.insert(field_name(field), json!(value));
        let q = term::update(
            term::get(term::table(DB, USERTABLE), &json!(key)),
            &Value::Object(patch),
            self.write_optargs.clone(),
        );
        let r = self.conn.run(q, Value::Null).await?;
        write_ok(&r, "update", |v| {
            count(v, "replaced") + count(v, "unchanged") == 1
        })
    }

    pub(super) async fn run_raw(&self, term: Value, optargs: Value) -> Result<Value, TargetError> {
        Ok(self.conn.run(term, optargs).await?)
    }

    pub(super) async fn analytic(&self) -> Result<u64, TargetError> {
        let q = term::sum(term::map(
            self.table(USERTABLE),
            term::func1(term::count(term::split(
                term::get_field(term::var(1), "field0"),
                ".",
            ))),
        ));
        let v = self.conn.run(q, Value::Null).await?;
        v.as_u64()
            .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
            .ok_or_else(|| TargetError::Unexpected(format!("the analytic query returned {v}")))
    }

    pub(super) async fn kv_insert_many(&self, kvs: &[(String, String)]) -> Result<(), TargetError> {
        let docs = kvs.iter().map(|(k, v)| json!({"id": k, "v": v})).collect();
        self.insert_docs(KV, docs).await
    }

    pub(super) async fn kv_get(&self, key: &str) -> Result<Option<String>, TargetError> {
        let v = self
            .conn
            .run(term::get(self.table(KV), &json!(key)), Value::Null)
            .await?;
        if v.is_null() {
            return Ok(None);
        }
        v.get("v")
            .and_then(Value::as_str)
            .map(|s| Some(s.to_owned()))
            .ok_or_else(|| TargetError::Unexpected(format!("get({key}) returned {v}")))
    }

    pub(super) async fn kv_put(&self, key: &str, value: &str) -> Result<(), TargetError> {
        let mut o = self.write_optargs.clone();
        o.insert("conflict".into(), json!("replace"));
        let q = term::insert(term::table(DB, KV), &json!({"id": key, "v": value}), o);
        let r = self.conn.run(q, Value::Null).await?;
        write_ok(&r, "upsert", |v| {
            count(v, "inserted") + count(v, "replaced") + count(v, "unchanged") == 1
        })
    }

    pub(super) async fn kv_insert(&self, key: &str, value: &str) -> Result<(), TargetError> {
        self.insert_docs(KV, vec![json!({"id": key, "v": value})])
            .await
    }

    pub(super) async fn kv_delete(&self, key: &str) -> Result<(), TargetError> {
        let q = term::delete(
            term::get(term::table(DB, KV), &json!(key)),
            self.write_optargs.clone(),
        );
        let r = self.conn.run(q, Value::Null).await?;
        write_ok(&r, "delete", |v| {
            count(v, "deleted") + count(v, "skipped") == 1
        })
    }
}
