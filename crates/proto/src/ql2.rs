//! Enums mirroring RethinkDB 2.4's `ql2.proto` (`src/rdb_protocol/ql2.proto`).
//!
//! Invariants: every discriminant is exactly the number used on the wire by
//! RethinkDB, variant names are spelled exactly as in `ql2.proto` (so
//! [`TermType::name`] is the proto name), and `from_i64(x.as_i64()) == Some(x)`
//! for every variant. Numbers were taken from the official Python driver's
//! generated `rethinkdb/ql2_pb2.py` (driver 2.4.10.post1); `TermType::FORMAT`
//! (197) comes from RethinkDB's post-2.4 `ql2.proto` (`r.format`) and is kept
//! so newer drivers' terms are recognised.

/// Declares a wire enum with `from_i64`, `as_i64`, `name`, `ALL` and `Display`.
macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($var:ident = $num:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(i64)]
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        pub enum $name {
            $(
                #[doc = concat!("`", stringify!($var), " = ", stringify!($num), "` in ql2.proto.")]
                $var = $num,
            )+
        }

        impl $name {
            /// Every variant, in `ql2.proto` declaration order.
            pub const ALL: &'static [$name] = &[$($name::$var),+];

            /// The variant with wire number `n`, or `None` if `n` is unknown.
            pub fn from_i64(n: i64) -> Option<Self> {
                match n {
                    $($num => Some(Self::$var),)+
                    _ => None,
                }
            }

            /// The wire number of this variant.
            pub fn as_i64(self) -> i64 {
                self as i64
            }

            /// The variant's name exactly as spelled in `ql2.proto`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$var => stringify!($var),)+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

wire_enum! {
    /// `VersionDummy.Version`: the 4-byte little-endian magic a client sends first.
    Version {
        V0_1 = 0x3f61ba36,
        V0_2 = 0x723081e1,
        V0_3 = 0x5f75e83e,
        V0_4 = 0x400c2d20,
        V1_0 = 0x34c2bdc3,
    }
}

wire_enum! {
    /// `VersionDummy.Protocol`: the wire protocol chosen by pre-V1_0 clients.
    Protocol {
        PROTOBUF = 0x271ffc41,
        JSON = 0x7e6970c7,
    }
}

wire_enum! {
    /// `Query.QueryType`: the first element of every query array.
    QueryType {
        START = 1,
        CONTINUE = 2,
        STOP = 3,
        NOREPLY_WAIT = 4,
        SERVER_INFO = 5,
    }
}

wire_enum! {
    /// `Frame.FrameType`: kind of a (protobuf-era) backtrace frame.
    FrameType {
        POS = 1,
        OPT = 2,
    }
}

wire_enum! {
    /// `Response.ResponseType`: the `"t"` field of a response.
    ResponseType {
        SUCCESS_ATOM = 1,
        SUCCESS_SEQUENCE = 2,
        SUCCESS_PARTIAL = 3,
        WAIT_COMPLETE = 4,
        SERVER_INFO = 5,
        CLIENT_ERROR = 16,
        COMPILE_ERROR = 17,
        RUNTIME_ERROR = 18,
    }
}

wire_enum! {
    /// `Response.ErrorType`: the `"e"` field of a `RUNTIME_ERROR` response.
    ErrorType {
        INTERNAL = 1000000,
        RESOURCE_LIMIT = 2000000,
        QUERY_LOGIC = 3000000,
        NON_EXISTENCE = 3100000,
        OP_FAILED = 4100000,
        OP_INDETERMINATE = 4200000,
        USER = 5000000,
        PERMISSION_ERROR = 6000000,
    }
}

wire_enum! {
    /// `Response.ResponseNote`: entries of the `"n"` field of a response.
    ResponseNote {
        SEQUENCE_FEED = 1,
        ATOM_FEED = 2,
        ORDER_BY_LIMIT_FEED = 3,
        UNIONED_FEED = 4,
        INCLUDES_STATES = 5,
    }
}

wire_enum! {
    /// `Datum.DatumType`: datum kinds of the (protobuf-era) datum encoding.
    DatumType {
        R_NULL = 1,
        R_BOOL = 2,
        R_NUM = 3,
        R_STR = 4,
        R_ARRAY = 5,
        R_OBJECT = 6,
        R_JSON = 7,
    }
}

wire_enum! {
    /// `Term.TermType`: the first element of every term array.
    TermType {
        DATUM = 1,
        MAKE_ARRAY = 2,
        MAKE_OBJ = 3,
        VAR = 10,
        JAVASCRIPT = 11,
        UUID = 169,
        HTTP = 153,
        ERROR = 12,
        IMPLICIT_VAR = 13,
        DB = 14,
        TABLE = 15,
        GET = 16,
        GET_ALL = 78,
        EQ = 17,
        NE = 18,
        LT = 19,
        LE = 20,
        GT = 21,
        GE = 22,
        NOT = 23,
        ADD = 24,
        SUB = 25,
        MUL = 26,
        DIV = 27,
        MOD = 28,
        FLOOR = 183,
        CEIL = 184,
        ROUND = 185,
        APPEND = 29,
        PREPEND = 80,
        DIFFERENCE = 95,
        SET_INSERT = 88,
        SET_INTERSECTION = 89,
        SET_UNION = 90,
        SET_DIFFERENCE = 91,
        SLICE = 30,
        SKIP = 70,
        LIMIT = 71,
        OFFSETS_OF = 87,
        CONTAINS = 93,
        GET_FIELD = 31,
        KEYS = 94,
        VALUES = 186,
        OBJECT = 143,
        HAS_FIELDS = 32,
        WITH_FIELDS = 96,
        PLUCK = 33,
        WITHOUT = 34,
        MERGE = 35,
        BETWEEN_DEPRECATED = 36,
        BETWEEN = 182,
        REDUCE = 37,
        MAP = 38,
        FOLD = 187,
        FILTER = 39,
        CONCAT_MAP = 40,
        ORDER_BY = 41,
        DISTINCT = 42,
        COUNT = 43,
        IS_EMPTY = 86,
        UNION = 44,
        NTH = 45,
        BRACKET = 170,
        INNER_JOIN = 48,
        OUTER_JOIN = 49,
        EQ_JOIN = 50,
        ZIP = 72,
        RANGE = 173,
        INSERT_AT = 82,
        DELETE_AT = 83,
        CHANGE_AT = 84,
        SPLICE_AT = 85,
        COERCE_TO = 51,
        TYPE_OF = 52,
        UPDATE = 53,
        DELETE = 54,
        REPLACE = 55,
        INSERT = 56,
        DB_CREATE = 57,
        DB_DROP = 58,
        DB_LIST = 59,
        TABLE_CREATE = 60,
        TABLE_DROP = 61,
        TABLE_LIST = 62,
        CONFIG = 174,
        STATUS = 175,
        WAIT = 177,
        RECONFIGURE = 176,
        REBALANCE = 179,
        SYNC = 138,
        GRANT = 188,
        INDEX_CREATE = 75,
        INDEX_DROP = 76,
        INDEX_LIST = 77,
        INDEX_STATUS = 139,
        INDEX_WAIT = 140,
        INDEX_RENAME = 156,
        SET_WRITE_HOOK = 189,
        GET_WRITE_HOOK = 190,
        FUNCALL = 64,
        BRANCH = 65,
        OR = 66,
        AND = 67,
        FOR_EACH = 68,
        FUNC = 69,
        ASC = 73,
        DESC = 74,
        INFO = 79,
        MATCH = 97,
        UPCASE = 141,
        DOWNCASE = 142,
        SAMPLE = 81,
        DEFAULT = 92,
        JSON = 98,
        ISO8601 = 99,
        TO_ISO8601 = 100,
        EPOCH_TIME = 101,
        TO_EPOCH_TIME = 102,
        NOW = 103,
        IN_TIMEZONE = 104,
        DURING = 105,
        DATE = 106,
        TIME_OF_DAY = 126,
        TIMEZONE = 127,
        YEAR = 128,
        MONTH = 129,
        DAY = 130,
        DAY_OF_WEEK = 131,
        DAY_OF_YEAR = 132,
        HOURS = 133,
        MINUTES = 134,
        SECONDS = 135,
        TIME = 136,
        MONDAY = 107,
        TUESDAY = 108,
        WEDNESDAY = 109,
        THURSDAY = 110,
        FRIDAY = 111,
        SATURDAY = 112,
        SUNDAY = 113,
        JANUARY = 114,
        FEBRUARY = 115,
        MARCH = 116,
        APRIL = 117,
        MAY = 118,
        JUNE = 119,
        JULY = 120,
        AUGUST = 121,
        SEPTEMBER = 122,
        OCTOBER = 123,
        NOVEMBER = 124,
        DECEMBER = 125,
        LITERAL = 137,
        GROUP = 144,
        SUM = 145,
        AVG = 146,
        MIN = 147,
        MAX = 148,
        SPLIT = 149,
        UNGROUP = 150,
        RANDOM = 151,
        CHANGES = 152,
        ARGS = 154,
        BINARY = 155,
        GEOJSON = 157,
        TO_GEOJSON = 158,
        POINT = 159,
        LINE = 160,
        POLYGON = 161,
        DISTANCE = 162,
        INTERSECTS = 163,
        INCLUDES = 164,
        CIRCLE = 165,
        GET_INTERSECTING = 166,
        FILL = 167,
        GET_NEAREST = 168,
        POLYGON_SUB = 171,
        TO_JSON_STRING = 172,
        MINVAL = 180,
        MAXVAL = 181,
        BIT_AND = 191,
        BIT_OR = 192,
        BIT_XOR = 193,
        BIT_NOT = 194,
        BIT_SAL = 195,
        BIT_SAR = 196,
        FORMAT = 197,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_match_ql2_proto() {
        assert_eq!(Version::V1_0.as_i64(), 0x34c2bdc3);
        assert_eq!(Protocol::JSON.as_i64(), 0x7e6970c7);
        assert_eq!(QueryType::NOREPLY_WAIT.as_i64(), 4);
        assert_eq!(ResponseType::CLIENT_ERROR.as_i64(), 16);
        assert_eq!(ErrorType::NON_EXISTENCE.as_i64(), 3_100_000);
        assert_eq!(ResponseNote::INCLUDES_STATES.as_i64(), 5);
        assert_eq!(TermType::DATUM.as_i64(), 1);
        assert_eq!(TermType::VAR.as_i64(), 10);
        assert_eq!(TermType::UUID.as_i64(), 169);
        assert_eq!(TermType::HTTP.as_i64(), 153);
        assert_eq!(TermType::GET_ALL.as_i64(), 78);
        assert_eq!(TermType::GET_FIELD.as_i64(), 31);
        assert_eq!(TermType::BRACKET.as_i64(), 170);
        assert_eq!(TermType::FUNC.as_i64(), 69);
        assert_eq!(TermType::BIT_SAR.as_i64(), 196);
        assert_eq!(TermType::FORMAT.as_i64(), 197);
        assert_eq!(TermType::GET_FIELD.name(), "GET_FIELD");
        assert_eq!(TermType::from_i64(46), None); // OBSOLETE_GROUPED_MAPREDUCE
        assert_eq!(TermType::ALL.len(), 187);
    }

    #[test]
    fn every_variant_round_trips() {
        fn check<T: Copy + PartialEq + std::fmt::Debug>(
            all: &[T],
            to: fn(T) -> i64,
            from: fn(i64) -> Option<T>,
        ) {
            let mut seen = std::collections::HashSet::new();
            for &v in all {
                assert!(seen.insert(to(v)), "duplicate number for {v:?}");
                assert_eq!(from(to(v)), Some(v));
            }
        }
        check(Version::ALL, Version::as_i64, Version::from_i64);
        check(Protocol::ALL, Protocol::as_i64, Protocol::from_i64);
        check(QueryType::ALL, QueryType::as_i64, QueryType::from_i64);
        check(FrameType::ALL, FrameType::as_i64, FrameType::from_i64);
        check(
            ResponseType::ALL,
            ResponseType::as_i64,
            ResponseType::from_i64,
        );
        check(ErrorType::ALL, ErrorType::as_i64, ErrorType::from_i64);
        check(
            ResponseNote::ALL,
            ResponseNote::as_i64,
            ResponseNote::from_i64,
        );
        check(DatumType::ALL, DatumType::as_i64, DatumType::from_i64);
        check(TermType::ALL, TermType::as_i64, TermType::from_i64);
        for t in TermType::ALL {
            assert_eq!(t.to_string(), t.name());
        }
    }
}
