//! A generator of small well-typed ReQL queries, in the wire's JSON term form, driven by
//! the fuzzer's bytes (`arbitrary::Unstructured`).
//!
//! Every sub-term is asked for with a type (`Ty`) and built from terms that yield it when
//! their arguments have theirs, so most queries get past type checks into the
//! interesting code (a few still fail: `nth` out of range, division by zero, a missing
//! field — those errors are compared too). Functions bind typed variables; leaves read
//! them (and the fields of bound documents). Sizes are bounded: depth, node count,
//! `r.range` of at most 10, so every query is small and fast. Never generated: writes,
//! and the nondeterministic terms (`r.random`, `r.uuid`, `r.now`, `r.js`, `r.http`,
//! `sample`).

use arbitrary::{Result, Unstructured};
use serde_json::{json, Value};

/// The types the generator asks for.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ty {
    Num,
    Str,
    Bool,
    /// An object shaped like the table's documents (`id`, `n`, `s`, `a`, `g`).
    Doc,
    NumArr,
    StrArr,
    DocArr,
    /// A stream of documents (a table, or a selection of it).
    DocSeq,
    NumSeq,
}

const ALL: [Ty; 9] = [
    Ty::Num,
    Ty::Str,
    Ty::Bool,
    Ty::Doc,
    Ty::NumArr,
    Ty::StrArr,
    Ty::DocArr,
    Ty::DocSeq,
    Ty::NumSeq,
];

/// Largest term depth and node count of one query.
const MAX_DEPTH: u32 = 5;
const MAX_NODES: u32 = 48;

/// A query built from `data`, or `None` when the bytes are too few to decide one.
pub fn query(data: &[u8]) -> Option<Value> {
    let mut u = Unstructured::new(data);
    let mut g = Gen {
        u: &mut u,
        vars: Vec::new(),
        next_var: 1,
        nodes: 0,
    };
    g.top().ok()
}

struct Gen<'a, 'u> {
    u: &'u mut Unstructured<'a>,
    vars: Vec<(i64, Ty)>,
    next_var: i64,
    nodes: u32,
}

fn t(tt: u32, args: Vec<Value>) -> Value {
    json!([tt, args])
}

fn table() -> Value {
    json!([15, ["t"]])
}

impl Gen<'_, '_> {
    fn n(&mut self, k: u32) -> Result<u32> {
        self.u.int_in_range(0..=k.saturating_sub(1))
    }

    fn top(&mut self) -> Result<Value> {
        if self.n(6)? == 0 {
            return self.grouped(MAX_DEPTH);
        }
        let ty = *self.u.choose(&ALL)?;
        self.gen(ty, MAX_DEPTH)
    }

    /// `group` by a field or a function, then maybe a reduction, maybe `ungroup`.
    fn grouped(&mut self, depth: u32) -> Result<Value> {
        let seq = self.gen(Ty::DocSeq, depth - 1)?;
        let by = match self.n(3)? {
            0 => json!("g"),
            1 => json!("s"),
            _ => self.func(&[Ty::Doc], Ty::Num, depth - 1)?,
        };
        let g = t(144, vec![seq, by]);
        let reduced = match self.n(6)? {
            0 => g,
            1 => t(43, vec![g]),
            2 => t(145, vec![g, json!("n")]),
            3 => t(148, vec![g, json!("n")]),
            4 => {
                let f = self.func(&[Ty::Doc], Ty::Num, depth - 1)?;
                t(145, vec![t(38, vec![g, f])])
            }
            _ => t(146, vec![g, json!("n")]),
        };
        Ok(if self.u.arbitrary()? {
            t(150, vec![reduced])
        } else {
            reduced
        })
    }

    fn gen(&mut self, ty: Ty, depth: u32) -> Result<Value> {
        self.nodes += 1;
        if depth == 0 || self.nodes > MAX_NODES || self.u.is_empty() || self.n(5)? == 0 {
            return self.leaf(ty);
        }
        let d = depth - 1;
        match ty {
            Ty::Num => self.num(d),
            Ty::Str => self.str(d),
            Ty::Bool => self.bool(d),
            Ty::Doc => self.doc(d),
            Ty::NumArr => self.arr(Ty::Num, d),
            Ty::StrArr => self.arr(Ty::Str, d),
            Ty::DocArr => self.arr(Ty::Doc, d),
            Ty::DocSeq => self.doc_seq(d),
            Ty::NumSeq => self.num_seq(d),
        }
    }

