//! PostgreSQL through `tokio-postgres`: its own wire protocol, every
//! statement prepared once per connection (lazily, so that a connection can
//! be opened before the tables exist). YCSB records are one JSONB document
//! per row, like Ponder's documents; key-value pairs are two text columns.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use tokio::sync::OnceCell;
use tokio_postgres::{Client, NoTls, Statement};

use super::{Dataset, Durability, Endpoint, TargetError};
use crate::data::{field_name, FIELDS};

/// The prepared statements, in [`PgConn::stmts`] order.
const SQL: [&str; 9] = [
    // 0: YCSB read
    "SELECT doc FROM usertable WHERE ycsb_key = $1",
    // 1: YCSB update of one field
    "UPDATE usertable SET doc = doc || jsonb_build_object($2::text, $3::text) WHERE ycsb_key = $1",
    // 2: YCSB bulk insert
    "INSERT INTO usertable (ycsb_key, doc) SELECT * FROM unnest($1::text[], $2::jsonb[])",
    // 3: the analytic query
    "SELECT COALESCE(SUM(COALESCE(array_length(string_to_array(doc->>'field0', '.'), 1), 0)), 0)::bigint FROM usertable",
    // 4: KV bulk insert
    "INSERT INTO kv (k, v) SELECT * FROM unnest($1::text[], $2::text[])",
    // 5: KV get
    "SELECT v FROM kv WHERE k = $1",
    // 6: KV upsert
    "INSERT INTO kv (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
    // 7: KV insert
    "INSERT INTO kv (k, v) VALUES ($1, $2)",
    // 8: KV delete
    "DELETE FROM kv WHERE k = $1",
];

/// One PostgreSQL session.
pub struct PgConn {
    client: Client,
    stmts: [OnceCell<Statement>; SQL.len()],
    durability: Durability,
}

impl PgConn {
    /// Connects (no TLS: loopback) and sets the session's `synchronous_commit`.
    pub async fn connect(ep: &Endpoint, d: Durability) -> Result<Self, TargetError> {
        let mut cfg = tokio_postgres::Config::new();
        cfg.host(&ep.host)
            .port(ep.port)
            .user(&ep.user)
            .dbname("postgres")
            .application_name("ponder-bench");
        if !ep.password.is_empty() {
            cfg.password(&ep.password);
        }
        let (client, connection) = cfg.connect(NoTls).await?;
        tokio::spawn(async move {
            // Ends when the client is dropped or the server goes away; errors
            // surface on the client's next query.
            let _ = connection.await;
        });
        if d == Durability::Soft {
            client.batch_execute("SET synchronous_commit = off").await?;
        }
        Ok(Self {
            client,
            stmts: Default::default(),
            durability: d,
        })
    }

    async fn stmt(&self, i: usize) -> Result<&Statement, TargetError> {
        let cell = self
            .stmts
            .get(i)
            .ok_or_else(|| TargetError::Unexpected(format!("no statement {i}")))?;
        Ok(cell
            .get_or_try_init(|| async { self.client.prepare(SQL[i]).await })
            .await?)
    }

    pub(super) async fn describe(&self) -> Result<(String, BTreeMap<String, String>), TargetError> {
        let version: String = self
            .client
            .query_one("SHOW server_version", &[])
            .await?
            .get(0);
        let mut s = BTreeMap::new();
        for name in [
            "synchronous_commit",
            "fsync",
            "wal_sync_method",
            "shared_buffers",
            "max_connections",
        ] {
            let row = self.client.query_one(&format!("SHOW {name}"), &[]).await?;
            s.insert(name.to_owned(), row.get::<_, String>(0));
        }
        s.insert(
            "session synchronous_commit".into(),
            format!(
                "{} for {} writes (kv-insert, insert-1k: off)",
                if self.durability == Durability::Hard {
                    "server default"
                } else {
                    "off"
                },
                self.durability.name()
            ),
        );
        s.insert(
            "storage".into(),
            "usertable(ycsb_key text primary key, doc jsonb); kv(k text primary key, v text)"
                .into(),
        );
        Ok((version, s))
    }

