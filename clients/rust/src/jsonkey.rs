//! Keys derived from fields of a JSON payload, as the server derives them
//! for a queue's `key_fields`: the canonical JSON (RFC 8785, JCS) of the
//! array of the values that the JSON pointers (RFC 6901) name, such as
//! `["acc-123",100]`.
//!
//! The same algorithm as the server's (Go, `internal/jsonkey`), byte for
//! byte, with the same error messages; the two share their test vectors
//! (`internal/jsonkey/testdata/vectors.json`). The parser and the serializer
//! use no recursion, so arrays and objects nested 10000 deep are accepted, as
//! on the server.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use crate::error::{Error, ErrorDetail};

/// The deepest nesting of arrays and objects accepted, as on the server.
const MAX_DEPTH: usize = 10000;

/// Why [`derive_key`] derived no key: a key field that names nothing in the
/// payload or is not a JSON pointer, or (pointer `""`) a payload that is not
/// a JSON object (I-JSON). Its `Display` is the server's message for the
/// same job (the `INVALID_FIELD` answer), naming the pointer:
/// `field "/amount": not in the payload; ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeriveKeyError {
    pointer: String,
    reason: String,
}

impl DeriveKeyError {
    fn new(pointer: &str, reason: impl Into<String>) -> DeriveKeyError {
        DeriveKeyError { pointer: pointer.to_owned(), reason: reason.into() }
    }

    /// The key field at fault, or `""` when the payload itself is.
    pub fn pointer(&self) -> &str {
        &self.pointer
    }

    /// What is wrong and what to do, without the pointer.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for DeriveKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "payload: {}", self.reason)
        } else {
            write!(f, "field {}: {}", quote(&self.pointer), self.reason)
        }
    }
}

impl std::error::Error for DeriveKeyError {}

/// The error as the server answers it: [`Error::InvalidField`] with the same
/// message and the metadata `pointer`.
impl From<DeriveKeyError> for Error {
    fn from(e: DeriveKeyError) -> Error {
        let mut metadata = BTreeMap::new();
        metadata.insert("pointer".to_owned(), e.pointer.clone());
        Error::InvalidField(ErrorDetail {
            reason: "INVALID_FIELD".into(),
            code: "invalid_argument".into(),
            message: e.to_string(),
            index: None,
            metadata,
        })
    }
}

