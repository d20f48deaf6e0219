//! Per-term signatures: arity and accepted optargs, as RethinkDB's `argspec_t` and
//! `optargspec_t` declare them. One table for every term type, consulted at compile time.

use proto::ql2::TermType as T;

const INF: Option<usize> = None;

/// `(min, max)` positional arguments; `max == None` means unbounded.
pub fn arity(tt: T) -> (usize, Option<usize>) {
    let one = (1, Some(1));
    let two = (2, Some(2));
    let three = (3, Some(3));
    match tt {
        T::DATUM | T::MAKE_OBJ | T::IMPLICIT_VAR | T::NOW | T::MINVAL | T::MAXVAL | T::DB_LIST => {
            (0, Some(0))
        }
        T::MONDAY
        | T::TUESDAY
        | T::WEDNESDAY
        | T::THURSDAY
        | T::FRIDAY
        | T::SATURDAY
        | T::SUNDAY
        | T::JANUARY
        | T::FEBRUARY
        | T::MARCH
        | T::APRIL
        | T::MAY
        | T::JUNE
        | T::JULY
        | T::AUGUST
        | T::SEPTEMBER
        | T::OCTOBER
        | T::NOVEMBER
        | T::DECEMBER => (0, Some(0)),
        T::MAKE_ARRAY => (0, INF),
        T::VAR
        | T::JAVASCRIPT
        | T::HTTP
        | T::DB
        | T::NOT
        | T::KEYS
        | T::VALUES
        | T::TYPE_OF
        | T::INFO
        | T::JSON
        | T::TO_JSON_STRING
        | T::IS_EMPTY
        | T::UNGROUP
        | T::ASC
        | T::DESC
        | T::UPCASE
        | T::DOWNCASE
        | T::TO_ISO8601
        | T::TO_EPOCH_TIME
        | T::TIMEZONE
        | T::DATE
        | T::TIME_OF_DAY
        | T::YEAR
        | T::MONTH
        | T::DAY
        | T::DAY_OF_WEEK
        | T::DAY_OF_YEAR
        | T::HOURS
        | T::MINUTES
        | T::SECONDS
        | T::EPOCH_TIME
        | T::ISO8601
        | T::FLOOR
        | T::CEIL
        | T::ROUND
        | T::BIT_NOT
        | T::GEOJSON
        | T::TO_GEOJSON
        | T::FILL
        | T::CONFIG
        | T::STATUS
        | T::SYNC
        | T::INDEX_LIST
        | T::GET_WRITE_HOOK
        | T::ARGS
        | T::BINARY
        | T::DB_CREATE
        | T::DB_DROP
        | T::CHANGES => one,
        // `wait`, `reconfigure` and `rebalance` take the table or database as an
        // optional argument (RethinkDB's `table_or_db_meta_term_t`); without it they fail
        // when run ("`wait` can only be called on a table or database.").
        T::UUID
        | T::ERROR
        | T::LITERAL
        | T::TABLE_LIST
        | T::WAIT
        | T::REBALANCE
        | T::RECONFIGURE => (0, Some(1)),
        T::TABLE => (1, Some(2)),
        T::TABLE_CREATE | T::TABLE_DROP => (1, Some(2)),
        T::GET
        | T::NTH
        | T::BRACKET
        | T::GET_FIELD
        | T::APPEND
        | T::PREPEND
        | T::DIFFERENCE
        | T::SET_INSERT
        | T::SET_UNION
        | T::SET_INTERSECTION
        | T::SET_DIFFERENCE
        | T::SKIP
        | T::LIMIT
        | T::COERCE_TO
        | T::DEFAULT
        | T::IN_TIMEZONE
        | T::DISTANCE
        | T::INTERSECTS
        | T::INCLUDES
        | T::POLYGON_SUB
        | T::SAMPLE
        | T::MATCH
        | T::REPLACE
        | T::UPDATE
        | T::INSERT
        | T::FOR_EACH
        | T::SET_WRITE_HOOK
        | T::INDEX_DROP
        | T::GET_NEAREST
        | T::OFFSETS_OF
        | T::CONCAT_MAP
        | T::FILTER => two,
        T::DELETE | T::ZIP | T::DISTINCT => one,
        T::COUNT | T::SUM | T::AVG | T::MIN | T::MAX => (1, Some(2)),
        T::INDEX_STATUS | T::INDEX_WAIT => (1, INF),
        T::INSERT_AT
        | T::CHANGE_AT
        | T::SPLICE_AT
        | T::INNER_JOIN
        | T::OUTER_JOIN
        | T::FOLD
        | T::DURING
        | T::INDEX_RENAME => three,
        T::BETWEEN_DEPRECATED => three,
        T::BETWEEN => three,
        T::EQ_JOIN => three,
        T::DELETE_AT => (2, Some(3)),
        T::SLICE => (2, Some(3)),
        T::RANGE => (0, Some(2)),
        T::RANDOM => (0, Some(2)),
        T::SPLIT => (1, Some(3)),
        T::FUNCALL => (1, INF),
        T::FUNC => two,
        T::BRANCH => (3, INF),
        T::EQ | T::NE | T::LT | T::LE | T::GT | T::GE => (2, INF),
        T::ADD | T::SUB | T::MUL | T::DIV => (1, INF),
        T::MOD => two,
        T::AND | T::OR => (0, INF),
        T::BIT_AND | T::BIT_OR | T::BIT_XOR => (1, INF),
        T::BIT_SAL | T::BIT_SAR => two,
        T::GET_ALL => (1, INF),
        T::MAP => (2, INF),
        T::REDUCE => two,
        T::ORDER_BY => (1, INF),
        T::GROUP => (1, INF),
        T::PLUCK | T::WITHOUT | T::HAS_FIELDS | T::WITH_FIELDS => (1, INF),
        T::MERGE => (1, INF),
        T::UNION => (0, INF),
        T::CONTAINS => (1, INF),
        T::OBJECT => (0, INF),
        T::TIME => (4, Some(7)),
        T::INDEX_CREATE => (2, Some(3)),
        T::POINT => two,
        T::LINE => (2, INF),
        T::POLYGON => (3, INF),
        T::CIRCLE => two,
        T::GET_INTERSECTING => two,
        T::FORMAT => two,
        T::GRANT => (2, Some(3)),
    }
}