    /// A literal, a bound variable, or a field of a bound document.
    fn leaf(&mut self, ty: Ty) -> Result<Value> {
        let direct: Vec<i64> = self
            .vars
            .iter()
            .filter(|(_, t)| *t == ty)
            .map(|(v, _)| *v)
            .collect();
        let docs: Vec<i64> = self
            .vars
            .iter()
            .filter(|(_, t)| *t == Ty::Doc)
            .map(|(v, _)| *v)
            .collect();
        let field = match ty {
            Ty::Num => Some(*self.u.choose(&["n", "id", "g"])?),
            Ty::Str => Some("s"),
            Ty::NumArr => Some("a"),
            _ => None,
        };
        match self.n(3)? {
            0 if !direct.is_empty() => return Ok(t(10, vec![json!(*self.u.choose(&direct)?)])),
            1 if !docs.is_empty() && field.is_some() => {
                let v = *self.u.choose(&docs)?;
                return Ok(t(31, vec![t(10, vec![json!(v)]), json!(field)]));
            }
            _ => {}
        }
        self.literal(ty)
    }

    fn literal(&mut self, ty: Ty) -> Result<Value> {
        Ok(match ty {
            Ty::Num => self.num_lit()?,
            Ty::Str => self.str_lit()?,
            Ty::Bool => json!(self.u.arbitrary::<bool>()?),
            Ty::Doc => {
                let (id, n, s) = (self.num_lit()?, self.num_lit()?, self.str_lit()?);
                json!({"id": id, "n": n, "s": s, "g": 1, "a": [2, [n]]})
            }
            Ty::NumArr => {
                let k = self.n(4)?;
                let items = (0..k).map(|_| self.num_lit()).collect::<Result<_>>()?;
                t(2, items)
            }
            Ty::StrArr => {
                let k = self.n(4)?;
                let items = (0..k).map(|_| self.str_lit()).collect::<Result<_>>()?;
                t(2, items)
            }
            Ty::DocArr => {
                let k = self.n(3)?;
                let items = (0..k)
                    .map(|_| self.literal(Ty::Doc))
                    .collect::<Result<_>>()?;
                t(2, items)
            }
            Ty::DocSeq => table(),
            Ty::NumSeq => {
                let k = self.n(11)?;
                t(173, vec![json!(k)])
            }
        })
    }

    fn num_lit(&mut self) -> Result<Value> {
        Ok(match self.n(3)? {
            0 => json!(self.u.int_in_range(-3i8..=12)?),
            1 => json!(*self
                .u
                .choose(&[0.5, -2.5, 1e300, -1e-300, 0.1, 9007199254740993.0])?),
            _ => json!(self.u.int_in_range(0u8..=40)?),
        })
    }

    fn str_lit(&mut self) -> Result<Value> {
        Ok(json!(*self.u.choose(&[
            "", "a", "b", "x", "zz", "Ab", "a,b", "é", "k36", "g"
        ])?))
    }

    /// A function of `params`, whose body is of type `ret`.
    fn func(&mut self, params: &[Ty], ret: Ty, depth: u32) -> Result<Value> {
        let ids: Vec<i64> = params
            .iter()
            .map(|p| {
                let id = self.next_var;
                self.next_var += 1;
                self.vars.push((id, *p));
                id
            })
            .collect();
        let body = self.gen(ret, depth);
        self.vars.truncate(self.vars.len() - ids.len());
        Ok(t(
            69,
            vec![t(2, ids.into_iter().map(|i| json!(i)).collect()), body?],
        ))
    }

    fn any(&mut self, depth: u32) -> Result<(Ty, Value)> {
        let ty = *self.u.choose(&ALL)?;
        Ok((ty, self.gen(ty, depth)?))
    }

    fn num_source(&mut self, depth: u32) -> Result<Value> {
        if self.u.arbitrary()? {
            self.gen(Ty::NumArr, depth)
        } else {
            self.gen(Ty::NumSeq, depth)
        }
    }