/// The idempotency key that a queue with `key_fields = fields` derives from
/// `payload`, the same key the server gives a job enqueued without one: the
/// canonical JSON (RFC 8785) of the array of the values the JSON pointers
/// (RFC 6901) name.
///
/// ```
/// let key = sepp_rs::derive_key(br#"{"amount": 100, "account": "acc-123"}"#, &["/account", "/amount"])?;
/// assert_eq!(key, r#"["acc-123",100]"#);
/// # Ok::<(), sepp_rs::DeriveKeyError>(())
/// ```
///
/// The payload must be one JSON object in UTF-8 that is I-JSON: no invalid
/// UTF-8, no duplicate member names, no lone surrogates. Numbers count as
/// IEEE-754 doubles, so `100`, `100.0` and `1e2` give the same key and
/// integers beyond 2^53 are rounded (send those as strings).
///
/// # Errors
///
/// A [`DeriveKeyError`] with the server's message, naming the field at fault
/// ([`DeriveKeyError::pointer`], `""` when the payload itself is).
pub fn derive_key(payload: &[u8], fields: &[&str]) -> Result<String, DeriveKeyError> {
    if fields.is_empty() {
        return Err(DeriveKeyError::new(
            "",
            r#"no key_fields to derive an idempotency key from; list JSON pointers like ["/account", "/amount"]"#,
        ));
    }
    // Pointers are checked before the payload: a bad pointer is the
    // configuration's fault, whatever the job carries.
    for p in fields {
        if let Some(why) = check_pointer(p) {
            return Err(DeriveKeyError::new(
                p,
                format!(r#"is not a JSON pointer (RFC 6901): {why}; write it like "/account" or "/order/id""#),
            ));
        }
    }
    let advice = format!("the queue derives its idempotency key from key_fields {}", quote_list(fields));
    let need_object = format!("; {advice}, so every job needs a JSON object payload holding them, or an explicit key");
    if payload.is_empty() {
        return Err(DeriveKeyError::new("", format!("is empty, not a JSON object{need_object}")));
    }
    let mut parser = Parser { d: payload, pos: 0, depth: 0, path: Vec::new(), nodes: Vec::new() };
    let root = match parser.document() {
        Ok(root) => root,
        Err(e) => {
            return Err(DeriveKeyError::new(
                "",
                format!("is not valid JSON (I-JSON, RFC 7493): {} at byte offset {}{need_object}", e.msg, e.offset),
            ))
        }
    };
    let nodes = &parser.nodes;
    if !matches!(nodes[root], Node::Obj(_)) {
        return Err(DeriveKeyError::new("", format!("is {}, not a JSON object{need_object}", nodes[root].kind())));
    }
    let mut out = String::from("[");
    for (i, p) in fields.iter().enumerate() {
        let v = resolve(nodes, root, p)
            .map_err(|why| DeriveKeyError::new(p, format!("{why}; {advice}, so every job needs them, or send an explicit key")))?;
        if i > 0 {
            out.push(',');
        }
        canonical(nodes, v, &mut out).map_err(|literal| {
            DeriveKeyError::new(
                p,
                format!(
                    "the number {literal} is beyond the range of IEEE-754 doubles, which RFC 8785 numbers are; \
                     send a number within ±1.7976931348623157e308 (or the value as a string), or an explicit key"
                ),
            )
        })?;
    }
    out.push(']');
    Ok(out)
}

/// Why p is not a JSON pointer (RFC 6901), or `None` when it is.
fn check_pointer(p: &str) -> Option<&'static str> {
    if p.is_empty() {
        return None;
    }
    if !p.starts_with('/') {
        return Some(r#"it must start with "/""#);
    }
    let b = p.as_bytes();
    for (i, &c) in b.iter().enumerate() {
        if c == b'~' && !matches!(b.get(i + 1), Some(b'0') | Some(b'1')) {
            return Some(r#""~" must be written "~0", and "/" inside a name "~1""#);
        }
    }
    None
}

/// A parsed value; containers hold the indices of their items in the
/// parser's `nodes`, so nothing recurses (dropping included).
enum Node<'a> {
    Null,
    Bool(bool),
    /// The literal as written, converted to a double only when serialized.
    Num(&'a str),
    Str(String),
    Arr(Vec<usize>),
    Obj(Vec<(String, usize)>),
}

impl Node<'_> {
    fn kind(&self) -> &'static str {
        match self {
            Node::Null => "null",
            Node::Bool(_) => "a boolean",
            Node::Num(_) => "a number",
            Node::Str(_) => "a string",
            Node::Arr(_) => "an array",
            Node::Obj(_) => "an object",
        }
    }
}

struct SyntaxError {
    msg: String,
    offset: usize,
}

/// An open container while parsing: its node and, for an object, the names
/// seen so far.
struct Open {
    node: usize,
    seen: Option<HashSet<String>>,
}

struct Parser<'a> {
    d: &'a [u8],
    pos: usize,
    depth: usize,
    /// Reference tokens of the value being parsed, for errors.
    path: Vec<String>,
    nodes: Vec<Node<'a>>,
}

impl<'a> Parser<'a> {
    fn fail<T>(&self, msg: impl Into<String>) -> Result<T, SyntaxError> {
        Err(SyntaxError { msg: msg.into(), offset: self.pos })
    }

    fn peek(&self) -> Option<u8> {
        self.d.get(self.pos).copied()
    }

