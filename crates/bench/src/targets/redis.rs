//! Redis through the `redis` crate on tokio: a YCSB record is a hash (as
//! YCSB's own Redis binding stores it), a key-value pair a string. Redis
//! has no per-request durability: its `appendfsync` applies to every write.

use std::collections::{BTreeMap, HashMap};

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

use super::{Dataset, Endpoint, TargetError};
use crate::data::{field_name, FIELDS};

/// One Redis connection.
pub struct RedisConn {
    conn: MultiplexedConnection,
}

impl RedisConn {
    /// Connects.
    pub async fn connect(ep: &Endpoint) -> Result<Self, TargetError> {
        let url = if ep.password.is_empty() {
            format!("redis://{}:{}/", ep.host, ep.port)
        } else {
            format!("redis://:{}@{}:{}/", ep.password, ep.host, ep.port)
        };
        let client = redis::Client::open(url)?;
        let conn = client.get_multiplexed_async_connection().await?;
        Ok(Self { conn })
    }

    fn c(&self) -> MultiplexedConnection {
        self.conn.clone()
    }

    pub(super) async fn describe(&self) -> Result<(String, BTreeMap<String, String>), TargetError> {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut self.c())
            .await?;
        let version = info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("")
            .trim()
            .to_owned();
        let mut s = BTreeMap::new();
        for name in ["appendonly", "appendfsync", "save"] {
            let kv: Vec<String> = redis::cmd("CONFIG")
                .arg("GET")
                .arg(name)
                .query_async(&mut self.c())
                .await?;
            s.insert(name.to_owned(), kv.get(1).cloned().unwrap_or_default());
        }
        s.insert(
            "storage".into(),
            "YCSB record: hash field0..9; kv: string".into(),
        );
        Ok((version, s))
    }

    pub(super) async fn reset(&self, _ds: Dataset) -> Result<(), TargetError> {
        let _: () = redis::cmd("FLUSHALL").query_async(&mut self.c()).await?;
        Ok(())
    }

    pub(super) async fn ycsb_insert(
        &self,
        recs: &[(String, Vec<String>)],
    ) -> Result<(), TargetError> {
        let mut p = redis::pipe();
        for (k, fields) in recs {
            let items: Vec<(String, &str)> = fields
                .iter()
                .enumerate()
                .map(|(f, v)| (field_name(f), v.as_str()))
                .collect();
            p.hset_multiple(k, &items).ignore();
        }
        let _: () = p.query_async(&mut self.c()).await?;
        Ok(())
    }

    pub(super) async fn ycsb_read(&self, key: &str) -> Result<Option<Vec<String>>, TargetError> {
        let mut m: HashMap<String, String> = self.c().hgetall(key).await?;
        if m.is_empty() {
            return Ok(None);
        }
        let fields = (0..FIELDS)
            .map(|f| {
                m.remove(&field_name(f))
                    .ok_or_else(|| TargetError::Unexpected(format!("{key} lacks field{f}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(fields))
    }

    pub(super) async fn ycsb_update(
        &self,
        key: &str,
        field: usize,
        value: &str,
    ) -> Result<(), TargetError> {
        let _: i64 = self.c().hset(key, field_name(field), value).await?;
        Ok(())
    }

    pub(super) async fn analytic(&self) -> Result<u64, TargetError> {
        Err(TargetError::Unsupported("the analytic query", "redis"))
    }

    pub(super) async fn kv_insert_many(&self, kvs: &[(String, String)]) -> Result<(), TargetError> {
        let _: () = self.c().mset(kvs).await?;
        Ok(())
    }

    pub(super) async fn kv_get(&self, key: &str) -> Result<Option<String>, TargetError> {
        Ok(self.c().get(key).await?)
    }

    pub(super) async fn kv_put(&self, key: &str, value: &str) -> Result<(), TargetError> {
        let _: () = self.c().set(key, value).await?;
        Ok(())
    }

    pub(super) async fn kv_insert(&self, key: &str, value: &str) -> Result<(), TargetError> {
        let set: bool = self.c().set_nx(key, value).await?;
        if set {
            Ok(())
        } else {
            Err(TargetError::Unexpected(format!("{key} already exists")))
        }
    }

    pub(super) async fn kv_delete(&self, key: &str) -> Result<(), TargetError> {
        let _: i64 = self.c().del(key).await?;
        Ok(())
    }
}