    pub(super) async fn reset(&self, ds: Dataset) -> Result<(), TargetError> {
        let sql = match ds {
            Dataset::Ycsb => {
                "DROP TABLE IF EXISTS usertable; \
                 CREATE TABLE usertable (ycsb_key text PRIMARY KEY, doc jsonb NOT NULL)"
            }
            Dataset::Kv => {
                "DROP TABLE IF EXISTS kv; CREATE TABLE kv (k text PRIMARY KEY, v text NOT NULL)"
            }
        };
        // Statements prepared on this session against the dropped table
        // would be stale: callers reset on a connection of its own.
        self.client.batch_execute(sql).await?;
        Ok(())
    }

    pub(super) async fn ycsb_insert(
        &self,
        recs: &[(String, Vec<String>)],
    ) -> Result<(), TargetError> {
        let keys: Vec<&str> = recs.iter().map(|(k, _)| k.as_str()).collect();
        let docs: Vec<Value> = recs
            .iter()
            .map(|(_, fields)| {
                let mut m = Map::with_capacity(FIELDS);
                for (f, v) in fields.iter().enumerate() {
                    m.insert(field_name(f), Value::String(v.clone()));
                }
                Value::Object(m)
            })
            .collect();
        let n = self
            .client
            .execute(self.stmt(2).await?, &[&keys, &docs])
            .await?;
        expect_rows(n, recs.len() as u64, "insert")
    }

    pub(super) async fn ycsb_read(&self, key: &str) -> Result<Option<Vec<String>>, TargetError> {
        let row = self.client.query_opt(self.stmt(0).await?, &[&key]).await?;
        let Some(row) = row else { return Ok(None) };
        let doc: Value = row.try_get(0)?;
        super::ycsb_fields(&doc, key).map(Some)
    }

    pub(super) async fn ycsb_update(
        &self,
        key: &str,
        field: usize,
        value: &str,
    ) -> Result<(), TargetError> {
        let name = field_name(field);
        let n = self
            .client
            .execute(self.stmt(1).await?, &[&key, &name, &value])
            .await?;
        expect_rows(n, 1, "update")
    }

    pub(super) async fn analytic(&self) -> Result<u64, TargetError> {
        let row = self.client.query_one(self.stmt(3).await?, &[]).await?;
        let v: i64 = row.try_get(0)?;
        u64::try_from(v).map_err(|_| TargetError::Unexpected(format!("sum {v}")))
    }

    pub(super) async fn kv_insert_many(&self, kvs: &[(String, String)]) -> Result<(), TargetError> {
        let keys: Vec<&str> = kvs.iter().map(|(k, _)| k.as_str()).collect();
        let vals: Vec<&str> = kvs.iter().map(|(_, v)| v.as_str()).collect();
        let n = self
            .client
            .execute(self.stmt(4).await?, &[&keys, &vals])
            .await?;
        expect_rows(n, kvs.len() as u64, "insert")
    }

    pub(super) async fn kv_get(&self, key: &str) -> Result<Option<String>, TargetError> {
        let row = self.client.query_opt(self.stmt(5).await?, &[&key]).await?;
        Ok(match row {
            Some(r) => Some(r.try_get(0)?),
            None => None,
        })
    }

    pub(super) async fn kv_put(&self, key: &str, value: &str) -> Result<(), TargetError> {
        let n = self
            .client
            .execute(self.stmt(6).await?, &[&key, &value])
            .await?;
        expect_rows(n, 1, "upsert")
    }

    pub(super) async fn kv_insert(&self, key: &str, value: &str) -> Result<(), TargetError> {
        let n = self
            .client
            .execute(self.stmt(7).await?, &[&key, &value])
            .await?;
        expect_rows(n, 1, "insert")
    }

    pub(super) async fn kv_delete(&self, key: &str) -> Result<(), TargetError> {
        self.client.execute(self.stmt(8).await?, &[&key]).await?;
        Ok(())
    }
}

fn expect_rows(n: u64, want: u64, what: &str) -> Result<(), TargetError> {
    if n == want {
        Ok(())
    } else {
        Err(TargetError::Unexpected(format!(
            "{what} affected {n} rows, not {want}"
        )))
    }
}