    fn describe(&self) -> String {
        match self.peek() {
            None => "end of input".to_owned(),
            Some(b'\'') => r"character '\''".to_owned(),
            Some(b'\\') => r"character '\\'".to_owned(),
            Some(c) if (0x20..0x7f).contains(&c) => format!("character '{}'", c as char),
            Some(c) => format!("byte 0x{c:x}"),
        }
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    fn enter(&mut self) -> Result<(), SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return self.fail(format!("arrays and objects nested more than {MAX_DEPTH} deep"));
        }
        Ok(())
    }

    fn push(&mut self, n: Node<'a>) -> usize {
        self.nodes.push(n);
        self.nodes.len() - 1
    }

    fn document(&mut self) -> Result<usize, SyntaxError> {
        self.skip_space();
        let v = self.value()?;
        self.skip_space();
        if self.pos < self.d.len() {
            return self.fail(format!("unexpected {} after the JSON value", self.describe()));
        }
        Ok(v)
    }

    /// Reads `"name" :` of a member and pushes the name on path.
    fn member_name(&mut self, seen: &mut HashSet<String>) -> Result<(), SyntaxError> {
        self.skip_space();
        if self.peek() != Some(b'"') {
            return self.fail(format!("unexpected {}, expected a member name in double quotes", self.describe()));
        }
        let start = self.pos;
        let name = self.string()?;
        if seen.contains(&name) {
            self.pos = start;
            return self.fail(format!(
                "duplicate member name {} in the object at {} (I-JSON, which RFC 8785 requires, forbids them)",
                quote(&name),
                quote(&pointer_of(&self.path))
            ));
        }
        seen.insert(name.clone());
        self.skip_space();
        if self.peek() != Some(b':') {
            return self.fail(format!("unexpected {}, expected ':' after a member name", self.describe()));
        }
        self.pos += 1;
        self.skip_space();
        self.path.push(name);
        Ok(())
    }

    fn value(&mut self) -> Result<usize, SyntaxError> {
        let mut stack: Vec<Open> = Vec::new();
        loop {
            // A value starts at self.pos.
            let mut v = match self.peek() {
                None => return self.fail("unexpected end of input, expected a JSON value"),
                Some(b'{') => {
                    self.enter()?;
                    self.pos += 1;
                    self.skip_space();
                    let node = self.push(Node::Obj(Vec::new()));
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        self.depth -= 1;
                        node
                    } else {
                        let mut seen = HashSet::new();
                        self.member_name(&mut seen)?;
                        stack.push(Open { node, seen: Some(seen) });
                        continue;
                    }
                }
                Some(b'[') => {
                    self.enter()?;
                    self.pos += 1;
                    self.skip_space();
                    let node = self.push(Node::Arr(Vec::new()));
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        self.depth -= 1;
                        node
                    } else {
                        self.path.push("0".to_owned());
                        stack.push(Open { node, seen: None });
                        continue;
                    }
                }
                Some(b'"') => {
                    let s = self.string()?;
                    self.push(Node::Str(s))
                }
                Some(b'-' | b'0'..=b'9') => {
                    let n = self.number()?;
                    self.push(n)
                }
                Some(b't') => self.literal("true", Node::Bool(true))?,
                Some(b'f') => self.literal("false", Node::Bool(false))?,
                Some(b'n') => self.literal("null", Node::Null)?,
                Some(_) => return self.fail(format!("unexpected {}, expected a JSON value", self.describe())),
            };
            // v is complete: add it to the containers it closes.
            loop {
                let top = match stack.last_mut() {
                    Some(top) => top,
                    None => return Ok(v),
                };
                let is_obj = top.seen.is_some();
                let name = self.path.pop().unwrap_or_default();
                let len = match &mut self.nodes[top.node] {
                    Node::Obj(members) => {
                        members.push((name, v));
                        members.len()
                    }
                    Node::Arr(items) => {
                        items.push(v);
                        items.len()
                    }
                    _ => unreachable!("only containers are open"),
                };
                self.skip_space();
                if self.peek() == Some(b',') {
                    self.pos += 1;
                    if let Some(seen) = top.seen.as_mut() {
                        self.member_name(seen)?;
                    } else {
                        self.skip_space();
                        self.path.push(len.to_string());
                    }
                    break;
                }
                let (close, what) = if is_obj { (b'}', "',' or '}' in an object") } else { (b']', "',' or ']' in an array") };
                if self.peek() == Some(close) {
                    self.pos += 1;
                    self.depth -= 1;
                    v = top.node;
                    stack.pop();
                    continue;
                }
                return self.fail(format!("unexpected {}, expected {what}", self.describe()));
            }
        }
    }

    fn literal(&mut self, word: &str, n: Node<'a>) -> Result<usize, SyntaxError> {
        if !self.d[self.pos..].starts_with(word.as_bytes()) {
            return self.fail(format!("unexpected {}, expected a JSON value", self.describe()));
        }
        self.pos += word.len();
        Ok(self.push(n))
    }

    /// Scans a number as RFC 8259 writes it and keeps its literal.
    fn number(&mut self) -> Result<Node<'a>, SyntaxError> {
        let d = self.d;
        let start = self.pos;
        let mut i = self.pos;
        let digits = |i: &mut usize| {
            let from = *i;
            while *i < d.len() && d[*i].is_ascii_digit() {
                *i += 1;
            }
            *i - from
        };
        if d.get(i) == Some(&b'-') {
            i += 1;
        }
        match d.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                digits(&mut i);
            }
            _ => {
                self.pos = i;
                return self.fail(format!("unexpected {} in a number, expected a digit", self.describe()));
            }
        }
        if d.get(i) == Some(&b'.') {
            i += 1;
            if digits(&mut i) == 0 {
                self.pos = i;
                return self.fail(format!("unexpected {} in a number, expected a digit after '.'", self.describe()));
            }
        }
        if matches!(d.get(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(d.get(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if digits(&mut i) == 0 {
                self.pos = i;
                return self.fail(format!("unexpected {} in a number, expected a digit in the exponent", self.describe()));
            }
        }
        self.pos = i;
        // The literal is ASCII: it was scanned byte by byte above.
        Ok(Node::Num(std::str::from_utf8(&d[start..i]).expect("a number literal is ASCII")))
    }

    /// Decodes a string literal; self.pos is at its opening quote.
    fn string(&mut self) -> Result<String, SyntaxError> {
        let d = self.d;
        self.pos += 1;
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            let mut end = self.pos;
            while end < d.len() && d[end] != b'"' && d[end] != b'\\' && d[end] >= 0x20 {
                end += 1;
            }
            if end > run_start {
                match std::str::from_utf8(&d[run_start..end]) {
                    Ok(s) => out.push_str(s),
                    Err(e) => {
                        self.pos = run_start + e.valid_up_to();
                        return self.fail("invalid UTF-8 in a string");
                    }
                }
                self.pos = end;
            }
            match self.peek() {
                None => return self.fail("unexpected end of input in a string"),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => out.push(self.escape()?),
                Some(c) => return self.fail(format!(r"control character 0x{c:x} in a string (write it as an escape like \n or \u001f)")),
            }
        }
    }

    /// Decodes one escape at self.pos (a backslash), joining a surrogate pair
    /// written as two \u escapes.
    fn escape(&mut self) -> Result<char, SyntaxError> {
        let d = self.d;
        let c = match d.get(self.pos + 1) {
            Some(&c) => c,
            None => {
                self.pos += 1;
                return self.fail("unexpected end of input in a string");
            }
        };
        let simple = match c {
            b'"' => Some('"'),
            b'\\' => Some('\\'),
            b'/' => Some('/'),
            b'b' => Some('\u{8}'),
            b'f' => Some('\u{c}'),
            b'n' => Some('\n'),
            b'r' => Some('\r'),
            b't' => Some('\t'),
            _ => None,
        };
        if let Some(ch) = simple {
            self.pos += 2;
            return Ok(ch);
        }
        if c == b'u' {
            let r = match hex4(&d[self.pos + 2..]) {
                Some(r) => r,
                None => {
                    self.pos += 2;
                    return self.fail(r"invalid \u escape in a string, expected four hex digits");
                }
            };
            if (0xd800..0xdc00).contains(&r) {
                if d.len() >= self.pos + 12 && d[self.pos + 6] == b'\\' && d[self.pos + 7] == b'u' {
                    if let Some(r2) = hex4(&d[self.pos + 8..]) {
                        if (0xdc00..0xe000).contains(&r2) {
                            self.pos += 12;
                            let cp = 0x10000 + ((r - 0xd800) << 10) + (r2 - 0xdc00);
                            return Ok(char::from_u32(cp).expect("a surrogate pair is a code point"));
                        }
                    }
                }
                return self.fail(format!(r"lone surrogate \u{r:x} in a string (I-JSON forbids it)"));
            }
            if (0xdc00..0xe000).contains(&r) {
                return self.fail(format!(r"lone surrogate \u{r:x} in a string (I-JSON forbids it)"));
            }
            self.pos += 6;
            return Ok(char::from_u32(r).expect("not a surrogate"));
        }
        self.pos += 1;
        let rest = &d[self.pos..d.len().min(self.pos + 4)];
        let valid = match std::str::from_utf8(rest) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or(""),
        };
        let ch = valid.chars().next().unwrap_or('\u{fffd}');
        self.fail(format!(r"invalid escape \{ch} in a string"))
    }
}