    fn doc_source(&mut self, depth: u32) -> Result<Value> {
        if self.n(3)? == 0 {
            self.gen(Ty::DocArr, depth)
        } else {
            self.gen(Ty::DocSeq, depth)
        }
    }

    fn num(&mut self, d: u32) -> Result<Value> {
        Ok(match self.n(13)? {
            0 => {
                let tt = *self.u.choose(&[24, 25, 26])?;
                t(tt, vec![self.gen(Ty::Num, d)?, self.gen(Ty::Num, d)?])
            }
            1 => {
                let tt = *self.u.choose(&[27, 28])?;
                t(tt, vec![self.gen(Ty::Num, d)?, self.gen(Ty::Num, d)?])
            }
            2 => t(
                *self.u.choose(&[183, 184, 185])?,
                vec![self.gen(Ty::Num, d)?],
            ),
            3 => {
                let (_, x) = self.any(d)?;
                let src = match self.n(3)? {
                    0 => x,
                    1 => self.num_source(d)?,
                    _ => self.doc_source(d)?,
                };
                t(43, vec![src])
            }
            4 => t(
                *self.u.choose(&[145, 146, 147, 148])?,
                vec![self.num_source(d)?],
            ),
            5 => {
                let tt = *self.u.choose(&[145, 146, 147, 148])?;
                let src = self.doc_source(d)?;
                let r = t(tt, vec![src, json!("n")]);
                // min/max by a field give the document: take its field.
                if tt >= 147 {
                    t(31, vec![r, json!("n")])
                } else {
                    r
                }
            }
            6 => {
                let src = self.num_source(d)?;
                let f = self.func(&[Ty::Num, Ty::Num], Ty::Num, d)?;
                t(37, vec![src, f])
            }
            7 => {
                let src = self.doc_source(d)?;
                let base = self.gen(Ty::Num, d)?;
                let f = self.func(&[Ty::Num, Ty::Doc], Ty::Num, d)?;
                t(187, vec![src, base, f])
            }
            8 => t(45, vec![self.num_source(d)?, self.gen(Ty::Num, d)?]),
            9 => {
                let f = *self.u.choose(&["n", "id", "g"])?;
                t(170, vec![self.gen(Ty::Doc, d)?, json!(f)])
            }
            10 => t(
                65,
                vec![
                    self.gen(Ty::Bool, d)?,
                    self.gen(Ty::Num, d)?,
                    self.gen(Ty::Num, d)?,
                ],
            ),
            11 => t(92, vec![self.gen(Ty::Num, d)?, self.gen(Ty::Num, d)?]),
            _ => t(51, vec![self.gen(Ty::Str, d)?, json!("number")]),
        })
    }

    fn str(&mut self, d: u32) -> Result<Value> {
        Ok(match self.n(8)? {
            0 => t(24, vec![self.gen(Ty::Str, d)?, self.gen(Ty::Str, d)?]),
            1 => t(*self.u.choose(&[141, 142])?, vec![self.gen(Ty::Str, d)?]),
            2 => t(52, vec![self.any(d)?.1]),
            3 => t(51, vec![self.any(d)?.1, json!("string")]),
            4 => t(172, vec![self.any(d)?.1]),
            5 => t(170, vec![self.gen(Ty::Doc, d)?, json!("s")]),
            6 => t(45, vec![self.gen(Ty::StrArr, d)?, self.gen(Ty::Num, d)?]),
            _ => t(
                30,
                vec![
                    self.gen(Ty::Str, d)?,
                    self.gen(Ty::Num, d)?,
                    self.gen(Ty::Num, d)?,
                ],
            ),
        })
    }

    fn bool(&mut self, d: u32) -> Result<Value> {
        Ok(match self.n(7)? {
            0 => {
                let tt = *self.u.choose(&[17, 18, 19, 20, 21, 22])?;
                let ty = *self.u.choose(&ALL)?;
                t(tt, vec![self.gen(ty, d)?, self.gen(ty, d)?])
            }
            1 => t(23, vec![self.gen(Ty::Bool, d)?]),
            2 => {
                let tt = *self.u.choose(&[66, 67])?;
                t(tt, vec![self.gen(Ty::Bool, d)?, self.gen(Ty::Bool, d)?])
            }
            3 => t(93, vec![self.gen(Ty::NumArr, d)?, self.gen(Ty::Num, d)?]),
            4 => t(86, vec![self.doc_source(d)?]),
            5 => {
                let f = *self.u.choose(&["n", "s", "q"])?;
                t(32, vec![self.gen(Ty::Doc, d)?, json!(f)])
            }
            _ => t(17, vec![self.any(d)?.1, self.any(d)?.1]),
        })
    }