/// The optargs a term accepts; `None` means the term takes any (not checked here).
pub fn optargs(tt: T) -> Option<&'static [&'static str]> {
    Some(match tt {
        T::TABLE => &["read_mode", "identifier_format", "use_outdated"],
        T::TABLE_CREATE => &[
            "primary_key",
            "shards",
            "replicas",
            "primary_replica_tag",
            "nonvoting_replica_tags",
            "durability",
        ],
        T::INSERT => &[
            "conflict",
            "durability",
            "return_changes",
            "return_vals",
            "ignore_write_hook",
        ],
        T::UPDATE | T::REPLACE => &[
            "non_atomic",
            "durability",
            "return_changes",
            "return_vals",
            "ignore_write_hook",
        ],
        T::DELETE => &[
            "durability",
            "return_changes",
            "return_vals",
            "ignore_write_hook",
        ],
        T::GET_ALL => &["index"],
        T::BETWEEN | T::BETWEEN_DEPRECATED => &["index", "left_bound", "right_bound"],
        T::ORDER_BY => &["index"],
        T::DISTINCT => &["index"],
        T::MIN | T::MAX => &["index"],
        T::EQ_JOIN => &["index", "ordered"],
        T::GROUP => &["index", "multi"],
        T::SLICE => &["left_bound", "right_bound"],
        T::RANDOM => &["float"],
        T::UNION => &["interleave"],
        T::FOLD => &["emit", "final_emit"],
        T::FUNC | T::FUNCALL | T::BRANCH | T::MAKE_ARRAY | T::VAR | T::IMPLICIT_VAR => &[],
        T::FILTER => &["default"],
        T::JAVASCRIPT => &["timeout"],
        T::HTTP => &[
            "timeout",
            "attempts",
            "redirects",
            "verify",
            "result_format",
            "method",
            "auth",
            "params",
            "header",
            "data",
            "page",
            "page_limit",
        ],
        T::ISO8601 => &["default_timezone"],
        T::DURING => &["left_bound", "right_bound"],
        T::INDEX_CREATE => &["multi", "geo"],
        T::INDEX_RENAME => &["overwrite"],
        T::CHANGES => &[
            "squash",
            "changefeed_queue_size",
            "include_initial",
            "include_states",
            "include_offsets",
            "include_types",
        ],
        T::CIRCLE => &["num_vertices", "geo_system", "unit", "fill"],
        T::DISTANCE => &["geo_system", "unit"],
        T::GET_NEAREST => &["index", "max_results", "max_dist", "geo_system", "unit"],
        T::GET_INTERSECTING => &["index"],
        T::RECONFIGURE => &[
            "shards",
            "replicas",
            "primary_replica_tag",
            "dry_run",
            "nonvoting_replica_tags",
            "emergency_repair",
        ],
        T::WAIT => &["wait_for", "timeout"],
        T::SPLIT | T::MATCH | T::GET | T::NTH => &[],
        _ => return None,
    })
}