fn hex4(b: &[u8]) -> Option<u32> {
    if b.len() < 4 {
        return None;
    }
    let mut r = 0u32;
    for &c in &b[..4] {
        r = r << 4 | (c as char).to_digit(16)?;
    }
    Some(r)
}

/// `s` quoted as ECMAScript's JSON.stringify does: the two-character escapes
/// \b \t \n \f \r \" \\, other control characters as \u00xx with lowercase
/// hex, everything else as it is (U+007F, U+2028 and U+2029 included).
fn push_string(out: &mut String, s: &str) {
    out.push('"');
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        if b >= 0x20 && b != b'"' && b != b'\\' {
            continue;
        }
        out.push_str(&s[start..i]);
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            0x0c => out.push_str("\\f"),
            b'\r' => out.push_str("\\r"),
            _ => out.push_str(&format!("\\u{b:04x}")),
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

fn quote(s: &str) -> String {
    let mut out = String::new();
    push_string(&mut out, s);
    out
}

fn quote_list(list: &[&str]) -> String {
    let mut b = String::from("[");
    for (i, s) in list.iter().enumerate() {
        if i > 0 {
            b.push(',');
        }
        push_string(&mut b, s);
    }
    if b.len() > 300 {
        // Messages stay readable when the pointers are long.
        let mut cut = 300;
        while !b.is_char_boundary(cut) {
            cut -= 1;
        }
        b.truncate(cut);
        b.push('…');
        return b;
    }
    b.push(']');
    b
}

/// Reference tokens written as a JSON pointer.
fn pointer_of(tokens: &[String]) -> String {
    let mut out = String::new();
    for t in tokens {
        out.push('/');
        out.push_str(&t.replace('~', "~0").replace('/', "~1"));
    }
    out
}

/// The node that the valid pointer p names (RFC 6901 section 4), or why
/// there is none.
fn resolve(nodes: &[Node<'_>], root: usize, p: &str) -> Result<usize, String> {
    if p.is_empty() {
        return Ok(root);
    }
    let mut v = root;
    let mut at = 0; // p[..at] is the pointer of v
    for raw in p[1..].split('/') {
        let token = raw.replace("~1", "/").replace("~0", "~");
        let parent = &p[..at];
        match &nodes[v] {
            Node::Obj(members) => match members.iter().find(|(name, _)| *name == token) {
                Some(&(_, next)) => v = next,
                None if parent.is_empty() => return Err("not in the payload".to_owned()),
                None => return Err(format!("not in the payload (the object at {} has no member {})", quote(parent), quote(&token))),
            },
            Node::Arr(items) => match array_index(&token, items.len()) {
                Ok(i) => v = items[i],
                Err(why) => return Err(format!("{why} ({} is an array of {})", quote(parent), items.len())),
            },
            other => return Err(format!("not in the payload ({} is {}, which has no members or elements)", quote(parent), other.kind())),
        }
        at += 1 + raw.len();
    }
    Ok(v)
}

/// An RFC 6901 array index: "0" or decimal digits without a leading zero,
/// below n.
fn array_index(token: &str, n: usize) -> Result<usize, String> {
    if token == "-" {
        return Err(r#""-" names the element after the last one, which never exists; name an index from 0"#.to_owned());
    }
    let b = token.as_bytes();
    let valid = !b.is_empty() && (token == "0" || b[0] != b'0') && b.iter().all(u8::is_ascii_digit);
    if !valid {
        return Err(format!("{} is not an array index (a decimal number without leading zeros, from 0)", quote(token)));
    }
    match token.parse::<usize>() {
        Ok(i) if i < n => Ok(i),
        _ => Err(format!("not in the payload (there is no element {token})")),
    }
}

/// An open container while serializing.
enum Frame<'n> {
    Arr(&'n [usize], usize),
    Obj(Vec<&'n (String, usize)>, usize),
}

/// Appends the RFC 8785 serialization of node v; the error is the literal of
/// a number beyond the doubles.
fn canonical<'n>(nodes: &'n [Node<'_>], mut v: usize, out: &mut String) -> Result<(), String> {
    let mut stack: Vec<Frame<'n>> = Vec::new();
    loop {
        match &nodes[v] {
            Node::Null => out.push_str("null"),
            Node::Bool(true) => out.push_str("true"),
            Node::Bool(false) => out.push_str("false"),
            Node::Num(literal) => push_number(out, literal)?,
            Node::Str(s) => push_string(out, s),
            Node::Arr(items) => {
                out.push('[');
                stack.push(Frame::Arr(items, 0));
            }
            Node::Obj(members) => {
                out.push('{');
                let mut sorted: Vec<&(String, usize)> = members.iter().collect();
                // RFC 8785 section 3.2.3: by UTF-16 code units.
                sorted.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
                stack.push(Frame::Obj(sorted, 0));
            }
        }
        // The next value to write, closing the containers that are done.
        loop {
            match stack.last_mut() {
                None => return Ok(()),
                Some(Frame::Arr(items, i)) => {
                    if *i == items.len() {
                        out.push(']');
                        stack.pop();
                        continue;
                    }
                    if *i > 0 {
                        out.push(',');
                    }
                    v = items[*i];
                    *i += 1;
                    break;
                }
                Some(Frame::Obj(members, i)) => {
                    if *i == members.len() {
                        out.push('}');
                        stack.pop();
                        continue;
                    }
                    if *i > 0 {
                        out.push(',');
                    }
                    let (name, value) = members[*i];
                    push_string(out, name);
                    out.push(':');
                    v = *value;
                    *i += 1;
                    break;
                }
            }
        }
    }
}

/// Appends the literal's IEEE-754 double as ECMAScript's
/// Number.prototype.toString writes it (ECMA-262 Number::toString, which RFC
/// 8785 section 3.2.2.3 adopts): the shortest decimal that reads back as the
/// double, in plain notation for 1e-7 <= |x| < 1e21 and with an exponent
/// otherwise; -0 is "0". The error is the literal when it is beyond the
/// doubles.
fn push_number(out: &mut String, literal: &str) -> Result<(), String> {
    // Correctly rounded; overflow gives infinity, underflow 0 or a subnormal.
    let f: f64 = literal.parse().map_err(|_| literal.to_owned())?;
    if !f.is_finite() {
        return Err(literal.to_owned());
    }
    if f == 0.0 {
        out.push('0');
        return Ok(());
    }
    if f < 0.0 {
        out.push('-');
    }
    // The shortest round-trip digits, ties to even, from Ryu (Rust's own
    // LowerExp is shortest too, but breaks ties upward: 1424953923781206.25
    // comes out ...206.3, where ECMAScript writes ...206.2). Its notation
    // ("100.0", "1e21", "1.5e-7") is read for the digits and the point.
    let mut buffer = ryu::Buffer::new();
    let r = buffer.format_finite(f.abs());
    let (mant, exp) = r.split_once(['e', 'E']).unwrap_or((r, "0"));
    let (whole, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let all = format!("{whole}{frac}");
    let x: i32 = exp.parse().expect("Ryu writes a decimal exponent");
    let trimmed = all.trim_start_matches('0');
    // The decimal point sits after n digits.
    let n = whole.len() as i32 + x - (all.len() - trimmed.len()) as i32;
    let digits = trimmed.trim_end_matches('0');
    let k = digits.len() as i32;
    if k <= n && n <= 21 {
        out.push_str(digits);
        out.extend(std::iter::repeat('0').take((n - k) as usize));
    } else if 0 < n && n <= 21 {
        out.push_str(&digits[..n as usize]);
        out.push('.');
        out.push_str(&digits[n as usize..]);
    } else if -6 < n && n <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat('0').take((-n) as usize));
        out.push_str(digits);
    } else {
        out.push_str(&digits[..1]);
        if k > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        if n > 0 {
            out.push('+');
        }
        out.push_str(&(n - 1).to_string());
    }
    Ok(())
}