    fn doc(&mut self, d: u32) -> Result<Value> {
        Ok(match self.n(7)? {
            0 => t(35, vec![self.gen(Ty::Doc, d)?, self.gen(Ty::Doc, d)?]),
            1 => {
                let tt = *self.u.choose(&[33, 34])?;
                let f = *self.u.choose(&["n", "s", "id"])?;
                t(tt, vec![self.gen(Ty::Doc, d)?, json!(f), json!("a")])
            }
            2 => {
                let key = if self.u.arbitrary()? {
                    self.gen(Ty::Num, d)?
                } else {
                    json!(*self.u.choose(&["k36", "k39", "nope"])?)
                };
                t(16, vec![table(), key])
            }
            3 => t(45, vec![self.doc_source(d)?, self.gen(Ty::Num, d)?]),
            4 => t(
                65,
                vec![
                    self.gen(Ty::Bool, d)?,
                    self.gen(Ty::Doc, d)?,
                    self.gen(Ty::Doc, d)?,
                ],
            ),
            5 => {
                let tt = *self.u.choose(&[147, 148])?;
                t(tt, vec![self.doc_source(d)?, json!("n")])
            }
            _ => {
                let (n, s) = (self.gen(Ty::Num, d)?, self.gen(Ty::Str, d)?);
                json!({"id": 1, "n": n, "s": s, "g": 0, "a": [2, [0]]})
            }
        })
    }

    /// An array of `item`s.
    fn arr(&mut self, item: Ty, d: u32) -> Result<Value> {
        let me = match item {
            Ty::Num => Ty::NumArr,
            Ty::Str => Ty::StrArr,
            _ => Ty::DocArr,
        };
        Ok(match self.n(12)? {
            0 => {
                let k = self.n(4)?;
                let items = (0..k).map(|_| self.gen(item, d)).collect::<Result<_>>()?;
                t(2, items)
            }
            1 => {
                let tt = *self.u.choose(&[29, 80])?;
                t(tt, vec![self.gen(me, d)?, self.gen(item, d)?])
            }
            2 => t(
                30,
                vec![
                    self.gen(me, d)?,
                    self.gen(Ty::Num, d)?,
                    self.gen(Ty::Num, d)?,
                ],
            ),
            3 => {
                let tt = *self.u.choose(&[70, 71])?;
                t(tt, vec![self.gen(me, d)?, self.gen(Ty::Num, d)?])
            }
            4 => t(44, vec![self.gen(me, d)?, self.gen(me, d)?]),
            5 => {
                let key = match (item, self.n(3)?) {
                    (Ty::Doc, 0) => json!(*self.u.choose(&["n", "id", "s"])?),
                    (Ty::Doc, 1) => t(74, vec![json!("n")]),
                    (_, _) => {
                        let f = self.func(&[item], Ty::Num, d)?;
                        if self.u.arbitrary()? {
                            t(74, vec![f])
                        } else {
                            f
                        }
                    }
                };
                let src = if item == Ty::Doc {
                    self.doc_source(d)?
                } else {
                    self.gen(me, d)?
                };
                t(41, vec![src, key])
            }
            6 => t(42, vec![self.gen(me, d)?]),
            7 => {
                let (src, p) = match self.n(3)? {
                    0 => (self.doc_source(d)?, Ty::Doc),
                    1 => (self.gen(Ty::NumSeq, d)?, Ty::Num),
                    _ => (self.gen(Ty::NumArr, d)?, Ty::Num),
                };
                let f = self.func(&[p], item, d)?;
                t(51, vec![t(38, vec![src, f]), json!("array")])
            }
            8 => {
                let f = self.func(&[item], Ty::Bool, d)?;
                t(39, vec![self.gen(me, d)?, f])
            }
            9 => {
                let tt = *self.u.choose(&[89, 90, 91, 95])?;
                t(tt, vec![self.gen(me, d)?, self.gen(me, d)?])
            }
            10 => match item {
                Ty::Num => t(170, vec![self.gen(Ty::Doc, d)?, json!("a")]),
                Ty::Str => match self.n(3)? {
                    0 => t(149, vec![self.gen(Ty::Str, d)?]),
                    1 => t(149, vec![self.gen(Ty::Str, d)?, json!(",")]),
                    _ => t(94, vec![self.gen(Ty::Doc, d)?]),
                },
                _ => t(51, vec![self.gen(Ty::DocSeq, d)?, json!("array")]),
            },
            _ => {
                let tt = *self.u.choose(&[82, 83, 84])?;
                let mut args = vec![self.gen(me, d)?, self.gen(Ty::Num, d)?];
                if tt != 83 {
                    args.push(self.gen(item, d)?);
                }
                t(tt, args)
            }
        })
    }

