//! Term implementations, one module per family, and the one dispatch table.
//!
//! Adding a term: implement it in its family's module and add one line here.

use proto::ql2::TermType as T;

use crate::error::{logic, Result};
use crate::eval::Ev;
use crate::value::Val;

pub mod admin;
pub mod array;
pub mod changes;
pub mod changes_hint;
pub mod changes_limit;
pub mod control;
pub mod db;
pub mod format;
pub mod geo;
pub mod geo_index;
pub mod group;
pub mod http;
pub mod http_addr;
pub mod http_client;
pub mod index;
pub mod index_read;
pub mod insert_many;
pub mod join;
pub mod js;
pub mod json_check;
pub mod math;
pub mod number_text;
pub mod object;
pub mod optimized;
pub mod seq;
pub mod stream;
pub mod strings;
pub mod time;
pub mod union;
pub mod write;
pub mod write_hook;

/// Evaluates `ev.term` by its type.
pub fn dispatch(ev: &Ev) -> Result<Val> {
    let t = ev.term;
    match t.tt {
        T::DATUM => control::datum(ev),
        T::MAKE_ARRAY => control::make_array(ev),
        T::MAKE_OBJ => control::make_obj(ev),
        T::VAR => control::var(ev),
        T::IMPLICIT_VAR => control::implicit_var(ev),
        T::FUNC => crate::eval::make_func(ev),
        T::JAVASCRIPT => js::javascript(ev),
        T::HTTP => http::http(ev),
        T::FUNCALL => control::funcall(ev),
        T::BRANCH => control::branch(ev),
        T::AND => control::and(ev),
        T::OR => control::or(ev),
        T::NOT => control::not(ev),
        T::ERROR => control::error(ev),
        T::DEFAULT => control::default(ev),
        T::TYPE_OF => control::type_of(ev),
        T::COERCE_TO => control::coerce_to(ev),
        T::INFO => control::info(ev),
        T::JSON => control::json(ev),
        T::TO_JSON_STRING => control::to_json_string(ev),
        T::UUID => control::uuid(ev),
        T::RANGE => control::range(ev),
        T::MINVAL => Ok(Val::Datum(datum::Datum::MinVal)),
        T::MAXVAL => Ok(Val::Datum(datum::Datum::MaxVal)),
        T::NOW => Ok(Val::Datum(ev.ctx.now_datum())),
        T::ARGS => Err(logic("r.args is only valid as an argument.")),

        T::EQ | T::NE | T::LT | T::LE | T::GT | T::GE => math::compare(ev),
        T::ADD => math::add(ev),
        T::SUB => math::sub(ev),
        T::MUL => math::mul(ev),
        T::DIV => math::div(ev),
        T::MOD => math::modulo(ev),
        T::FLOOR | T::CEIL | T::ROUND => math::rounding(ev),
        T::BIT_AND | T::BIT_OR | T::BIT_XOR => math::bits(ev),
        T::BIT_SAL | T::BIT_SAR => math::bit_shift(ev),
        T::BIT_NOT => math::bit_not(ev),
        T::RANDOM => math::random(ev),

        T::GET_FIELD => object::get_field(ev),
        T::BRACKET => object::bracket(ev),
        T::PLUCK => object::pluck(ev),
        T::WITHOUT => object::without(ev),
        T::MERGE => object::merge(ev),
        T::HAS_FIELDS => object::has_fields(ev),
        T::KEYS => object::keys(ev),
        T::VALUES => object::values(ev),
        T::LITERAL => object::literal(ev),
        T::OBJECT => object::object(ev),

        T::FILTER => seq::filter(ev),
        T::CHANGES => changes::changes(ev),
        T::MAP => seq::map(ev),
        T::COUNT => seq::count(ev),
        T::LIMIT => seq::limit(ev),
        T::SKIP => seq::skip(ev),
        T::NTH => seq::nth(ev),
        T::SLICE => seq::slice(ev),
        T::IS_EMPTY => seq::is_empty(ev),
        T::CONCAT_MAP => seq::concat_map(ev),
        T::UNION => union::union(ev),
        T::ORDER_BY => seq::order_by(ev),
        T::DISTINCT => seq::distinct(ev),
        T::REDUCE => seq::reduce(ev),
        T::SUM | T::AVG | T::MIN | T::MAX => seq::aggregate(ev),
        T::CONTAINS => seq::contains(ev),
        T::WITH_FIELDS => seq::with_fields(ev),
        T::GROUP => group::group(ev),
        T::UNGROUP => group::ungroup(ev),
        T::FOLD => stream::fold(ev),
        T::SAMPLE => stream::sample(ev),
        T::INNER_JOIN => join::inner_join(ev),
        T::OUTER_JOIN => join::outer_join(ev),
        T::EQ_JOIN => join::eq_join(ev),
        T::ZIP => join::zip(ev),

        T::DB => db::db(ev),
        T::TABLE => db::table(ev),
        T::DB_CREATE => db::db_create(ev),
        T::DB_DROP => db::db_drop(ev),
        T::DB_LIST => db::db_list(ev),
        T::TABLE_CREATE => db::table_create(ev),
        T::TABLE_DROP => db::table_drop(ev),
        T::TABLE_LIST => db::table_list(ev),
        T::CONFIG => admin::config(ev),
        T::STATUS => admin::status(ev),
        T::GRANT => admin::grant(ev),
        T::RECONFIGURE => admin::reconfigure(ev),
        T::REBALANCE => admin::rebalance(ev),
        T::SYNC => db::sync(ev),
        T::WAIT => db::wait(ev),
        T::GET => db::get(ev),
        T::GET_ALL => index::get_all(ev),
        T::BETWEEN | T::BETWEEN_DEPRECATED => index::between(ev),
        T::ASC | T::DESC => Err(logic(format!(
            "{} may only be used as an argument to ORDER_BY or UNION.",
            t.tt.name()
        ))),
        T::INDEX_CREATE => index::index_create(ev),
        T::INDEX_DROP => index::index_drop(ev),
        T::INDEX_LIST => index::index_list(ev),
        T::INDEX_RENAME => index::index_rename(ev),
        T::INDEX_STATUS => index::index_status(ev),
        T::INDEX_WAIT => index::index_wait(ev),
        T::SET_WRITE_HOOK => write_hook::set_write_hook(ev),
        T::GET_WRITE_HOOK => write_hook::get_write_hook(ev),
        T::GET_INTERSECTING => geo_index::get_intersecting(ev),
        T::GET_NEAREST => geo_index::get_nearest(ev),

        T::APPEND => array::append(ev),
        T::PREPEND => array::prepend(ev),
        T::DIFFERENCE => array::difference(ev),
        T::SET_INSERT => array::set_insert(ev),
        T::SET_UNION => array::set_union(ev),
        T::SET_INTERSECTION => array::set_intersection(ev),
        T::SET_DIFFERENCE => array::set_difference(ev),
        T::INSERT_AT => array::insert_at(ev),
        T::SPLICE_AT => array::splice_at(ev),
        T::DELETE_AT => array::delete_at(ev),
        T::CHANGE_AT => array::change_at(ev),
        T::OFFSETS_OF => array::offsets_of(ev),
        T::FOR_EACH => array::for_each(ev),
        T::BINARY => control::binary(ev),

        T::INSERT => write::insert(ev),
        T::UPDATE => write::update(ev),
        T::REPLACE => write::replace(ev),
        T::DELETE => write::delete(ev),

        T::TIME => time::time(ev),
        T::EPOCH_TIME => time::epoch_time(ev),
        T::ISO8601 => time::iso8601(ev),
        T::TO_ISO8601 => time::to_iso8601(ev),
        T::TO_EPOCH_TIME => time::to_epoch_time(ev),
        T::IN_TIMEZONE => time::in_timezone(ev),
        T::TIMEZONE => time::timezone(ev),
        T::DURING => time::during(ev),
        T::DATE => time::date(ev),
        T::TIME_OF_DAY => time::time_of_day(ev),
        T::YEAR => time::portion(ev),
        T::MONTH => time::portion(ev),
        T::DAY => time::portion(ev),
        T::DAY_OF_WEEK => time::portion(ev),
        T::DAY_OF_YEAR => time::portion(ev),
        T::HOURS => time::portion(ev),
        T::MINUTES => time::portion(ev),
        T::SECONDS => time::portion(ev),
        T::MONDAY => time::constant(ev),
        T::TUESDAY => time::constant(ev),
        T::WEDNESDAY => time::constant(ev),
        T::THURSDAY => time::constant(ev),
        T::FRIDAY => time::constant(ev),
        T::SATURDAY => time::constant(ev),
        T::SUNDAY => time::constant(ev),
        T::JANUARY => time::constant(ev),
        T::FEBRUARY => time::constant(ev),
        T::MARCH => time::constant(ev),
        T::APRIL => time::constant(ev),
        T::MAY => time::constant(ev),
        T::JUNE => time::constant(ev),
        T::JULY => time::constant(ev),
        T::AUGUST => time::constant(ev),
        T::SEPTEMBER => time::constant(ev),
        T::OCTOBER => time::constant(ev),
        T::NOVEMBER => time::constant(ev),
        T::DECEMBER => time::constant(ev),

        T::MATCH => strings::match_(ev),
        T::SPLIT => strings::split(ev),
        T::UPCASE => strings::upcase(ev),
        T::DOWNCASE => strings::downcase(ev),
        T::FORMAT => format::format(ev),

        T::POINT => geo::point(ev),
        T::LINE => geo::line(ev),
        T::POLYGON => geo::polygon(ev),
        T::CIRCLE => geo::circle(ev),
        T::GEOJSON => geo::geojson(ev),
        T::TO_GEOJSON => geo::to_geojson(ev),
        T::DISTANCE => geo::distance(ev),
        T::INTERSECTS => geo::intersects(ev),
        T::INCLUDES => geo::includes(ev),
        T::FILL => geo::fill(ev),
        T::POLYGON_SUB => geo::polygon_sub(ev),
    }
}