    fn doc_seq(&mut self, d: u32) -> Result<Value> {
        Ok(match self.n(9)? {
            0 => {
                let pred = if self.u.arbitrary()? {
                    self.func(&[Ty::Doc], Ty::Bool, d)?
                } else {
                    json!({"g": self.u.int_in_range(0u8..=4)?})
                };
                t(39, vec![self.gen(Ty::DocSeq, d)?, pred])
            }
            1 => {
                let index = *self.u.choose(&["id", "g"])?;
                let key = if self.u.arbitrary()? {
                    t(74, vec![json!(index)])
                } else {
                    json!(index)
                };
                json!([41, [table()], {"index": key}])
            }
            2 => {
                let tt = *self.u.choose(&[70, 71])?;
                t(tt, vec![self.gen(Ty::DocSeq, d)?, self.gen(Ty::Num, d)?])
            }
            3 => {
                let bound = |g: &mut Self| -> Result<Value> {
                    Ok(match g.n(4)? {
                        0 => t(180, vec![]),
                        1 => t(181, vec![]),
                        2 => g.str_lit()?,
                        _ => g.num_lit()?,
                    })
                };
                let (lo, hi) = (bound(self)?, bound(self)?);
                if self.u.arbitrary()? {
                    json!([182, [table(), lo, hi], {"index": "g"}])
                } else {
                    t(182, vec![table(), lo, hi])
                }
            }
            4 => {
                let f = self.func(&[Ty::Doc], Ty::Doc, d)?;
                t(38, vec![self.gen(Ty::DocSeq, d)?, f])
            }
            5 => {
                let k = self.n(3)? + 1;
                let mut args = vec![table()];
                for _ in 0..k {
                    args.push(self.gen(Ty::Num, d)?);
                }
                if self.u.arbitrary()? {
                    json!([78, args, {"index": "g"}])
                } else {
                    t(78, args)
                }
            }
            6 => t(44, vec![self.gen(Ty::DocSeq, d)?, self.gen(Ty::DocSeq, d)?]),
            7 => {
                let f = self.func(&[Ty::Doc], Ty::DocArr, d)?;
                t(40, vec![self.gen(Ty::DocSeq, d)?, f])
            }
            _ => {
                let f = *self.u.choose(&["n", "s", "a"])?;
                t(42, vec![t(33, vec![self.gen(Ty::DocSeq, d)?, json!(f)])])
            }
        })
    }

    fn num_seq(&mut self, d: u32) -> Result<Value> {
        Ok(match self.n(4)? {
            0 => {
                let (a, b) = (
                    self.u.int_in_range(-3i8..=5)?,
                    self.u.int_in_range(0u8..=10)?,
                );
                t(173, vec![json!(a), json!(b)])
            }
            1 => {
                let f = self.func(&[Ty::Doc], Ty::Num, d)?;
                t(38, vec![self.gen(Ty::DocSeq, d)?, f])
            }
            2 => {
                let f = self.func(&[Ty::Num], Ty::Bool, d)?;
                t(39, vec![self.gen(Ty::NumSeq, d)?, f])
            }
            _ => t(31, vec![self.gen(Ty::DocSeq, d)?, json!("n")]),
        })
    }
}
